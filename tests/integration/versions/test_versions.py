"""tfyarn end to end on each Hadoop version's own cluster (see conftest.py).

Per version: the cluster runs that version and reports its node's resources,
``tfyarn data`` and TensorFlow's ``hdfs://`` plugin work against its HDFS, a
ParameterServerStrategy job loses a worker and has it replaced, an all-reduce
job trains, ``yarn logs`` and ``tfyarn logs`` read both jobs' logs, and
``tfyarn kill`` ends a running job. Jobs are as small as proves the point.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _faults import kill_task
from _hdfs import hdfs_dir
from helpers import EXAMPLES, Job, accuracy_from, run_cli, running_job

from tfyarn import client
from tfyarn.cluster import LocalCluster

from .conftest import DATA

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs]

MIN_ACCURACY = 0.9
# Quick endings: ps and workers only serve once the lead is done.
QUICK = {"stop_grace": 3, "worker_grace": 2}


@pytest.fixture(scope="package")
def digits(local_cluster: LocalCluster) -> str:
    """The examples' data set, written with ``tfyarn data make-example``."""
    made = run_cli("data", "make-example", DATA, timeout=300)
    assert made.returncode == 0, made.stderr
    return DATA


@pytest.fixture(scope="package")
def base(local_cluster: LocalCluster) -> Iterator[str]:
    yield from hdfs_dir()


def _logs_through_yarn(app_id: str, wanted: str, timeout: float = 60) -> str:
    """``yarn logs -applicationId`` (the version's own CLI), once it holds
    ``wanted``: aggregation may lag the job's end by a few seconds."""
    deadline = time.monotonic() + timeout
    while True:
        done = subprocess.run(
            ["yarn", "logs", "-applicationId", app_id],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if wanted in done.stdout or time.monotonic() > deadline:
            return done.stdout + done.stderr
        time.sleep(2)


def _check_logs(job: Job, task: str, log_type: str) -> None:
    """The lead task's accuracy line through ``yarn logs`` and ``tfyarn logs``."""
    through_yarn = _logs_through_yarn(job.app_id, "accuracy=")
    assert f"LogType:{log_type}" in through_yarn, through_yarn[-2000:]
    assert accuracy_from(through_yarn) >= MIN_ACCURACY
    through_tfyarn = run_cli("logs", job.app_id, "--task", task)
    assert through_tfyarn.returncode == 0, through_tfyarn.stderr
    assert accuracy_from(through_tfyarn.stdout) >= MIN_ACCURACY


def test_the_cluster_runs_its_version(
    local_cluster: LocalCluster, version: str
) -> None:
    status = local_cluster.status()
    assert status.running
    assert f"Hadoop {version} on JDK " in status.format()
    # The node's total, read from this version's own node report.
    (node,) = status.nodes or []
    assert (node.memory_mb, node.vcores) == (8192, 8), node
    printed = subprocess.run(
        ["hadoop", "version"], capture_output=True, text=True, timeout=60, check=False
    )
    assert printed.stdout.startswith(f"Hadoop {version}\n"), printed


def test_data_cli_and_the_plugin_on_this_hdfs(digits: str, base: str) -> None:
    counted = run_cli("data", "count", digits + "/train-*")
    assert counted.returncode == 0, counted.stderr
    assert "total" in counted.stdout
    # TensorFlow's own file APIs through tfyarn's hdfs:// plugin.
    code = f"""
        import tensorflow as tf, tfyarn
        tfyarn.enable_hdfs()
        root = {base!r} + "/plugin"
        tf.io.gfile.makedirs(root)
        with tf.io.TFRecordWriter(root + "/part-0.tfrecord") as w:
            for i in range(3):
                w.write(str(i).encode())
        tf.io.gfile.rename(root + "/part-0.tfrecord", root + "/part-1.tfrecord")
        files = tf.io.gfile.glob(root + "/part-*.tfrecord")
        records = [r.decode() for r in tf.data.TFRecordDataset(files).as_numpy_iterator()]
        print("plugin:", files, records)
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"plugin: ['{base}/plugin/part-1.tfrecord'] ['0', '1', '2']" in done.stdout


def _wait_for_step(job: Job, task: str, step: int, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = client.status(job.app_id, client=job.yarn)
        assert not status.done, f"job ended early: {status.diagnostics}"
        for t in status.master.tasks if status.master else []:
            if t.task == task and t.step is not None and t.step >= step:
                return
        time.sleep(0.5)
    pytest.fail(f"{task} did not reach step {step} within {timeout:.0f} s")


def test_ps_strategy_job_has_a_killed_worker_replaced(
    yarn: Any, digits: str, base: str
) -> None:
    args = ["--data", digits, "--checkpoint_dir", base + "/ps", "--steps", "300"]
    with running_job(
        yarn,
        EXAMPLES / "ps_coordinator.py",
        args=args,
        num_chief=1,
        num_ps=1,
        num_worker=2,
        max_restarts=2,
        **QUICK,
    ) as job:
        _wait_for_step(job, "chief:0", 50)
        kill_task(job.app_id, "worker:1")
        final = job.wait(timeout=300)
        assert final.succeeded, final.diagnostics
        assert any("worker:1 replaced" in e for e in job.events), job.events
        _check_logs(job, "chief:0", "chief.log")


def test_all_reduce_job_trains(yarn: Any, digits: str, base: str) -> None:
    args = ["--data", digits, "--checkpoint_dir", base + "/mwms", "--steps", "150"]
    with running_job(
        yarn,
        EXAMPLES / "mwms_keras.py",
        args=args,
        num_worker=2,
        max_restarts=0,
        **QUICK,
    ) as job:
        final = job.wait(timeout=300)
        assert final.succeeded, final.diagnostics
        _check_logs(job, "worker:0", "worker.log")


def test_tfyarn_kill_ends_a_running_job(yarn: Any, tmp_path: Path) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text('import time\nprint("sleeper up", flush=True)\ntime.sleep(300)\n')
    plain = {"worker_memory": "256 MiB", "am_memory": "512 MiB"}
    with running_job(yarn, script, num_worker=1, **plain) as job:
        deadline = time.monotonic() + 120
        while True:
            status = client.status(job.app_id, client=yarn)
            tasks = status.master.tasks if status.master else []
            if any(t.state == "RUNNING" for t in tasks):
                break
            assert time.monotonic() < deadline, f"never RUNNING: {status}"
            time.sleep(1)
        killed = run_cli("kill", job.app_id)
        assert killed.returncode == 0, killed.stderr
        assert "KILLED" in killed.stdout
        assert client.status(job.app_id, client=yarn).state == "KILLED"
