"""Where the local cluster lives and which processes are its daemons."""

from __future__ import annotations

import doctest
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfyarn.cluster import _process, default_base_dir
from tfyarn.contract import local_cluster

NAMENODE = local_cluster.NAMENODE_MAIN_CLASS


def test_the_docstring_examples_hold() -> None:
    result = doctest.testmod(local_cluster)
    assert result.attempted >= 2 and result.failed == 0


def test_the_home_follows_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("TFYARN_CLUSTER_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert local_cluster.default_home() == tmp_path / "data" / "tfyarn" / "cluster"
    monkeypatch.setenv("TFYARN_CLUSTER_HOME", str(tmp_path / "elsewhere"))
    assert local_cluster.default_home() == tmp_path / "elsewhere"
    # The cluster package asks the same function.
    assert default_base_dir() == local_cluster.default_home()


def _daemon(home: Path, *args: str) -> subprocess.Popen[bytes]:
    """A process with ``args`` on its command line, recorded as the NameNode."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)", *args]
    )
    deadline = time.monotonic() + 10
    while args[0] not in local_cluster.command_line(proc.pid):  # until it has exec'd
        assert time.monotonic() < deadline, "the fake daemon did not start"
        time.sleep(0.01)
    pid_file = local_cluster.pid_file(home, "namenode")
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.write_text(f"{proc.pid}\n")
    return proc


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "cluster"


def test_a_live_namenode_of_this_home_is_running(home: Path) -> None:
    proc = _daemon(home, local_cluster.home_marker(home), NAMENODE)
    try:
        assert local_cluster.running_pid(home, "namenode", NAMENODE) == proc.pid
        assert local_cluster.running_pid(home, "namenode") == proc.pid
        namenode = _process.DAEMONS_BY_NAME["namenode"]
        assert _process.running_pid(home, namenode) == proc.pid  # the same answer
        # Another daemon's main class is not this one.
        assert local_cluster.running_pid(home, "namenode", "x.DataNode") is None
    finally:
        proc.kill()
        proc.wait()
    assert local_cluster.running_pid(home, "namenode", NAMENODE) is None


def test_a_zombie_runs_no_more(home: Path) -> None:
    proc = _daemon(home, local_cluster.home_marker(home), NAMENODE)
    proc.kill()  # not waited for: a zombie until reaped
    try:
        deadline = time.monotonic() + 10
        while not local_cluster.is_dead(proc.pid):
            assert time.monotonic() < deadline, "the killed process did not exit"
            time.sleep(0.01)
        assert local_cluster.running_pid(home, "namenode", NAMENODE) is None
    finally:
        proc.wait()


# The exit system call ends one thread (exit_group ends them all).
SYS_EXIT = {"x86_64": 60, "aarch64": 93}.get(platform.machine())
MAIN_THREAD_EXITS_FIRST = f"""
import ctypes, os, threading, time
threading.Thread(target=lambda: (time.sleep(1.5), os._exit(0))).start()
ctypes.CDLL(None).syscall({SYS_EXIT}, 0)
"""


@pytest.mark.skipif(SYS_EXIT is None, reason="exit's number on this machine unknown")
def test_a_process_whose_other_threads_still_run_is_not_dead() -> None:
    proc = subprocess.Popen([sys.executable, "-c", MAIN_THREAD_EXITS_FIRST])
    try:
        deadline = time.monotonic() + 10
        while (
            Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            != "Z"
        ):
            assert time.monotonic() < deadline, "the main thread did not exit"
            time.sleep(0.01)
        # Its main thread is a zombie; the other thread (and its files) live on.
        assert not local_cluster.is_dead(proc.pid)
        while not local_cluster.is_dead(proc.pid):
            assert time.monotonic() < deadline, "the last thread did not exit"
            time.sleep(0.01)
        assert len(os.listdir(f"/proc/{proc.pid}/task")) <= 1
    finally:
        proc.wait()


def test_no_or_a_garbled_pid_file_is_no_daemon(home: Path) -> None:
    assert local_cluster.running_pid(home, "namenode") is None
    pid_file = local_cluster.pid_file(home, "namenode")
    pid_file.parent.mkdir(parents=True)
    pid_file.write_text("not a pid\n")
    assert local_cluster.running_pid(home, "namenode") is None
