"""The skein driver's class-data archive: named by what makes its class path,
and named in the driver's options whether it exists yet or not."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tfyarn.cluster import _driver_archive


@pytest.fixture
def java_home(tmp_path: Path) -> Path:
    home = tmp_path / "jdk"
    home.mkdir()
    (home / "release").write_text('JAVA_VERSION="17.0.15"\n')
    return home


def test_the_archive_is_named_by_the_jdk_skein_and_the_hadoop_line(
    java_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TFYARN_CACHE_DIR", str(tmp_path / "cache"))
    first = _driver_archive.archive_path(java_home, "3.4.3")
    assert first.parent == tmp_path / "cache" / "cds"
    assert first.name.startswith("skein-driver-") and first.suffix == ".jsa"
    assert _driver_archive.archive_path(java_home, "3.4.3") == first  # stable
    assert _driver_archive.archive_path(java_home, "3.1.1") != first
    (java_home / "release").write_text('JAVA_VERSION="17.0.16"\n')
    assert _driver_archive.archive_path(java_home, "3.4.3") != first
    jar = _driver_archive.skein_jar()
    assert jar.is_file() and jar.name == "skein.jar"


def test_another_skein_jar_is_another_archive(
    java_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TFYARN_CACHE_DIR", str(tmp_path / "cache"))
    first = _driver_archive.archive_path(java_home, "3.4.3")
    other = tmp_path / "skein.jar"
    other.write_bytes(b"another build")
    monkeypatch.setattr(_driver_archive, "skein_jar", lambda: other)
    second = _driver_archive.archive_path(java_home, "3.4.3")
    assert second != first
    os.utime(other, ns=(10**18, 10**18))  # rebuilt in place: another time
    assert _driver_archive.archive_path(java_home, "3.4.3") != second


def test_the_options_map_the_archive_and_silence_a_mismatch(
    java_home: Path, tmp_path: Path
) -> None:
    archive = tmp_path / "skein-driver-0.jsa"
    options = _driver_archive.java_options(java_home, archive)
    assert options[0] == f"-XX:SharedArchiveFile={archive}"
    assert "-Xlog:cds=off" in options and "-Xlog:cds+dynamic=off" in options


def test_archives_of_skein_jars_that_are_gone_are_pruned(tmp_path: Path) -> None:
    def made(name: str, jar: Path | None, age_s: float = 0.0) -> Path:
        archive = tmp_path / f"skein-driver-{name}.jsa"
        archive.write_bytes(b"classes")
        archive.with_suffix(".log").write_text("log")
        if jar is not None:
            archive.with_suffix(_driver_archive.SOURCE).write_text(f"{jar}\n")
        then = time.time() - age_s
        os.utime(archive, (then, then))
        return archive

    live_jar = tmp_path / "venv-a" / "skein.jar"
    live_jar.parent.mkdir()
    live_jar.write_bytes(b"jar")
    live = made("a", live_jar)
    gone = made("b", tmp_path / "venv-b" / "skein.jar")  # its venv deleted
    old_unnamed = made("c", None, age_s=3 * 24 * 3600)
    new_unnamed = made("d", None)
    assert sorted(_driver_archive.prune(tmp_path)) == sorted([gone, old_unnamed])
    assert live.exists() and new_unnamed.exists()
    assert not gone.exists() and not gone.with_suffix(".log").exists()
    assert not gone.with_suffix(_driver_archive.SOURCE).exists()
