"""Real capacity-scheduler preemption of a running job's worker (see
conftest.py: queues default 70% and prod 30%, each may grow to the whole
cluster; node1 labelled ``ps``, node2 ``work``, node3 unlabelled, 3 GiB and 4
vcores each; the preemption monitor on, killing 3 s after it asks).

A ParameterServerStrategy job in queue ``default`` puts its chief and ps on
node1 (label ``ps``) and three 1 GiB workers on node2 (label ``work``): the
whole of node2, beyond default's 70% there. A plain skein application in
queue ``prod`` then asks for one 768 MiB container labelled ``work``, within
prod's 30%: the ResourceManager takes a worker's container back (exit status
-102). The master replaces that worker without spending its restart budget;
its new container waits while prod's holds the room (neither queue is over
its share then, so nothing is taken back either way), gets it once the prod
application is killed, and the job succeeds with ``restarts`` 0 and the
disruption counted.

Run it alone (root, iproute2; it starts the multi-host cluster):
``sudo -E env PATH=$PATH python -m pytest tests/integration/multihost/test_preemption.py -v``
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import skein
from helpers import Job, accuracy_from, running_job

from tfyarn import client
from tfyarn.cluster import LocalCluster

from .conftest import PYTHON

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs, pytest.mark.slow]

JOBS = Path(__file__).parents[1] / "jobs"
WORKERS = ("worker:0", "worker:1", "worker:2")


def _snapshot(job: Job) -> dict[str, Any]:
    master = client.status(job.app_id, client=job.yarn).master
    return master.to_dict() if master else {}


def _tasks(snap: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["task"]: t for t in snap.get("tasks", [])}


def _wait(job: Job, what: str, test: Any, timeout: float) -> dict[str, Any]:
    """The job's first snapshot passing ``test``; fails if the job ends first."""
    deadline = time.monotonic() + timeout
    while True:
        snap = _snapshot(job)
        if snap and test(snap):
            return snap
        status = client.status(job.app_id, client=job.yarn)
        assert not status.done, f"{job.app_id} ended early: {status.diagnostics}"
        assert time.monotonic() < deadline, f"{what} not within {timeout:.0f} s: {snap}"
        time.sleep(1)


@contextlib.contextmanager
def _prod_claim(yarn: Any) -> Iterator[str]:
    """A plain skein application in queue prod asking for room on node2; killed
    on leaving (if still running)."""
    spec = skein.ApplicationSpec(
        name="prod-claim",
        queue="prod",
        # Unlabelled: the master runs on node3, beside the tfyarn job's master.
        master=skein.Master(resources=skein.Resources(memory="256 MiB", vcores=1)),
        services={
            "claim": skein.Service(
                instances=1,
                resources=skein.Resources(memory="768 MiB", vcores=1),
                node_label="work",
                script="sleep 900",
            )
        },
    )
    app_id = yarn.submit(spec)
    try:
        yield app_id
    finally:
        with contextlib.suppress(Exception):
            if yarn.application_report(app_id).state not in (
                "FINISHED",
                "FAILED",
                "KILLED",
            ):
                yarn.kill_application(app_id)


def _claim_running(yarn: Any, app_id: str, timeout: float) -> None:
    """Wait until the prod application's container runs (it took the room)."""
    deadline = time.monotonic() + timeout
    while True:
        report = yarn.application_report(app_id)
        assert report.state not in ("FINISHED", "FAILED", "KILLED"), (
            f"prod application ended: {report.diagnostics}"
        )
        if report.state == "RUNNING":
            app = yarn.connect(app_id, wait=False)
            if app.get_containers(services=["claim"], states=["RUNNING"]):
                return
        assert time.monotonic() < deadline, (
            f"the prod application's container did not run within {timeout:.0f} s"
        )
        time.sleep(1)


def test_a_preempted_worker_comes_back_without_spending_the_budget(
    local_cluster: LocalCluster, yarn: Any, base: str
) -> None:
    began = time.monotonic()
    with running_job(
        yarn,
        JOBS / "recovery_ps.py",
        args=[
            "--checkpoint_dir", f"{base}/preempted", "--steps", "1000",
            "--round_sleep", "1.0",
        ],
        num_chief=1,
        num_ps=1,
        num_worker=3,
        queue="default",
        am_memory="512 MiB",
        chief_memory="1 GiB",
        ps_memory="768 MiB",
        worker_memory="1 GiB",
        chief_node_label="ps",
        ps_node_label="ps",
        worker_node_label="work",
        python=PYTHON,
        max_restarts=0,  # any charged failure would fail the job
        max_disruptions=5,
        heartbeat_interval=1,
        heartbeat_timeout=20,
        registration_timeout=300,
        stop_grace=3,
        worker_grace=3,
    ) as job:  # fmt: skip
        _wait(
            job,
            "training past step 40",
            lambda s: (_tasks(s).get("chief:0", {}).get("step") or 0) >= 40,
            360,
        )
        with _prod_claim(yarn) as prod:
            snap = _wait(
                job,
                "a worker taken back by YARN",
                lambda s: s.get("disruptions", 0) >= 1,
                180,
            )
            # The claim got the room a worker had: preemption, not chance.
            _claim_running(yarn, prod, 60)
            taken = [w for w in WORKERS if _tasks(snap)[w].get("disruption")]
            assert taken, snap
            assert _tasks(snap)[taken[0]]["disruption"] == "preempted", snap
            assert snap["restarts"] == 0 and snap["budget_used"] == 0, snap
            assert snap["disruption_kinds"].get("preempted", 0) >= 1, snap
            reason = snap["disruption_reasons"][0]
            assert "was preempted" in reason, reason
            assert "Container preempted by scheduler" in reason, reason
            yarn.kill_application(prod)
        # Room again on node2: the worker comes back in a new attempt.
        snap = _wait(
            job,
            "the preempted worker back",
            lambda s: all(
                _tasks(s)[w]["state"] == "RUNNING" and not _tasks(s)[w]["disruption"]
                for w in taken
            ),
            300,
        )
        assert all(_tasks(snap)[w]["attempt"] >= 1 for w in taken), snap
        assert snap["restarts"] == 0 and snap["budget_used"] == 0, snap
        disruptions = snap["disruptions"]
        final = job.wait(timeout=600)
        log = job.logs("chief:0")
    assert final.succeeded, final.diagnostics
    steps = [int(v) for v in re.findall(r"steps=(\d+)", log)]
    assert steps and steps[-1] >= 1000, log[-3000:]
    assert accuracy_from(log) >= 0.9
    # What a follower saw: the disruption named, no restart.
    assert any(
        e.startswith("taken back by YARN 1 (not charged to max_restarts)")
        for e in job.events
    ), job.events
    assert not any(e.startswith("restart ") for e in job.events), job.events
    assert disruptions >= 1
    print(f"preemption test: {time.monotonic() - began:.1f} s")
