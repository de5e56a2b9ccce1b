"""Calls that change the namespace survive the active NameNode's crash.

Eight threads make directories, write small files, rename them over the
last ones and delete them on ``hdfs://tfyarn``, through the TensorFlow plugin
and through ``tfyarn.data.fs``, while the active NameNode is killed three
times. Each time it is first frozen for a second (SIGSTOP), so that calls
are in flight when it dies: the calls it loses. hdfs-native does not send
such a call again (it may have been applied), so the plugin and the data
layer look at the namespace and make it good. Not one call may fail.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import run_cli

from tfyarn.cluster import LocalCluster
from tfyarn.cluster._ha import NAMENODES
from tfyarn.data import resolve

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs, pytest.mark.slow]

LOOP = Path(__file__).with_name("_namespace_loop.py")
CRASHES = 3


def _states(cluster: LocalCluster) -> dict[str, str]:
    return dict(cluster.status().ha["namenode"])


def _wait_for_active(cluster: LocalCluster, member: str, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _states(cluster).get(member) == "active":
            return
        time.sleep(0.5)
    pytest.fail(
        f"{member} did not become active within {timeout:.0f} s: {_states(cluster)}"
    )


def test_namespace_calls_through_three_namenode_crashes_all_succeed(
    both_running: LocalCluster, tmp_path: Path
) -> None:
    cluster = both_running
    base = f"hdfs://tfyarn/tmp/tfyarn-ha/lost-calls-{int(time.time())}"
    stop = tmp_path / "stop"
    loop = subprocess.Popen(
        [sys.executable, str(LOOP), base, str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert loop.stdout is not None
        assert loop.stdout.readline().strip() == "ready", loop.stderr.read()
        for _ in range(CRASHES):
            states = _states(cluster)
            active = next(m for m, s in states.items() if s == "active")
            other = next(m for m in states if m != active)
            time.sleep(2)  # the loop's calls go to the active one
            pid = cluster.pids()[next(m.key for m in NAMENODES if m.id == active)]
            assert pid is not None
            os.kill(pid, signal.SIGSTOP)  # the calls sent now wait in flight
            try:
                time.sleep(1)
                done = run_cli(
                    "cluster",
                    "kill",
                    "namenode",
                    active,
                    "--base-dir",
                    str(cluster.base_dir),
                )
            finally:
                os.kill(pid, signal.SIGCONT)  # harmless once killed
            assert done.returncode == 0, done.stderr
            _wait_for_active(cluster, other)
            time.sleep(2)  # calls through the one that took over
            done = run_cli(
                "cluster",
                "restart",
                "namenode",
                active,
                "--base-dir",
                str(cluster.base_dir),
            )
            assert done.returncode == 0, done.stderr
        stop.touch()
        out, err = loop.communicate(timeout=180)
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.wait()
        resolve(base).delete(base, recursive=True)
    assert loop.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    print(f"namespace loop: {result['rounds']} rounds, {result['calls']} calls")
    assert not result["errors"], "\n".join(result["errors"])
    assert result["rounds"] >= 10, result
