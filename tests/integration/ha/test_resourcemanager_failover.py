"""An all-reduce job lives through ResourceManager failovers: a graceful one
(`tfyarn cluster failover resourcemanager`) and a crash of the active
ResourceManager (SIGKILL) while the standby is frozen, after which the
standby takes over once the dead one's ZooKeeper session expires.
Work-preserving: the new active ResourceManager recovers the application from
ZooKeeper and its containers from the NodeManager. No task restarts, one
application attempt, the job SUCCEEDS, and `tfyarn status` (asked during the
takeover too) and `logs` work throughout and afterwards.
"""

from __future__ import annotations

import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import _untouched
import pytest
from helpers import REPO, run_cli, running_job

from tfyarn.cluster import LocalCluster
from tfyarn.cluster._ha import RESOURCEMANAGERS

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs, pytest.mark.slow]

MWMS_JOB = REPO / "tests" / "integration" / "jobs" / "recovery_mwms.py"
WORKERS = ("worker:0", "worker:1")
# How long the standby stays frozen after the active RM is killed: past its
# ZooKeeper session (5 s), well within `tfyarn status`'s 20 s search.
TAKEOVER_AFTER_S = 10
OPTIONS = {
    "num_worker": 2,
    "worker_memory": "512 MiB",
    "heartbeat_interval": 1,
    "heartbeat_timeout": 30,
    "registration_timeout": 150,
    "stop_grace": 3,
    "max_restarts": 1,
}


def _active(cluster: LocalCluster) -> str:
    states = cluster.status().ha["resourcemanager"]
    return next(m for m, state in states.items() if state == "active")


def _resynced(status: str) -> bool:
    return "RUNNING" in status or "SUCCEEDED" in status


def test_resourcemanager_failovers_keep_the_running_all_reduce_job(
    skein_client: Any, both_running: LocalCluster
) -> None:
    cluster = both_running
    where = ["--base-dir", str(cluster.base_dir)]
    ckpt = f"hdfs://tfyarn/tmp/tfyarn-ha/rm-{int(time.time())}"
    args = ["--checkpoint_dir", ckpt, "--steps", "550"]
    with running_job(skein_client, MWMS_JOB, args=args, **OPTIONS) as job:
        reached = _untouched.wait_for_step(job, "worker:0", 30)
        pids = _untouched.scripts(job, WORKERS)
        first = _active(cluster)

        done = run_cli("cluster", "failover", "resourcemanager", *where)
        assert done.returncode == 0, done.stderr
        assert f"is active; {first} was stopped and runs again" in done.stdout
        second = _active(cluster)
        assert second != first
        reached = _untouched.wait_for_step(job, "worker:0", reached + 30)

        # A slow takeover, as under load: the standby is frozen while the
        # active one is killed, so nothing listens for clients for a while.
        # `tfyarn status`, asked meanwhile, searches for an active RM and
        # answers once the standby has taken over: no "unknown application".
        standby = cluster.pids()[next(m.key for m in RESOURCEMANAGERS if m.id == first)]
        assert standby is not None
        os.kill(standby, signal.SIGSTOP)
        try:
            done = run_cli("cluster", "kill", "resourcemanager", second, *where)
            with ThreadPoolExecutor(1) as pool:
                asked = pool.submit(run_cli, "status", job.app_id, timeout=180)
                time.sleep(TAKEOVER_AFTER_S)
                os.kill(standby, signal.SIGCONT)
                status = asked.result()
        finally:
            os.kill(standby, signal.SIGCONT)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"Killed the ResourceManager {second} ")
        assert status.returncode == 0, status.stderr
        assert "RUNNING" in status.stdout or "ACCEPTED" in status.stdout
        # Said while it waited for the takeover.
        assert "no ResourceManager accepts connections at " in status.stderr
        # Until the job's master resyncs with the new active RM (its next
        # heartbeat), YARN shows the recovered application ACCEPTED ("Attempt
        # recovered after RM restart").
        # (Or, on a loaded machine, SUCCEEDED: the job's steps ran out while
        # the faults were played, and its master resynced to end it.)
        deadline = time.monotonic() + 120
        while not _resynced(status.stdout) and time.monotonic() < deadline:
            time.sleep(2)
            status = run_cli("status", job.app_id, timeout=180)
            assert status.returncode == 0, status.stderr
        assert _resynced(status.stdout), status.stdout
        assert _active(cluster) == first
        done = run_cli("cluster", "restart", "resourcemanager", second, *where)
        assert done.returncode == 0, done.stderr
        _untouched.wait_for_step(job, "worker:0", reached + 30)
        _untouched.assert_nothing_restarted(job, pids)
        final = job.wait(timeout=900)
    assert final.succeeded
    _untouched.assert_nothing_restarted(job, pids, running=False)
    status = run_cli("status", job.app_id)
    assert status.returncode == 0 and "SUCCEEDED" in status.stdout, status
    deadline = time.monotonic() + 120
    while True:
        logs = run_cli("logs", job.app_id)
        if logs.returncode == 0 and "accuracy=" in logs.stdout:
            break
        assert time.monotonic() < deadline, (logs.returncode, logs.stderr[-2000:])
        time.sleep(3)
    assert logs.stdout.count("start_step=0") == 2, logs.stdout[-3000:]
    assert "start_step=" not in logs.stdout.replace("start_step=0", "")
