"""A ParameterServerStrategy job on ``hdfs://tfyarn`` lives through NameNode
failovers: the active NameNode crashed (SIGKILL) mid-training, then a
graceful failover back. The workers read their TFRecord shards through the
``hdfs://`` plugin all the time and the chief checkpoints there every round
(``jobs/weather_ps.py``); the job SUCCEEDS with the expected accuracy, no
task restarted (its final record says so), and training stalled for at most
a failover's length.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import _untouched
import _weather
import pytest
from helpers import REPO, accuracy_from, run_cli, running_job

from tfyarn.cluster import LocalCluster
from tfyarn.data import resolve
from tfyarn.data.example import write_digits

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs, pytest.mark.slow]

JOB = REPO / "tests" / "integration" / "jobs" / "weather_ps.py"
DATA = "hdfs://tfyarn/tmp/tfyarn-ha/digits"
TASKS = ("ps:0", "worker:0", "worker:1", "chief:0")
OPTIONS = {
    "num_chief": 1,
    "num_ps": 1,
    "num_worker": 2,
    "worker_memory": "512 MiB",
    "ps_memory": "512 MiB",
    "chief_memory": "768 MiB",
    "heartbeat_interval": 1,
    "heartbeat_timeout": 30,
    "registration_timeout": 150,
    "max_restarts": 1,
}
# Seconds training may stand still across a crash of the active NameNode:
# its failover controller sees it dead within a second or two, the standby
# takes over in a few more; the clients' failover waits ride it out.
STALL_BOUND_S = 20


@pytest.fixture(scope="module")
def data(local_cluster: LocalCluster) -> str:
    if not resolve(DATA).glob(DATA + "/train-*"):
        write_digits(DATA)
    return DATA


@pytest.fixture(scope="module")
def base(local_cluster: LocalCluster) -> Iterator[str]:
    path = f"hdfs://tfyarn/tmp/tfyarn-ha/ckpt-{int(time.time())}"
    yield path
    resolve(path).delete(path, recursive=True)


def _where(cluster: LocalCluster) -> list[str]:
    return ["--base-dir", str(cluster.base_dir)]


def test_a_namenode_crash_and_failover_keep_the_running_ps_job(
    skein_client: Any, both_running: LocalCluster, data: str, base: str
) -> None:
    cluster = both_running
    args = ["--data", data, "--checkpoint_dir", f"{base}/nn", "--steps", "400"]
    with running_job(skein_client, JOB, args=args, **OPTIONS) as job:
        reached = _untouched.wait_for_step(job, "chief:0", 40)
        pids = _untouched.scripts(job, TASKS)
        before = cluster.status().ha["namenode"]
        active = next(m for m, state in before.items() if state == "active")

        crashed_at = time.time()
        done = run_cli("cluster", "kill", "namenode", *_where(cluster))
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"Killed the NameNode {active} "), done.stdout
        # The other one takes over; training goes on through it.
        reached = _untouched.wait_for_step(job, "chief:0", reached + 40)
        after = cluster.status().ha["namenode"]
        assert after[active] == "down" and "active" in after.values(), after

        done = run_cli("cluster", "restart", "namenode", active, *_where(cluster))
        assert done.returncode == 0, done.stderr
        graceful_at = time.time()
        done = run_cli("cluster", "failover", "namenode", *_where(cluster))
        assert done.returncode == 0, done.stderr
        assert f"{active} is active" in done.stdout, done.stdout
        _untouched.wait_for_step(job, "chief:0", reached + 40)
        _untouched.assert_nothing_restarted(job, pids)
        final = job.wait(timeout=900)
        log = job.logs("chief:0")
    assert final.succeeded
    # The final record (HDFS, through the name service) says the same.
    _untouched.assert_nothing_restarted(job, pids, running=False)
    assert log.count("start_step=") == 1 and "start_step=0" in log, log[-3000:]
    assert _weather.steps_lost(log) == 0
    assert accuracy_from(log) >= 0.7
    crash = _weather.stall(log, crashed_at)
    graceful = _weather.stall(log, graceful_at)
    print(f"stall: crash {crash:.1f} s, graceful failover {graceful:.1f} s")
    assert crash <= STALL_BOUND_S and graceful <= STALL_BOUND_S, (crash, graceful)


def test_a_name_service_that_is_gone_fails_in_bounded_time_naming_it(
    both_running: LocalCluster,
) -> None:
    cluster = both_running
    for member in ("nn1", "nn2"):
        done = run_cli("cluster", "kill", "namenode", member, *_where(cluster))
        assert done.returncode == 0, done.stderr
    try:
        began = time.monotonic()
        listed = run_cli("data", "ls", "hdfs://tfyarn/tmp", timeout=180)
        took = time.monotonic() - began
    finally:
        for member in ("nn1", "nn2"):
            done = run_cli("cluster", "restart", "namenode", member, *_where(cluster))
            assert done.returncode == 0, done.stderr
    assert listed.returncode != 0, listed.stdout
    said = listed.stderr
    assert "Traceback" not in said, said
    # Named: the service and both of its NameNodes, with what to check.
    assert "tfyarn" in said and "nn1" in said and "nn2" in said, said
    # The clients' failover waits (19.5-24.5 s), one Python start, the calls.
    assert 15 < took < 60, (took, said)
