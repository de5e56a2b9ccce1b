"""An all-reduce job lives through ResourceManager failovers: a graceful one
(`tfyarn cluster failover resourcemanager`) and a crash of the active
ResourceManager (SIGKILL), after which the standby takes over once the dead
one's ZooKeeper session expires. Work-preserving: the new active
ResourceManager recovers the application from ZooKeeper and its containers
from the NodeManager. No task restarts, one application attempt, the job
SUCCEEDS, and `tfyarn status` and `logs` work throughout and afterwards.
"""

from __future__ import annotations

import time
from typing import Any

import _untouched
import pytest
from helpers import REPO, run_cli, running_job

from tfyarn.cluster import LocalCluster

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs, pytest.mark.slow]

MWMS_JOB = REPO / "tests" / "integration" / "jobs" / "recovery_mwms.py"
WORKERS = ("worker:0", "worker:1")
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

        done = run_cli("cluster", "kill", "resourcemanager", *where)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"Killed the ResourceManager {second} ")
        # The standby takes over when the dead one's session expires; the
        # client finds whichever is active. Until the job's master resyncs
        # with it (its next heartbeat), YARN shows the recovered application
        # ACCEPTED ("Attempt recovered after RM restart").
        deadline = time.monotonic() + 120
        while True:
            status = run_cli("status", job.app_id, timeout=180)
            assert status.returncode == 0, status.stderr
            if "RUNNING" in status.stdout or time.monotonic() > deadline:
                break
            time.sleep(2)
        assert "RUNNING" in status.stdout, status.stdout
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
