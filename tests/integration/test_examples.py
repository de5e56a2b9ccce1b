"""Each example trains on the local YARN cluster and must actually learn.

The check is the held-out accuracy the lead task prints (read back from the
job's logs), not only the exit code.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from helpers import EXAMPLES, accuracy_from, running_job

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

MIN_ACCURACY = 0.9


@pytest.fixture
def yarn(skein_client: Any) -> Any:
    """The session's skein client (tests/integration/conftest.py)."""
    return skein_client


def test_ps_strategy_with_coordinating_chief(yarn: Any) -> None:
    with running_job(
        yarn,
        EXAMPLES / "ps_coordinator.py",
        args=["--steps", "200", "--min_accuracy", "0"],
        num_chief=1,
        num_ps=1,
        num_worker=2,
        # ps and workers only serve; nothing to wait for once the chief is done
        worker_grace=2,
    ) as job:
        job.wait()
        assert any("cluster formed" in e for e in job.events), job.events
        assert accuracy_from(job.logs("chief:0")) >= MIN_ACCURACY


def test_multi_worker_mirrored(yarn: Any) -> None:
    with running_job(
        yarn,
        EXAMPLES / "mwms_keras.py",
        args=["--epochs", "3", "--min_accuracy", "0"],
        num_worker=2,
    ) as job:
        job.wait()
        assert accuracy_from(job.logs("worker:0")) >= MIN_ACCURACY
        # Both workers trained in sync: the other one reports the same steps
        assert "steps=192" in job.logs("worker:1")


def test_tf1_async_with_legacy_flags(yarn: Any) -> None:
    with running_job(
        yarn,
        EXAMPLES / "tf1_async_legacy.py",
        args=["--steps", "400", "--min_accuracy", "0"],
        num_ps=1,
        num_worker=2,
        legacy_flags=True,
        # worker 1 may still be in TF1's 30 s readiness wait when the chief ends
        worker_grace=5,
    ) as job:
        job.wait()
        assert accuracy_from(job.logs("worker:0")) >= MIN_ACCURACY


def test_tf1_sync_replicas_with_placeholders(yarn: Any) -> None:
    with running_job(
        yarn,
        EXAMPLES / "tf1_sync_replicas.py",
        args=[
            "--job",
            "{job_name}",
            "--index",
            "{task_index}",
            "--ps",
            "{ps_hosts}",
            "--workers",
            "{worker_hosts}",
            "--steps",
            "150",
            "--min_accuracy",
            "0",
        ],
        num_ps=1,
        num_worker=2,
        worker_grace=5,
    ) as job:
        job.wait()
        assert accuracy_from(job.logs("worker:0")) >= MIN_ACCURACY


def test_tf1_script_without_device_filters_does_not_hang(yarn: Any) -> None:
    """Old scripts lack device_filters; the master stops ps and stray workers."""
    started = time.monotonic()
    with running_job(
        yarn,
        EXAMPLES / "tf1_async_legacy.py",
        args=["--steps", "300", "--min_accuracy", "0", "--no-device_filters"],
        num_ps=1,
        num_worker=2,
        legacy_flags=True,
        worker_grace=5,
        stop_grace=3,
    ) as job:
        final = job.wait(timeout=300)
        assert final.final_status == "SUCCEEDED"
        assert accuracy_from(job.logs("worker:0")) >= MIN_ACCURACY
    assert time.monotonic() - started < 240
