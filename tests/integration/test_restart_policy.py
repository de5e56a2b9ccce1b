"""A bug is not a transient failure, and a decided outcome ends the application
with one YARN attempt, on the local cluster.

A script that raises the same exception at every start fails the job after
its second start whatever ``max_restarts`` allows, with that exception first
in the diagnostics; a script SIGKILLed twice is restarted twice; a FAILED job
leaves exactly one application attempt in YARN's ResourceManager.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from _faults import kill_task
from helpers import app_attempts, rm_address, running_job

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

JOBS = Path(__file__).with_name("jobs")
# No TensorFlow in these scripts: start them plainly, small and quick.
QUICK: dict[str, Any] = {
    "preimport": [],
    "worker_memory": "256 MiB",
    "heartbeat_interval": 1,
    "heartbeat_timeout": 8,
    "registration_timeout": 120,
    "stop_grace": 3,
    "worker_grace": 3,
}
ERROR = "ValueError: invalid literal for int() with base 10: 'ten'"


def app_report(app_id: str) -> dict[str, Any]:
    url = f"http://{rm_address()}/ws/v1/cluster/apps/{app_id}"
    with urllib.request.urlopen(url, timeout=10) as response:
        return dict(json.load(response)["app"])


def wait_for_yarn_end(app_id: str, timeout: float = 120) -> dict[str, Any]:
    """YARN's report once the application is over (the client may see FAILED
    from the master's status a moment before YARN does)."""
    deadline = time.monotonic() + timeout
    while True:
        report = app_report(app_id)
        if report["state"] in ("FINISHED", "FAILED", "KILLED"):
            return report
        assert time.monotonic() < deadline, report
        time.sleep(1)


def test_the_same_exception_at_every_start_fails_after_the_second(
    skein_client: Any,
) -> None:
    with running_job(
        skein_client, JOBS / "same_error.py", max_restarts=10, **QUICK
    ) as job:
        started = time.monotonic()
        final = job.wait_for_end(timeout=300)
        elapsed = time.monotonic() - started
        report = wait_for_yarn_end(job.app_id)
        starts = job.logs("worker:0").count("start attempt=")
        attempts = app_attempts(job.app_id)
        # Give a wrongly started second master attempt time to show up.
        time.sleep(10)
        attempts_later = app_attempts(job.app_id)
    assert final.final_status == "FAILED", final
    lines = final.diagnostics.splitlines()
    assert lines[0] == ERROR, final.diagnostics
    assert lines[1].startswith("This error repeated"), final.diagnostics
    # Two starts, one restart: not eleven.
    assert starts == 2, starts
    restarts = [e for e in job.events if e.startswith("restart ")]
    assert len(restarts) == 1 and "worker:0" in restarts[0], job.events
    assert "1. worker:0 (attempt 0" in final.diagnostics
    assert "2. worker:0 (attempt 1" in final.diagnostics
    assert "\n3. " not in final.diagnostics
    # The stderr excerpt leads with the error, not with ^^^^ markers.
    assert f"Last lines of its stderr:\n  {ERROR}\n" in final.diagnostics
    assert "^^^" not in final.diagnostics
    # The decided FAILED ended the application: one master attempt, no retry.
    assert report["finalStatus"] == "FAILED", report
    assert ERROR in report["diagnostics"], report
    assert len(attempts) == 1 and len(attempts_later) == 1, attempts_later
    print(f"failed {elapsed:.1f} s after submission; attempts: {attempts_later}")


def test_a_script_sigkilled_twice_is_restarted_twice(skein_client: Any) -> None:
    with running_job(
        skein_client, JOBS / "killed_twice.py", max_restarts=2, **QUICK
    ) as job:
        for attempt in (0, 1):
            deadline = time.monotonic() + 150
            while True:
                try:
                    kill_task(job.app_id, "worker:0", attempt=attempt)
                    break
                except AssertionError:  # not started yet
                    assert time.monotonic() < deadline, f"no attempt {attempt}"
                    time.sleep(0.5)
        final = job.wait(timeout=300)
        log = job.logs("worker:0")
    assert final.succeeded
    # Both kills restarted the job, though the script wrote the same
    # "error" to stderr each time: a signal is not the script's own error.
    # (From the master's final word, its diagnostics: restarted in place, the
    # job can end before the live view polls a status with the second restart.)
    restarts = re.findall(
        r"\d\. cluster restarted: worker:0 \(attempt (\d)[^;]*killed by signal 9",
        final.diagnostics,
    )
    assert restarts == ["0", "1"], final.diagnostics
    # Three starts (a kill can land before the script's first print).
    assert log.count("worker:0 starts: ") == 3, log[-2000:]
    assert "start attempt=2" in log and "done" in log, log[-2000:]
