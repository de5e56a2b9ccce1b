"""A YARN job that reads its data from HDFS, checkpoints there, and resumes.

Two MultiWorkerMirrored workers each read their shard of the digits data set
through tfyarn.data; the lead uploads checkpoints and TensorBoard logs; a
second job continues from the first job's checkpoint (the containers that
wrote it are gone).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _hdfs import hdfs_dir
from helpers import accuracy_from, running_job

from tfyarn.data import resolve
from tfyarn.data.example import write_digits

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs, pytest.mark.slow]

SCRIPT = Path(__file__).with_name("_hdfs_train_job.py")


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    yield from hdfs_dir()


def _steps(text: str, key: str) -> list[int]:
    return [int(v) for v in re.findall(rf"^{key}=(\d+)\s*$", text, re.MULTILINE)]


def test_train_from_hdfs_and_resume(skein_client: Any, base: str) -> None:
    write_digits(base + "/digits", shards=4, train=4000, test=1000)
    args = [
        "--data",
        base + "/digits",
        "--checkpoint_dir",
        base + "/ckpt",
        "--log_dir",
        base + "/logs",
    ]
    with running_job(
        skein_client, SCRIPT, args=[*args, "--steps", "120"], num_worker=2
    ) as job:
        job.wait()
        lead = job.logs("worker:0")
        assert _steps(lead, "start_step") == [0]
        assert _steps(lead, "steps") == [120]
        assert _steps(job.logs("worker:1"), "steps") == [120]
        assert accuracy_from(lead) >= 0.9
    fs = resolve(base)
    names = sorted(i.url.rsplit("/", 1)[-1] for i in fs.ls(base + "/ckpt"))
    assert "checkpoint" in names and "ckpt-3.index" in names, names
    events = fs.glob(base + "/logs/events.out.tfevents.*")
    assert events and events[0].size > 0

    with running_job(
        skein_client, SCRIPT, args=[*args, "--steps", "160"], num_worker=2
    ) as job:
        job.wait()
        lead = job.logs("worker:0")
        # The second job starts where the first ended: the step count continues.
        assert _steps(lead, "start_step") == [120]
        assert _steps(job.logs("worker:1"), "start_step") == [120]
        assert _steps(lead, "steps") == [160]
        assert accuracy_from(lead) >= 0.9
