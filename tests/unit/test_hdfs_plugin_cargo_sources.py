"""Where cargo builds the plugin: a directory named by crc's sources, whose
times are fixed there, so a fresh checkout does not recompile hdfs-native."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tfyarn.hdfs_plugin import cargo_sources


@pytest.fixture
def crc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "crc"
    shutil.copytree(cargo_sources.CRC, copy)
    for path in cargo_sources.sources(copy):
        os.utime(path)  # now, as a fresh clone has it (copytree kept the times)
    monkeypatch.setattr(cargo_sources, "CRC", copy)
    monkeypatch.delenv("CARGO_TARGET_DIR", raising=False)
    monkeypatch.setenv("TFYARN_CACHE_DIR", str(tmp_path / "cache"))
    return copy


def test_the_same_sources_build_in_the_same_directory_a_change_in_another(
    crc: Path,
) -> None:
    first = cargo_sources.prepare()
    assert first.parent == crc.parent / "cache" / "hdfs-plugin-target"
    assert cargo_sources.prepare() == first
    lib = crc / "src" / "lib.rs"
    lib.write_text(lib.read_text() + "\n// changed\n")
    assert cargo_sources.prepare() != first


def test_crc_sources_get_the_fixed_time_only_in_the_digest_named_directory(
    crc: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    files = cargo_sources.sources(crc)
    assert crc / "Cargo.toml" in files and crc / "src" / "lib.rs" in files
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path / "mine"))
    assert cargo_sources.prepare() == tmp_path / "mine"
    assert all(f.stat().st_mtime_ns != cargo_sources.FIXED_TIME_NS for f in files)
    monkeypatch.delenv("CARGO_TARGET_DIR")
    cargo_sources.prepare()
    assert all(f.stat().st_mtime_ns == cargo_sources.FIXED_TIME_NS for f in files)
