"""The plugin's own `crc` crate (tfyarn/hdfs_plugin/crc), which hdfs-native uses.

hdfs-native checks every packet it reads, and checksums every packet it
writes, with it: a wrong CRC fails every read and write. Its Rust tests (the
catalogue's check values, every length against a bitwise definition, the CPU's
instruction against the tables) run here, since CI runs pytest only; the crate
is tiny, so they build in about a second.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from _required import missing

PLUGIN = Path(__file__).resolve().parents[2] / "tfyarn" / "hdfs_plugin"


def test_hdfs_native_gets_our_crc_crate_not_the_registrys() -> None:
    lock = (PLUGIN / "Cargo.lock").read_text()
    entry = re.search(
        r'\[\[package\]\]\nname = "crc"\n(.*?)(?:\n\n|\Z)', lock, re.DOTALL
    )
    assert entry is not None, "no crc package in Cargo.lock"
    assert "source =" not in entry.group(1), (
        "crc comes from the registry: the [patch] in tfyarn/hdfs_plugin/Cargo.toml is gone"
    )


def test_the_crc_crates_own_tests_pass(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if not Path(cargo).exists():
        missing("cargo is not installed (the plugin is not built either)")
    done = subprocess.run(
        [
            cargo,
            "test",
            "--offline",
            "--locked",
            "--manifest-path",
            str(PLUGIN / "Cargo.toml"),
            "-p",
            "crc",
            "--target-dir",
            str(tmp_path_factory.mktemp("crc-target")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "test result: ok. 3 passed" in done.stdout
