"""A job lives through a NodeManager or ResourceManager restart, as on a
production cluster with recovery on (the local cluster's yarn-site.xml).

Each test runs a two-worker all-reduce job (``jobs/recovery_mwms.py``) on the
shared session cluster, crashes one daemon with ``tfyarn cluster kill`` or
``restart`` (SIGKILL of the daemon's JVM alone, its containers live on) while
the job trains, and checks that no task was restarted (the master's
``restarts`` 0, every task on attempt 0, the very same script processes, one
application attempt) and that the job SUCCEEDS. The daemons are always back
when a test ends, for the tests after it.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import _untouched
import pytest
from _hdfs import hdfs_dir
from helpers import REPO, TFYARN, Job, run_cli, running_job

from tfyarn.client.hadoop_conf import TIMEOUT_ENV
from tfyarn.cluster import LocalCluster
from tfyarn.contract import hadoop_conf

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs, pytest.mark.slow]

MWMS_JOB = REPO / "tests" / "integration" / "jobs" / "recovery_mwms.py"
WORKERS = ("worker:0", "worker:1")
OPTIONS = {
    "num_worker": 2,
    "worker_memory": "512 MiB",
    "heartbeat_interval": 1,
    # A restarting JVM takes CPU from the tasks on a 2-core machine: a wide
    # margin, so a slow heartbeat is not what is tested here.
    "heartbeat_timeout": 30,
    "registration_timeout": 150,
    "stop_grace": 3,
    "max_restarts": 1,
}
# `tfyarn status` while the ResourceManager is down: give up after this.
DOWN_TIMEOUT_S = 5


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    yield from hdfs_dir()


@pytest.fixture
def cluster(local_cluster: LocalCluster) -> Iterator[LocalCluster]:
    """The session cluster, with recovery on; its daemons all back afterwards."""
    yarn = hadoop_conf.read_site(local_cluster.conf_dir / "yarn-site.xml")
    if dict(yarn).get("yarn.nodemanager.recovery.enabled") != "true":
        pytest.skip(
            f"the running cluster in {local_cluster.base_dir} was started without "
            "recovery; `tfyarn cluster stop && tfyarn cluster start` renders it"
        )
    try:
        yield local_cluster
    finally:
        if not local_cluster.is_running():  # a failure left one down
            local_cluster.start(log=lambda m: print(f"[local cluster] {m}"))


def wait_for_step(job: Job, step: int, timeout: float = 300) -> int:
    return _untouched.wait_for_step(job, "worker:0", step, timeout)


def scripts(job: Job) -> dict[str, int]:
    """The pid of each worker's script process."""
    return _untouched.scripts(job, WORKERS)


def assert_nothing_restarted(job: Job, pids: dict[str, int]) -> None:
    """No task restarted, the same processes run, one application attempt."""
    _untouched.assert_nothing_restarted(job, pids)
    assert set(pids) == set(WORKERS)


def cli(
    *argv: str, timeout: float = 600, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``tfyarn ARGV`` as a user runs it; ``env`` added to the environment."""
    return subprocess.run(
        [*TFYARN, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_a_nodemanager_restart_keeps_the_running_job(
    skein_client: Any, cluster: LocalCluster, base: str
) -> None:
    # Steps enough to train on through a 3 s restart and 30 steps after it.
    args = ["--checkpoint_dir", f"{base}/nm", "--steps", "250"]
    with running_job(skein_client, MWMS_JOB, args=args, **OPTIONS) as job:
        reached = wait_for_step(job, 30)
        pids = scripts(job)
        nm_before = cluster.pids()["nodemanager"]
        done = run_cli(
            "cluster", "restart", "nodemanager", "--base-dir", str(cluster.base_dir)
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("Restarted the NodeManager: killed pid"), done
        nm_after = cluster.pids()["nodemanager"]
        assert nm_after is not None and nm_after != nm_before
        # The containers outlived their NodeManager, the job trains on ...
        wait_for_step(job, reached + 30)
        assert_nothing_restarted(job, pids)
        # ... and the new NodeManager reports their ends: the job completes.
        final = job.wait(timeout=600)
        log = job.logs("worker:0")
    assert final.succeeded
    assert "start_step=0" in log and log.count("start_step=") == 1, log[-2000:]
    assert "accuracy=" in log


def test_a_resourcemanager_restart_keeps_the_running_all_reduce_job(
    skein_client: Any, cluster: LocalCluster, base: str
) -> None:
    # Steps enough (at 0.1-0.2 s a step) to outlast the ResourceManager's
    # downtime here (the status check's bounded wait and a restart: 15-25 s)
    # several times over, so the job is still training when it is back.
    args = ["--checkpoint_dir", f"{base}/rm", "--steps", "700"]
    where = ["--base-dir", str(cluster.base_dir)]
    with running_job(skein_client, MWMS_JOB, args=args, **OPTIONS) as job:
        reached = wait_for_step(job, 30)
        pids = scripts(job)
        done = run_cli("cluster", "kill", "resourcemanager", *where)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("Killed the ResourceManager"), done.stdout
        try:
            # While it is down: named as unreachable within the bound, no hang,
            # no traceback, never "no application".
            began = time.monotonic()
            down = cli(
                "status",
                job.app_id,
                timeout=180,
                env={TIMEOUT_ENV: str(DOWN_TIMEOUT_S)},
            )
            took = time.monotonic() - began
            assert down.returncode == 1, down
            assert down.stderr.startswith(
                "tfyarn: no ResourceManager accepts connections at "
            ), down  # said before it waits
            assert "could not reach the YARN ResourceManager" in down.stderr, down
            assert "Traceback" not in down.stderr and "no application" not in (
                down.stderr
            )
            # The driver's JVM start, then its bounded retries: minutes, not
            # the 15 a YARN client waits by default. The JVM start alone took
            # up to two minutes with every lane of CI busy on two cores.
            assert took < 150 + 3 * DOWN_TIMEOUT_S, took
        finally:
            done = run_cli("cluster", "restart", "resourcemanager", *where)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith("Restarted the ResourceManager"), done.stdout
        # Work-preserving: the same attempt, its containers taken back.
        wait_for_step(job, reached + 30)
        assert_nothing_restarted(job, pids)
        final = job.wait(timeout=900)
    assert final.succeeded
    # The restarted ResourceManager answers for the job, and its logs are there.
    status = cli("status", job.app_id)
    assert status.returncode == 0, status.stderr
    assert "SUCCEEDED" in status.stdout, status.stdout
    deadline = time.monotonic() + 120
    while True:
        logs = cli("logs", job.app_id)
        if logs.returncode == 0 and "accuracy=" in logs.stdout:
            break
        assert time.monotonic() < deadline, (logs.returncode, logs.stderr[-2000:])
        time.sleep(3)
    assert logs.stdout.count("start_step=0") == 2, logs.stdout[-3000:]
    assert "start_step=" not in logs.stdout.replace("start_step=0", "")
