"""Checks that a job lived through a daemon's crash, restart or failover
untouched: no task restarted, the very same script processes, one
application attempt."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import pytest
from _faults import retry_until, task_process
from helpers import Job, app_attempts

from tfyarn import client


def snapshot(job: Job) -> dict[str, Any]:
    """The master's view of the job (its final record once it ended)."""
    master = client.status(job.app_id, client=job.yarn).master
    return master.to_dict() if master else {}


def wait_for_step(job: Job, task: str, step: int, timeout: float = 300) -> int:
    """Wait until ``task`` reported at least ``step``; the step it reported."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for entry in snapshot(job).get("tasks", []):
            if entry["task"] == task and (entry.get("step") or 0) >= step:
                return int(entry["step"])
        status = client.status(job.app_id, client=job.yarn)
        assert not status.done, f"job ended early: {status.diagnostics}"
        time.sleep(1)
    pytest.fail(f"{task} did not reach step {step} within {timeout:.0f} s")


def scripts(job: Job, tasks: Sequence[str]) -> dict[str, int]:
    """The pid of each task's script process."""
    return {task: task_process(job.app_id, task).pid for task in tasks}


def _why_restarted(snap: dict[str, Any]) -> str:
    """The reasons first (CI keeps only the head of a failure), then the rest."""
    failures = {t["task"]: t.get("failures") for t in snap.get("tasks", [])}
    return (
        f"restart reasons: {snap.get('restart_reasons')}; "
        f"disruptions: {snap.get('disruption_reasons')}; "
        f"earlier attempts: { {k: v for k, v in failures.items() if v} }; "
        f"whole status: {snap}"
    )


def assert_nothing_restarted(
    job: Job, pids: dict[str, int], *, running: bool = True
) -> None:
    """No task restarted, one application attempt and (``running``) the same
    script processes as ``pids``."""
    snap = snapshot(job)
    assert snap.get("restarts") == 0, _why_restarted(snap)
    attempts = {t["task"]: t["attempt"] for t in snap["tasks"]}
    assert set(attempts.values()) == {0}, _why_restarted(snap)
    if running:
        live = _live_scripts(job, list(pids))
        assert live == {task: pids[task] for task in live}, (pids, live)
        # On a loaded machine a job may finish its steps while the faults are
        # still being played: a script that is gone must have succeeded (the
        # record above already shows it never restarted).
        for task in set(pids) - set(live):
            retry_until(
                f"{task} gone and SUCCEEDED", lambda t=task: _succeeded(job, t), 60
            )
    assert len(app_attempts(job.app_id)) == 1


def _live_scripts(job: Job, tasks: Sequence[str]) -> dict[str, int]:
    """The pid of each task's script process that is still running."""
    found = {}
    for task in tasks:
        try:
            found[task] = task_process(job.app_id, task).pid
        except AssertionError:
            continue
    return found


def _succeeded(job: Job, task: str) -> None:
    entry = next(t for t in snapshot(job).get("tasks", []) if t["task"] == task)
    assert entry["state"] == "SUCCEEDED", entry
