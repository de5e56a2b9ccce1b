"""Scripts with no tfyarn import read, checkpoint and summarize on hdfs://.

examples/plain_tf_hdfs.py uses only TensorFlow's own APIs on HDFS paths; the
task runtime registers the plugin before its first line. It runs twice on the
same checkpoint directory: the first job pre-started (preimport, the default),
the second started plain (``preimport=()``), so both starts are proven; the
second resumes at the step the first ended at.

examples/ps_hdfs_evaluator.py: ParameterServerStrategy whose workers read
hdfs:// in their per-worker datasets, and an evaluator that watches the HDFS
checkpoint directory, writes summaries there, and ends after the chief.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
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
    found = re.findall(rf"^{key}=(\d+)", text, re.MULTILINE)
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


def _logged_at(master_log: str, line: str) -> datetime:
    """When the master logged ``line`` (its log lines start with a timestamp)."""
    found = re.search(
        rf"^(\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d,\d+) .*{re.escape(line)}",
        master_log,
        re.MULTILINE,
    )
    assert found, f"the master never logged {line!r}:\n{master_log[-3000:]}"
    return datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f")


# Few steps: a checkpoint every 30, so the evaluator sees several.
EVAL_ARGS = ("--steps", "90", "--checkpoint_every", "30")


def test_ps_workers_read_hdfs_and_evaluator_ends_after_chief(
    skein_client: Any, digits: str, base: str
) -> None:
    ckpt = base + "/ps-eval"
    with running_job(
        skein_client,
        EXAMPLES / "ps_hdfs_evaluator.py",
        args=[*("--data", digits, "--checkpoint_dir", ckpt), *EVAL_ARGS],
        num_chief=1,
        num_ps=1,
        num_worker=2,
        num_evaluator=1,
        max_restarts=0,
        worker_grace=2,
        # Told to stop, the evaluator still evaluates the chief's last
        # checkpoint: on a CI machine at load average 18 that took longer than
        # the default 10 s, and the job ended with it SIGKILLed.
        stop_grace=60,
    ) as job:
        assert job.wait().final_status == "SUCCEEDED"
        chief = job.logs("chief:0")
        evaluator = job.logs("evaluator:0")
        master = job.logs("master")
    assert _last(chief, "steps") == 90

    # It evaluated checkpoints as they came, the chief's final one included,
    # and then finished on its own within the stop grace.
    found = re.findall(
        r"^evaluated step=(\d+) accuracy=([0-9.]+)", evaluator, re.MULTILINE
    )
    accuracy = {int(step): float(value) for step, value in found}
    steps = sorted(accuracy)
    assert steps and steps[-1] == 90, evaluator[-3000:]
    assert f"evaluator done: evaluated={len(found)} last_step=90" in evaluator
    assert accuracy[90] >= 0.5  # a trained model, not the initial one

    # Its summaries are on HDFS, readable through the plugin.
    tf = pytest.importorskip("tensorflow")
    tfyarn.enable_hdfs()
    events = tf.io.gfile.glob(ckpt + "/eval/events.out.tfevents.*")
    assert len(events) == 1, events
    written = sorted(
        event.step
        for record in tf.data.TFRecordDataset(events)
        for event in [tf.compat.v1.Event.FromString(record.numpy())]
        if any(v.tag == "accuracy" for v in event.summary.value)
    )
    assert written == steps

    # Its lifecycle: stopped because the chief finished, ended after it, and
    # exited 0 (it ran to the end of its script, was not SIGKILLed).
    chief_end = _logged_at(master, "chief:0 SUCCEEDED: script exited 0")
    stop = _logged_at(master, "evaluator:0 stop requested: chief:0 finished")
    ended = _logged_at(master, "evaluator:0 KILLED: stopped by the master (exit 0)")
    assert chief_end <= stop <= ended
