"""Graceful stops and elastic jobs on the local YARN cluster.

The examples that heed tfyarn's stop notice (``mwms_graceful``,
``ps_graceful``) print ``saved_at=N`` where a notice stopped them and
``start_step=N`` / ``workers=N`` whenever a generation starts. Every test
checks that each generation starts exactly where the one before saved (no
step trained twice) and that the final step count and accuracy are right.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from _hdfs import hdfs_dir
from helpers import EXAMPLES, Job, accuracy_from, run_cli, running_job

from tfyarn import client
from tfyarn.data import resolve
from tfyarn.data.example import write_digits

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs, pytest.mark.slow]

DATA = "hdfs:///tmp/tfyarn/digits"
MIN_ACCURACY = 0.9
# Time enough on a loaded two-core machine for every worker to reach the
# step to save at and write the checkpoint to HDFS.
STOP_GRACE = 60


@pytest.fixture(scope="module")
def digits(local_cluster: Any) -> str:
    fs = resolve(DATA)
    if not (fs.glob(DATA + "/train-*") and fs.glob(DATA + "/test-*")):
        write_digits(DATA)
    return DATA


@pytest.fixture
def base() -> Iterator[str]:
    yield from hdfs_dir()


@pytest.fixture
def yarn(skein_client: Any) -> Any:
    """The session's skein client (tests/integration/conftest.py)."""
    return skein_client


def numbers(text: str, key: str) -> list[int]:
    """Every ``key=N`` line of a log, in order."""
    return [int(n) for n in re.findall(rf"^{key}=(\d+)", text, re.MULTILINE)]


def lead_step(job: Job) -> int:
    """The lead task's latest reported step (0 before it reports)."""
    master = client.status(job.app_id, client=job.yarn).master
    if master is None or master.lead is None:
        return 0
    lead = master.task(master.lead)
    return (lead.step or 0) if lead else 0


def wait_for_step(job: Job, step: int, timeout: float = 240) -> int:
    """Wait until the lead reported at least ``step``; return what it reported."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = lead_step(job)
        if now >= step:
            return now
        time.sleep(1)
    raise AssertionError(f"{job.app_id} did not reach step {step} in {timeout:.0f} s")


def mwms_args(digits: str, checkpoints: str, steps: int) -> list[str]:
    return [
        "--data",
        digits,
        "--checkpoint_dir",
        checkpoints,
        "--steps",
        str(steps),
        "--checkpoint_every",
        "0",  # only the notices' saves: a step trained twice would show
    ]


def scale(job: Job, num_worker: int, *, cli: bool = False) -> None:
    """``tfyarn scale`` as a user runs it (``cli``), else ``tfyarn.scale``
    through the session's client (no new YARN driver: a notice within a second)."""
    if cli:
        done = run_cli("scale", job.app_id, "--num_worker", str(num_worker))
        assert done.returncode == 0, done.stderr
        assert f"-> {num_worker} workers" in done.stdout, done.stdout
        return
    result = client.scale(job.app_id, num_worker=num_worker, client=job.yarn)
    assert result.num_worker == num_worker and result.previous != num_worker


def final_master(job: Job) -> Any:
    """The master's final record of an ended job."""
    master = client.status(job.app_id, client=job.yarn).master
    assert master is not None, f"{job.app_id} left no final record"
    return master


def wait_for_generation(job: Job, workers: int, timeout: float = 150) -> int:
    """Wait until the job runs with ``workers`` workers again and its lead has
    reported progress in that generation; return the lead's step then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        master = client.status(job.app_id, client=job.yarn).master
        if master is not None and master.phase.value == "RUNNING":
            mine = [t for t in master.tasks if t.role == "worker"]
            lead = master.task(master.lead or "")
            if (
                len(mine) == workers
                and all(t.state.value == "RUNNING" for t in mine)
                and lead is not None
                and lead.step is not None
            ):
                return lead.step
        time.sleep(1)
    raise AssertionError(f"{job.app_id} never ran with {workers} workers")


def generations(text: str) -> tuple[list[int], list[int], list[int]]:
    """(start steps, saved steps, worker counts) of a task's generations."""
    return (
        numbers(text, "start_step"),
        numbers(text, "saved_at"),
        numbers(text, "workers"),
    )


