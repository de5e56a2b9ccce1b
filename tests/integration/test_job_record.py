"""A job's record outlives it, on the local cluster.

The master keeps its final status on HDFS (am/record.py) before the
application ends; once YARN reports the job ended, ``tfyarn status`` reads it
there: the tasks with their attempts, the restarts, owner-only on HDFS. (A job
``tfyarn kill`` stopped is recorded KILLED: test_submit's kill test reads it.)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers import run_cli, running_job

from tfyarn.contract.record import DIR_MODE, FILE_MODE, record_dir, record_url
from tfyarn.data import fs

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


def hdfs_mode(url: str) -> int:
    """The permission bits of an HDFS path (FileInfo carries none)."""
    filesystem: Any = fs.resolve(url)
    path = filesystem._path(url)
    return int(
        filesystem._call("stat", url, lambda c: c.get_file_info(path)).permission
    )


def status_json(app_id: str) -> dict[str, Any]:
    """``tfyarn status APP --json`` in a subprocess, as a user runs it."""
    done = run_cli("status", "--json", app_id, timeout=120)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def test_a_succeeded_jobs_status_after_its_end_is_its_final_record(
    skein_client: Any,
) -> None:
    with running_job(
        skein_client, JOBS / "fails_once.py", max_restarts=2, **QUICK
    ) as job:
        final = job.wait(timeout=300)
    assert final.succeeded, final
    status = status_json(job.app_id)
    assert status["state"] == "FINISHED" and status["final_status"] == "SUCCEEDED"
    url = record_url(final.user, job.app_id)
    master = status["master"]
    assert master is not None, status["record_missing"]
    assert status["record"] == url and status["record_missing"] == ""
    assert master["phase"] == "SUCCEEDED"
    assert master["restarts"] == 1, master
    tasks = {t["task"]: t for t in master["tasks"]}
    worker = tasks["worker:0"]
    assert worker["state"] == "SUCCEEDED" and worker["attempt"] == 1, worker
    assert len(worker["failures"]) == 1, worker  # why attempt 0 ended
    assert "exited with code 1" in master["restart_reasons"][0], master
    # The text output shows the same, marked as the final record.
    text = run_cli("status", job.app_id, timeout=120)
    assert text.returncode == 0, text.stderr
    assert "restarts 1" in text.stdout and "(final record)" in text.stdout
    # Readable by its owner only.
    assert hdfs_mode(url) & 0o777 == FILE_MODE
    assert hdfs_mode(record_dir(final.user)) & 0o777 == DIR_MODE
