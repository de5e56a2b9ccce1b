"""Each example trains on the local YARN cluster from HDFS data and resumes.

Every example reads the digits data set from HDFS (created by the session if
absent, as CI starts from an empty HDFS) and checkpoints to HDFS. Each test runs
an example twice with the same checkpoint directory: the first job must learn
(held-out accuracy, read back from the job's logs, above a bound), and the
second must start at the step the first ended at and continue to its own
target, still learning. (``ps_coordinator.py`` trains once here: the recovery
tier runs it through two cluster restarts, each resuming from its HDFS
checkpoint in new containers, as a resubmission would.)
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from _hdfs import hdfs_dir
from helpers import EXAMPLES, accuracy_from, running_job

from tfyarn.data import resolve
from tfyarn.data.example import write_digits

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs, pytest.mark.slow]

MIN_ACCURACY = 0.9
DATA = "hdfs:///tmp/tfyarn/digits"  # the examples' default --data


@pytest.fixture(scope="session")
def digits(local_cluster: Any) -> str:
    """The examples' data set at its default place, written if absent."""
    fs = resolve(DATA)
    if not (fs.glob(DATA + "/train-*") and fs.glob(DATA + "/test-*")):
        write_digits(DATA)  # what `tfyarn data make-example` writes
    return DATA


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    yield from hdfs_dir()


@dataclass
class Run:
    """What an example's lead task printed."""

    start_step: int
    steps: int
    accuracy: float


def _int(text: str, key: str) -> int:
    # Not anchored at the line's end: with stdout and stderr in one log, a
    # traceback's line written at the same moment can land after the number
    # (print writes the text and its newline apart): "steps=300    raise ...",
    # or with no space at all: "steps=300Exception in thread ...".
    found = re.findall(rf"^{key}=(\d+)", text, re.MULTILINE)
    assert found, f"no {key}=... line in the log:\n{text[-3000:]}"
    return int(found[-1])


def _run(
    yarn: Any,
    script: str,
    args: list[str],
    lead: str,
    peers: tuple[str, ...],
    **options: Any,
) -> Run:
    # No restarts: one would hide a bug here (failure recovery has its own tests).
    options.setdefault("max_restarts", 0)
    with running_job(yarn, EXAMPLES / script, args=args, **options) as job:
        job.wait()
        text = job.logs(lead)
        run = Run(_int(text, "start_step"), _int(text, "steps"), accuracy_from(text))
        for peer in peers:  # synchronous training: every worker took every step
            text = job.logs(peer)
            assert (_int(text, "start_step"), _int(text, "steps")) == (
                run.start_step,
                run.steps,
            ), peer
        return run


def _train_and_resume(
    yarn: Any,
    script: str,
    args: list[str],
    lead: str,
    *,
    targets: tuple[int, int],
    exact: bool = True,
    peers: tuple[str, ...] = (),
    resume_args: tuple[str, ...] = (),
    **options: Any,
) -> float:
    """Run ``script`` to ``targets[0]`` steps, then again to ``targets[1]``
    with ``resume_args`` added; return the second run's seconds."""
    first = _run(
        yarn, script, [*args, "--steps", str(targets[0])], lead, peers, **options
    )
    print(f"{script} first run: {first}")
    assert first.start_step == 0
    assert first.steps == targets[0] if exact else first.steps >= targets[0]
    assert first.accuracy >= MIN_ACCURACY
    started = time.monotonic()
    second = _run(
        yarn,
        script,
        [*args, *resume_args, "--steps", str(targets[1])],
        lead,
        peers,
        **options,
    )
    took = time.monotonic() - started
    print(f"{script} second run: {second} in {took:.0f} s")
    # The second job continues from the first job's last checkpoint.
    assert second.start_step == first.steps
    assert second.steps == targets[1] if exact else second.steps >= targets[1]
    assert second.accuracy >= MIN_ACCURACY
    return took


def _common(digits: str, checkpoint_dir: str) -> list[str]:
    return ["--data", digits, "--checkpoint_dir", checkpoint_dir]


def test_ps_strategy_with_coordinating_chief(yarn: Any, digits: str, base: str) -> None:
    # ps and workers only serve; nothing to wait for once the chief is done
    run = _run(
        yarn,
        "ps_coordinator.py",
        [*_common(digits, base + "/ps"), "--steps", "200"],
        "chief:0",
        (),
        num_chief=1,
        num_ps=1,
        num_worker=2,
        worker_grace=2,
    )
    assert (run.start_step, run.steps) == (0, 200)
    assert run.accuracy >= MIN_ACCURACY


def test_multi_worker_mirrored(yarn: Any, digits: str, base: str) -> None:
    """Two all-reduce workers read their shards from HDFS and resume there.

    The second job's containers are new: it can only continue from the
    checkpoint the first job left on HDFS (its state file and data files).
    """
    checkpoints = base + "/mwms"
    _train_and_resume(
        yarn,
        "mwms_keras.py",
        _common(digits, checkpoints),
        "worker:0",
        targets=(150, 250),
        peers=("worker:1",),
        num_worker=2,
    )
    names = {i.url.rsplit("/", 1)[-1] for i in resolve(checkpoints).ls(checkpoints)}
    # --checkpoint_every 50 and max_to_keep=2: the last two of the second run.
    assert {"checkpoint", "ckpt-4.index", "ckpt-5.index"} <= names, names


def test_tf1_async_with_legacy_flags(yarn: Any, digits: str, base: str) -> None:
    """Also: old scripts lack device_filters, so their ps and the workers that
    are done wait forever; the master stops them (the resumed run has none)."""
    resumed = _train_and_resume(
        yarn,
        "tf1_async_legacy.py",
        _common(digits, base + "/tf1-async"),
        "worker:0",
        # Asynchronous updates from a random start: 150 steps gave 0.91-0.96,
        # too close to the bound; steps are cheap next to starting the job.
        targets=(300, 400),
        # Asynchronous: the other worker may move the shared step past the
        # target before the chief's last checkpoint.
        exact=False,
        resume_args=("--no-device_filters",),
        num_ps=1,
        num_worker=2,
        legacy_flags=True,
        # worker 1 may still be in TF1's 30 s readiness wait when the chief ends
        worker_grace=5,
        stop_grace=3,
    )
    assert resumed < 240, "the run without device_filters hung"


def test_tf1_sync_replicas_with_placeholders(yarn: Any, digits: str, base: str) -> None:
    placeholders = [
        "--job",
        "{job_name}",
        "--index",
        "{task_index}",
        "--ps",
        "{ps_hosts}",
        "--workers",
        "{worker_hosts}",
    ]
    _train_and_resume(
        yarn,
        "tf1_sync_replicas.py",
        [*placeholders, *_common(digits, base + "/tf1-sync")],
        "worker:0",
        targets=(200, 300),
        exact=False,
        num_ps=1,
        num_worker=2,
        worker_grace=5,
    )


@pytest.fixture
def yarn(skein_client: Any) -> Any:
    """The session's skein client (tests/integration/conftest.py)."""
    return skein_client
