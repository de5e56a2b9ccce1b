"""The deadline runner behind every HDFS metadata call: timed-out calls do not
pile up threads."""

from __future__ import annotations

import threading
import time

import pytest

from tfyarn.data.fs import HdfsFileSystem, NameNodeUnreachableError
from tfyarn.data.fs import deadline as _deadline
from tfyarn.data.fs.deadline import DeadlineError, DeadlineRunner


def test_timed_out_calls_do_not_accumulate_threads() -> None:
    runner = DeadlineRunner(max_workers=2)
    release = threading.Event()
    before = threading.active_count()
    for n in range(6):
        started = time.monotonic()
        with pytest.raises(DeadlineError) as caught:
            runner.run(release.wait, timeout=0.2)
        assert time.monotonic() - started < 1.5
        assert caught.value.stuck == min(n + 1, 2)
    # Six calls timed out; two threads are blocked in them, no more.
    assert threading.active_count() - before == 2
    assert runner.workers == 2 and runner.stuck == 2
    release.set()
    deadline = time.monotonic() + 5
    while runner.stuck and time.monotonic() < deadline:
        time.sleep(0.01)
    assert runner.stuck == 0
    # The freed workers serve the next calls; no thread is added.
    assert [runner.run(lambda i=i: i, timeout=2) for i in range(5)] == list(range(5))
    assert threading.active_count() - before == 2


def test_results_and_exceptions_reach_the_caller() -> None:
    runner = DeadlineRunner(max_workers=1)
    assert runner.run(lambda: "ok", timeout=2) == "ok"
    with pytest.raises(KeyError, match="missing"):
        runner.run(lambda: {}["missing"], timeout=2)


def test_with_every_worker_stuck_the_error_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    release = threading.Event()
    monkeypatch.setattr(_deadline, "RUNNER", DeadlineRunner(max_workers=1))
    fs = HdfsFileSystem("hdfs", "127.0.0.1:1", timeout=0.2)
    monkeypatch.setattr(fs, "_get_client", lambda: object())
    try:
        with pytest.raises(NameNodeUnreachableError, match=r"within 0\.2 s: the"):
            fs._call("stat", "hdfs://127.0.0.1:1/x", lambda c: release.wait())
        with pytest.raises(
            NameNodeUnreachableError, match="all 1 HDFS call threads are blocked"
        ):
            fs._call("stat", "hdfs://127.0.0.1:1/y", lambda c: "never runs")
    finally:
        release.set()


def test_calls_at_the_same_time_run_in_parallel() -> None:
    runner = DeadlineRunner(max_workers=4)
    assert runner.run(lambda: 0, timeout=2) == 0  # one idle worker now
    barrier = threading.Barrier(4, timeout=5)
    results: list[int] = []

    def call(i: int) -> None:
        results.append(runner.run(lambda: barrier.wait() * 0 + i, timeout=5))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    # All four met at the barrier: each ran on its own worker.
    assert sorted(results) == [0, 1, 2, 3] and runner.workers == 4
