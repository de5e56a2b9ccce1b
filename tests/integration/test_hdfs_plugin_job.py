"""A script with no tfyarn import reads, checkpoints and summarizes on hdfs://.

examples/plain_tf_hdfs.py uses only TensorFlow's own APIs on HDFS paths; the
task runtime registers the plugin before its first line. It runs twice on the
same checkpoint directory: the first job pre-started (preimport, the default),
the second started plain (``preimport=()``), so both starts are proven; the
second resumes at the step the first ended at.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from _hdfs import hdfs_dir
from helpers import EXAMPLES, accuracy_from, running_job

import tfyarn
from tfyarn.data import resolve
from tfyarn.data.example import write_digits

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs, pytest.mark.slow]

DATA = "hdfs:///tmp/tfyarn/digits"  # the examples' default --data


@pytest.fixture(scope="module")
def digits(local_cluster: Any) -> str:
    fs = resolve(DATA)
    if not (fs.glob(DATA + "/train-*") and fs.glob(DATA + "/test-*")):
        write_digits(DATA)
    return DATA


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    yield from hdfs_dir()


def _last(text: str, key: str) -> int:
    found = re.findall(rf"^{key}=(\d+)\s*$", text, re.MULTILINE)
    assert found, f"no {key}=... line in the log:\n{text[-3000:]}"
    return int(found[-1])


def _run(skein_client: Any, args: list[str], **options: Any) -> tuple[int, int]:
    with running_job(
        skein_client,
        EXAMPLES / "plain_tf_hdfs.py",
        args=args,
        num_worker=1,
        max_restarts=0,
        **options,
    ) as job:
        job.wait()
        text = job.logs("worker:0")
        assert accuracy_from(text) >= 0.85
        return _last(text, "start_step"), _last(text, "steps")


def test_plain_tensorflow_script_on_hdfs_resumes(
    skein_client: Any, digits: str, base: str
) -> None:
    source = (EXAMPLES / "plain_tf_hdfs.py").read_text()
    assert not re.search(r"^\s*(import|from) tfyarn", source, re.MULTILINE)
    ckpt = base + "/plain"
    args = ["--data", digits, "--checkpoint_dir", ckpt]
    assert _run(skein_client, [*args, "--steps", "100"]) == (0, 100)
    assert _run(skein_client, [*args, "--steps", "150"], preimport=()) == (100, 150)

    tf = pytest.importorskip("tensorflow")
    tfyarn.enable_hdfs()
    assert tf.train.latest_checkpoint(ckpt).endswith("ckpt-150")
    events = tf.io.gfile.glob(ckpt + "/logs/events.out.tfevents.*")
    assert len(events) == 2  # one per run
    steps = []
    for path in events:
        for record in tf.data.TFRecordDataset(path):
            event = tf.compat.v1.Event.FromString(record.numpy())
            if any(v.tag == "loss" for v in event.summary.value):
                steps.append(event.step)
    assert sorted(steps) == list(range(10, 151, 10))
