"""The daemons' class-data archives: which options a daemon starts with, and
what a stop keeps of the file its JVM wrote (tests/integration/test_cluster.py
runs the real JVM through the same cycle)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfyarn.cluster import _cds, _daemon_archive, _driver_archive


def jdk(tmp_path: Path, version: str) -> Path:
    home = tmp_path / f"jdk-{version}"
    home.mkdir()
    (home / "release").write_text(f'JAVA_VERSION="{version}"\n')
    return home


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TFYARN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache" / _cds.ARCHIVE_DIR


def option_path(options: list[str], name: str) -> Path:
    (value,) = [o.split("=", 1)[1] for o in options if o.startswith(f"-XX:{name}=")]
    return Path(value)


def test_only_a_jdk_with_dynamic_archives_gets_any_option(tmp_path: Path) -> None:
    assert _cds.supported(jdk(tmp_path, "17.0.15"))
    assert _cds.supported(jdk(tmp_path, "13"))
    old = jdk(tmp_path, "11.0.22")
    assert not _cds.supported(old) and not _cds.supported(jdk(tmp_path, "1.8.0_392"))
    assert not _cds.supported(tmp_path)  # no release file: nothing is assumed
    base = tmp_path / "cluster"
    assert _daemon_archive.launch_options(old, "3.4.3", "NameNode", base, "nn") == []
    archive = _driver_archive.archive_path(old, "3.4.3")
    assert _driver_archive.java_options(old, archive) == []


def test_the_first_life_writes_a_pending_file_that_a_normal_stop_keeps(
    tmp_path: Path, cache: Path
) -> None:
    home, base = jdk(tmp_path, "17.0.15"), tmp_path / "cluster"
    options = _daemon_archive.launch_options(home, "3.4.3", "NameNode", base, "nn")
    pending = option_path(options, "ArchiveClassesAtExit")
    assert pending.parent == cache and not pending.exists()
    assert "-Xlog:cds=off" in options  # no CDS notes in the daemon's output
    pending.write_bytes(b"classes")  # what the JVM writes as it exits
    assert _daemon_archive.keep(base, "nn")
    archive = _daemon_archive.archive_path(home, "3.4.3", "NameNode")
    assert archive.read_bytes() == b"classes" and not pending.exists()
    # Every later life of any cluster of that line maps it.
    again = _daemon_archive.launch_options(home, "3.4.3", "NameNode", tmp_path, "x")
    assert option_path(again, "SharedArchiveFile") == archive


def test_a_killed_daemons_file_is_deleted_and_an_archive_is_never_replaced(
    tmp_path: Path, cache: Path
) -> None:
    home, base = jdk(tmp_path, "17.0.15"), tmp_path / "cluster"
    first = _daemon_archive.launch_options(home, "3.4.3", "DataNode", base, "dn")
    option_path(first, "ArchiveClassesAtExit").write_bytes(b"half")
    _daemon_archive.discard(base, "dn")  # SIGKILLed: maybe half written
    assert not list(cache.glob("*.tmp"))
    assert not _daemon_archive.keep(base, "dn")  # nothing written: nothing kept
    assert not _daemon_archive.archive_path(home, "3.4.3", "DataNode").exists()

    # Two clusters' first lives: the first stop's file wins, the second's goes.
    other = tmp_path / "other"
    a = _daemon_archive.launch_options(home, "3.4.3", "DataNode", base, "dn")
    b = _daemon_archive.launch_options(home, "3.4.3", "DataNode", other, "dn")
    option_path(a, "ArchiveClassesAtExit").write_bytes(b"first")
    option_path(b, "ArchiveClassesAtExit").write_bytes(b"second")
    assert _daemon_archive.keep(base, "dn") and not _daemon_archive.keep(other, "dn")
    archive = _daemon_archive.archive_path(home, "3.4.3", "DataNode")
    assert archive.read_bytes() == b"first" and not list(cache.glob("*.tmp"))


def test_archives_are_named_by_role_jdk_and_hadoop_line(tmp_path: Path) -> None:
    home = jdk(tmp_path, "17.0.15")
    path = _daemon_archive.archive_path(home, "3.4.3", "NameNode")
    assert path.name.startswith("NameNode-") and path.suffix == ".jsa"
    assert _daemon_archive.archive_path(home, "3.4.3", "NameNode") == path
    assert _daemon_archive.archive_path(home, "3.3.6", "NameNode") != path
    assert _daemon_archive.archive_path(home, "3.4.3", "DataNode") != path
    newer = jdk(tmp_path, "17.0.16")
    assert _daemon_archive.archive_path(newer, "3.4.3", "NameNode") != path
    role = _daemon_archive.role_of("org.apache.hadoop.hdfs.server.namenode.NameNode")
    assert role == "NameNode"


def test_files_left_by_daemons_that_ended_without_a_stop_are_swept(
    tmp_path: Path, cache: Path
) -> None:
    home = jdk(tmp_path, "17.0.15")
    cache.mkdir(parents=True)
    old, fresh = cache / "NameNode-0.aaaa.tmp", cache / "DataNode-0.bbbb.tmp"
    old.write_bytes(b"left")
    fresh.write_bytes(b"being written")
    an_hour_ago = time.time() - 3600
    os.utime(old, (an_hour_ago, an_hour_ago))
    _daemon_archive.launch_options(home, "3.4.3", "NodeManager", tmp_path, "nm")
    assert not old.exists() and fresh.exists()


def test_a_stop_knows_which_daemon_still_has_its_archive_to_write(
    tmp_path: Path,
) -> None:
    code = "import time; time.sleep(60)"
    writing = subprocess.Popen(
        [sys.executable, "-c", code, "-XX:ArchiveClassesAtExit=/x"]
    )
    mapping = subprocess.Popen([sys.executable, "-c", code, "-XX:SharedArchiveFile=/x"])
    try:
        assert _daemon_archive.writes_at_exit(writing.pid)
        assert not _daemon_archive.writes_at_exit(mapping.pid)
        more = 20.0 + _daemon_archive.DUMP_GRACE_S
        assert _daemon_archive.stop_grace(writing.pid, 20.0) == more
        assert _daemon_archive.stop_grace(mapping.pid, 20.0) == 20.0
    finally:
        for proc in (writing, mapping):
            proc.kill()
            proc.wait()
    assert not _daemon_archive.writes_at_exit(writing.pid)  # gone
