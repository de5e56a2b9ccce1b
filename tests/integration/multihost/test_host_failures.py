"""A host partitioned under a running job (see conftest.py for the cluster:
node1 labelled ``ps``, node2 ``work``, node3 unlabelled, 3 GiB each).

Placement is made certain, not hoped for: a filler job holds node1's spare
memory, the job's master fills node3 (masters run only on the unlabelled
host), its chief and ps ask for label ``ps`` (node1), so the two workers can
only go to node2. Once the job trains the filler is killed, leaving room on
node1 and node3, and node2 is cut off: the master hears nothing from either
worker for ``heartbeat_timeout``, counts them lost and replaces them on the
other hosts; the stale workers, still running behind the partition, are
refused by the master once it heals (their attempt was replaced) and never
join the new cluster; training ends with the expected accuracy.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import Job, accuracy_from, run_cli, running_job

from tfyarn import client
from tfyarn.cluster import LocalCluster

from .conftest import PYTHON

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs, pytest.mark.slow]

JOBS = Path(__file__).parents[1] / "jobs"
FAST = {
    "python": PYTHON,
    "heartbeat_interval": 1,
    "heartbeat_timeout": 8,
    "registration_timeout": 240,
    "stop_grace": 3,
    "worker_grace": 3,
}


def _snapshot(job: Job) -> dict[str, Any]:
    master = client.status(job.app_id, client=job.yarn).master
    return master.to_dict() if master else {}


def _wait(job: Job, what: str, test: Any, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        snap = _snapshot(job)
        if snap and test(snap):
            return snap
        status = client.status(job.app_id, client=job.yarn)
        assert not status.done, f"{job.app_id} ended early: {status.diagnostics}"
        assert time.monotonic() < deadline, f"{what} not within {timeout:.0f} s: {snap}"
        time.sleep(1)


# A task that holds a container (the snapshot's task states).
PLACED = ("ALLOCATED", "REGISTERED", "RUNNING")


def _tasks(snap: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["task"]: t for t in snap.get("tasks", [])}


def _host(task: dict[str, Any]) -> str:
    return str(task.get("address") or "").rsplit(":", 1)[0]


def _node(task: dict[str, Any]) -> str:
    """The host of the task's container (known from ALLOCATED on, before the
    task registers an address)."""
    return str(task.get("node") or "").rsplit(":", 1)[0]


@contextlib.contextmanager
def _filler(yarn: Any, memory: str) -> Iterator[Job]:
    """A sleeping one-worker job holding ``memory`` of the "ps" node, running."""
    with running_job(
        yarn,
        JOBS / "gang_sleep.py",
        args=["--seconds", "900"],
        name="filler",
        num_worker=1,
        worker_memory=memory,
        node_label="ps",
        preimport=[],
        **FAST,
    ) as filler:
        _wait(
            filler,
            "the filler's worker",
            lambda s: _tasks(s).get("worker:0", {}).get("state") == "RUNNING",
            240,
        )
        yield filler


def test_partitioned_workers_host_is_replaced_elsewhere(
    local_cluster: LocalCluster, yarn: Any, base: str
) -> None:
    layout = local_cluster.layout()
    assert layout is not None
    node1, node2 = layout.host("node1").host, layout.host("node2").host
    began = time.monotonic()
    with (
        _filler(yarn, "1792 MiB") as filler,
        running_job(
            yarn,
            JOBS / "recovery_ps.py",
            args=["--checkpoint_dir", f"{base}/partition", "--steps", "400"],
            num_chief=1,
            num_ps=1,
            num_worker=2,
            am_memory="2560 MiB",
            chief_memory="768 MiB",
            ps_memory="512 MiB",
            worker_memory="512 MiB",
            chief_node_label="ps",
            ps_node_label="ps",
            max_restarts=4,
            **FAST,
        ) as job,
    ):
        snap = _wait(
            job,
            "training past step 60",
            lambda s: (_tasks(s).get("chief:0", {}).get("step") or 0) >= 60,
            360,
        )
        tasks = _tasks(snap)
        assert {_host(tasks["chief:0"]), _host(tasks["ps:0"])} == {node1}, tasks
        assert {_host(tasks[f"worker:{i}"]) for i in (0, 1)} == {node2}, tasks
        client.kill(filler.app_id, client=yarn)  # room on node1 and node3
        cut = run_cli("cluster", "node", "partition", "node2")
        assert cut.returncode == 0, cut.stderr
        cut_at = time.monotonic()
        try:
            # Healed as soon as both replacements have containers (elsewhere:
            # node2 still looks full), before the ResourceManager gives node2
            # up (20 s) and has its containers killed, so the stale workers
            # reach the master.
            snap = _wait(
                job,
                "both workers given new containers",
                lambda s: all(
                    _tasks(s)[w]["attempt"] >= 1 and _tasks(s)[w]["state"] in PLACED
                    for w in ("worker:0", "worker:1")
                ),
                240,
            )
        finally:
            healed = run_cli("cluster", "node", "heal", "node2")
        assert healed.returncode == 0, healed.stderr
        # The replacements went elsewhere: node2 was cut off and full. (Once
        # healed, node2 is a host like the others: a later attempt, after a
        # replacement failed, may rightly land there.)
        for w in ("worker:0", "worker:1"):
            assert _node(_tasks(snap)[w]) not in ("", node2), snap
        snap = _wait(
            job,
            "both workers replaced",
            lambda s: all(
                _tasks(s)[w]["attempt"] >= 1 and _tasks(s)[w]["state"] == "RUNNING"
                for w in ("worker:0", "worker:1")
            ),
            240,
        )
        replaced_in = time.monotonic() - cut_at
        final = job.wait(timeout=400)
        log = job.logs("chief:0")
        everything = job.logs()
    assert final.succeeded, final.diagnostics
    steps = [int(v) for v in re.findall(r"steps=(\d+)", log)]
    assert steps and steps[-1] >= 400, log[-3000:]
    assert accuracy_from(log) >= 0.9
    assert any("sent no heartbeat" in e for e in job.events), job.events
    # The stale workers kept retrying behind the partition (a runtime gives
    # the master 60 s): healed, they reached it and were refused as replaced
    # attempts (a call refused, or the master's answer a Stop saying so), and
    # stopped their scripts; or, on a slow machine, YARN killed their
    # containers first (SIGTERM, which the runtime logs at once: SIGKILL
    # follows 250 ms later). Either way none joined the new cluster.
    refused = (
        "the master refused this task" in everything
        or re.search(r"stopping the script: worker:\d is replaced", everything)
        is not None
        or "tfyarn.runtime: SIGTERM received" in everything
    )
    assert refused, everything[-4000:]
    print(
        f"partition test: {time.monotonic() - began:.0f} s in all; workers "
        f"replaced {replaced_in:.1f} s after the cut; a stale worker refused: "
        f"{refused}"
    )


def test_crashed_host_under_all_reduce_restarts_from_the_checkpoint_elsewhere(
    local_cluster: LocalCluster, yarn: Any, base: str
) -> None:
    """A filler holds node1 whole and the master fills node3, so both workers
    of the all-reduce job run on node2; node2 crashes (its daemons and
    containers SIGKILLed): the cluster restarts from its HDFS checkpoint on
    the hosts left (node1, node3)."""
    layout = local_cluster.layout()
    assert layout is not None
    node2 = layout.host("node2").host
    began = time.monotonic()
    try:
        with (
            _filler(yarn, "3072 MiB") as filler,
            running_job(
                yarn,
                JOBS / "recovery_mwms.py",
                args=["--checkpoint_dir", f"{base}/crash", "--steps", "200"],
                num_worker=2,
                am_memory="2560 MiB",
                worker_memory="512 MiB",
                # Checkpoint writes fail until the NameNode calls node2's
                # DataNode dead (20 s here): a restart or two more.
                max_restarts=4,
                **FAST,
            ) as job,
        ):
            snap = _wait(
                job,
                "training past the first checkpoint (step 30)",
                lambda s: (_tasks(s).get("worker:0", {}).get("step") or 0) >= 40,
                360,
            )
            hosts = {_host(_tasks(snap)[f"worker:{i}"]) for i in (0, 1)}
            assert hosts == {node2}, snap
            client.kill(filler.app_id, client=yarn)  # node1 has room now
            crashed = run_cli("cluster", "node", "stop", "node2")
            assert crashed.returncode == 0, crashed.stderr
            crashed_at = time.monotonic()
            snap = _wait(
                job,
                "the restarted cluster",
                lambda s: (
                    s.get("generation", 0) >= 2
                    and all(
                        _tasks(s)[f"worker:{i}"]["state"] == "RUNNING" for i in (0, 1)
                    )
                ),
                300,
            )
            restarted_in = time.monotonic() - crashed_at
            final = job.wait(timeout=500)
            log = job.logs("worker:0")
    finally:
        restarted = run_cli("cluster", "node", "start", "node2", timeout=300)
    assert restarted.returncode == 0, restarted.stderr
    assert final.succeeded, final.diagnostics
    started = [int(v) for v in re.findall(r"start_step=(\d+)", log)]
    # The lead's last attempt resumed from a checkpoint, not from step 0.
    assert started and started[-1] >= 30, started
    assert accuracy_from(log) >= 0.9
    assert any("cluster restarted" in e for e in job.events), job.events
    where = {_host(_tasks(snap)[f"worker:{i}"]) for i in (0, 1)}
    assert node2 not in where, snap
    print(
        f"crash test: {time.monotonic() - began:.0f} s in all; cluster restarted "
        f"{restarted_in:.1f} s after the crash, resumed at step {started[-1]}"
    )
