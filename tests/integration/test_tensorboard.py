"""``--tensorboard``: the job's TensorBoard, reached through the ResourceManager's proxy.

A one-worker job (jobs/tensorboard_scalars.py) writes three scalars to HDFS with
``tfyarn.tensorboard.LogSync`` and keeps running; the master mirrors the HDFS
dir into its container and runs TensorBoard, which must serve those values at
``<tracking URL>/pages/tensorboard/``. Killing the job ends TensorBoard.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _hdfs import hdfs_dir
from helpers import running_job

from tfyarn import client

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

JOB = Path(__file__).with_name("jobs") / "tensorboard_scalars.py"
WRITTEN = [(0, 0.5), (1, 0.25), (2, 0.125)]  # jobs/tensorboard_scalars.py: VALUES


@pytest.fixture
def logdir() -> Iterator[str]:
    yield from hdfs_dir()


def tensorboard_processes(app_id: str) -> list[str]:
    """Command lines of this application's TensorBoard (the cluster is this machine)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "tensorboard-logs" in cmdline and app_id in cmdline:
            found.append(cmdline)
    return found


def scalars(url: str) -> list[tuple[int, float]]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return [(step, value) for _, step, value in json.loads(response.read())]


def test_tensorboard_serves_the_jobs_scalars_through_the_proxy(
    skein_client: Any, logdir: str
) -> None:
    options = {"num_worker": 1, "num_ps": 0, "tensorboard": logdir}
    args = ["--logdir", logdir, "--sleep", "60"]
    with running_job(skein_client, JOB, args=args, **options) as job:
        tracking = str(job.yarn.application_report(job.app_id).tracking_url)
        assert "/proxy/" + job.app_id in tracking, tracking  # through the RM
        board = tracking.rstrip("/") + "/pages/tensorboard/"
        url = board + "data/plugin/scalars/scalars?run=.&tag=loss"
        deadline, problem = time.monotonic() + 240, ""
        seen: list[tuple[int, float]] = []
        while time.monotonic() < deadline and seen != WRITTEN:
            status = client.status(job.app_id, client=job.yarn)
            assert not status.done, f"job ended early: {status.diagnostics}"
            try:
                seen = scalars(url)
            except (urllib.error.URLError, OSError, ValueError) as exc:
                problem = str(exc)  # not served (or not mirrored) yet
            time.sleep(2)
        assert seen == WRITTEN, f"TensorBoard served {seen} ({problem})"
        # TensorBoard's own page loads through the same proxy path.
        with urllib.request.urlopen(board, timeout=30) as response:
            assert "tb-relative-root" in response.read().decode()
        page = tracking.rstrip("/") + "/pages/tfyarn/"
        with urllib.request.urlopen(page, timeout=30) as response:
            assert (
                "<a href='../tensorboard/'>TensorBoard</a>" in response.read().decode()
            )
        assert tensorboard_processes(job.app_id)

        client.kill(job.app_id, client=job.yarn)
        deadline = time.monotonic() + 60
        while tensorboard_processes(job.app_id) and time.monotonic() < deadline:
            time.sleep(1)
        assert not tensorboard_processes(job.app_id), "TensorBoard outlived its job"