def test_mwms_scaled_2_3_2_then_killed_gracefully_and_resumed_redoes_no_step(
    yarn: Any, digits: str, base: str
) -> None:
    """An all-reduce job scaled 2 -> 3 -> 2 workers while it trains, then
    stopped by ``tfyarn kill --graceful``; a resubmission resumes where the
    kill saved."""
    checkpoints = base + "/mwms"
    options = {"num_worker": 2, "max_restarts": 0, "stop_grace": STOP_GRACE}
    args = [*mwms_args(digits, checkpoints, 100_000), "--pause", "0.05"]
    with running_job(yarn, EXAMPLES / "mwms_graceful.py", args=args, **options) as job:
        wait_for_step(job, 100)
        scale(job, 3, cli=True)
        at = wait_for_generation(job, 3)
        wait_for_step(job, at + 50)
        scale(job, 2)
        at = wait_for_generation(job, 2)
        wait_for_step(job, at + 20)
        time.sleep(3)  # a heartbeat has said the scripts heed notices
        killed = run_cli("kill", "--graceful", job.app_id)
        assert killed.returncode == 0, killed.stderr
        assert "KILLED" in killed.stdout
        final = job.wait_for_end(timeout=120)
        assert final.outcome == "KILLED"
        master = final_master(job)
        lead = job.logs("worker:0")
        other = job.logs("worker:1")
        added = job.logs("worker:2")
    starts, saved, sizes = generations(lead)
    print(f"worker:0 started at {starts}, saved at {saved}, sizes {sizes}")
    assert sizes == [2, 3, 2]
    # Every generation starts where the one before saved: no step redone;
    # the kill's notice saved last, both workers at the same step.
    assert len(saved) == 3 and starts == [0, *saved[:2]], (starts, saved)
    assert numbers(other, "saved_at") == saved
    # The added worker trained in the 3-worker generation only, in step.
    assert generations(added) == ([saved[0]], [saved[1]], [3])
    assert master.resizes == 2 and master.budget_used == 0
    assert master.restarts == 0
    stopped_at = saved[2]
    target = stopped_at + 60
    with running_job(
        yarn,
        EXAMPLES / "mwms_graceful.py",
        args=mwms_args(digits, checkpoints, target),
        **options,
    ) as job:
        job.wait()
        text = job.logs("worker:0")
    assert numbers(text, "start_step") == [stopped_at]  # nothing redone
    assert numbers(text, "steps") == [target]
    assert accuracy_from(text) >= MIN_ACCURACY


def test_ps_job_scaled_up_and_down_redoes_no_step(
    yarn: Any, digits: str, base: str
) -> None:
    steps = 1500
    args = [
        "--data",
        digits,
        "--checkpoint_dir",
        base + "/ps",
        "--steps",
        str(steps),
        "--checkpoint_every",
        "100000",  # only the notices' saves (and the last)
        "--pause",
        "0.2",
    ]
    with running_job(
        yarn,
        EXAMPLES / "ps_graceful.py",
        args=args,
        num_chief=1,
        num_ps=1,
        num_worker=2,
        max_restarts=0,
        stop_grace=STOP_GRACE,
        worker_grace=2,
    ) as job:
        wait_for_step(job, 200)
        scale(job, 3)
        at = wait_for_generation(job, 3)
        wait_for_step(job, at + 100)
        scale(job, 2)
        job.wait(timeout=600)
        master = final_master(job)
        chief = job.logs("chief:0")
    starts, saved, sizes = generations(chief)
    print(f"chief started at {starts}, saved at {saved}, sizes {sizes}")
    assert sizes == [2, 3, 2]
    assert len(saved) == 2 and starts == [0, *saved], (starts, saved)
    assert numbers(chief, "steps") == [steps]
    assert accuracy_from(chief) >= MIN_ACCURACY
    assert master.resizes == 2 and master.budget_used == 0
