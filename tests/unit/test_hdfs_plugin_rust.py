"""The HDFS plugin crate's own Rust tests (tfyarn/hdfs_plugin/src), run by cargo.

They check what the plugin decides without a cluster: the failover settings
for a name service or one NameNode (src/failover.rs, the same rule as
tfyarn/data/fs/failover.py), the reading of the site files (src/site.rs), the
error messages, the URI parsing and the buffer allocator. CI runs pytest only,
so they run here. cargo builds in the directory the install's build hook uses
(tfyarn/hdfs_plugin/cargo_sources.py), in the test profile: its dependencies
are compiled once per build directory (about 70 CPU-seconds), and the
plugin's crate, incremental, costs next to nothing when its sources are the
ones compiled before, as in a fresh checkout (the release profile took 30
CPU-seconds, 4 minutes on a loaded CI machine, every time). Debug builds also
check arithmetic for overflow.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from _required import missing

from tfyarn.hdfs_plugin import cargo_sources

PLUGIN = Path(__file__).resolve().parents[2] / "tfyarn" / "hdfs_plugin"


def test_the_plugin_crates_own_tests_pass() -> None:
    cargo = shutil.which("cargo") or str(Path.home() / ".cargo" / "bin" / "cargo")
    if not Path(cargo).exists():
        missing("cargo is not installed (the plugin is not built either)")
    done = subprocess.run(
        [
            cargo,
            "test",
            "--offline",
            "--locked",
            "--lib",
            "--manifest-path",
            str(PLUGIN / "Cargo.toml"),
            "-p",
            "tfyarn_hdfs",
            "--target-dir",
            str(cargo_sources.prepare()),  # the install's build directory
        ],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
        env={**os.environ, "CARGO_BUILD_JOBS": os.environ.get("CARGO_BUILD_JOBS", "2")},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "failover::tests::the_target_decides_the_settings ... ok" in done.stdout
    assert "test result: ok." in done.stdout and " 0 failed" in done.stdout
