"""The master's Prometheus metrics (am/metrics.py), parsed as Prometheus parses them."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from _am_support import job, snapshot
from prometheus_client.parser import text_string_to_metric_families

from am.launcher import FakeLauncher
from am.metrics import JobMetrics, PublishedSnapshot, StepRates, reason_kind
from am.servicer import create_server
from am.state import JobState
from tfyarn._proto import master_pb2 as pb
from tfyarn._proto import master_pb2_grpc
from tfyarn.contract.channel import secure_channel


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def samples(text: bytes) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """(sample name, labels) -> value, from the text exposition format."""
    out = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            out[s.name, frozenset(s.labels.items())] = s.value
    return out


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found[name, frozenset(labels.items())]


def test_gauges_follow_the_snapshot() -> None:
    snap = snapshot()
    metrics = JobMetrics(lambda: snap)
    found = samples(metrics.exposition())
    assert value(found, "tfyarn_job_phase", phase="RUNNING") == 1
    assert value(found, "tfyarn_job_phase", phase="FAILED") == 0
    assert value(found, "tfyarn_cluster_generation") == 2
    assert value(found, "tfyarn_cluster_formation_seconds") == 12.5
    assert value(found, "tfyarn_restarts") == 1
    assert value(found, "tfyarn_restart_budget_used") == 1
    assert value(found, "tfyarn_max_restarts") == 3
    assert value(found, "tfyarn_restarts_by_reason", reason="lost") == 1
    assert value(found, "tfyarn_restarts_by_reason", reason="exit") == 0
    # Tasks by role and state, zeros included.
    assert value(found, "tfyarn_tasks", role="chief", state="RUNNING") == 1
    assert value(found, "tfyarn_tasks", role="ps", state="REGISTERED") == 1
    assert value(found, "tfyarn_tasks", role="ps", state="RUNNING") == 0
    assert value(found, "tfyarn_tasks", role="worker", state="REQUESTED") == 1
    # Per task: steps, heartbeat age, attempt, the script's metrics.
    chief = {"task": "chief:0", "role": "chief"}
    assert value(found, "tfyarn_task_step", **chief) == 250
    assert value(found, "tfyarn_task_heartbeat_age_seconds", **chief) == 1.5
    assert value(found, "tfyarn_task_attempt", task="ps:0", role="ps") == 1
    assert value(found, "tfyarn_task_metric", **chief, metric="loss") == 0.125
    # No step, no heartbeat yet: no sample rather than a made-up zero.
    assert (
        "tfyarn_task_step",
        frozenset({"task": "ps:0", "role": "ps"}.items()),
    ) not in found


def test_steps_per_second_over_what_was_seen() -> None:
    clock = Clock()
    snap = snapshot()
    metrics = JobMetrics(lambda: snap, StepRates(clock))
    chief = {"task": "chief:0", "role": "chief"}
    found = samples(metrics.exposition())
    assert ("tfyarn_task_steps_per_second", frozenset(chief.items())) not in found
    clock.now += 10
    snap["tasks"][0]["step"] = 300
    found = samples(metrics.exposition())
    assert value(found, "tfyarn_task_steps_per_second", **chief) == 5.0
    # A new attempt starts counting again.
    snap["tasks"][0]["attempt"] = 1
    snap["tasks"][0]["step"] = 10
    found = samples(metrics.exposition())
    assert ("tfyarn_task_steps_per_second", frozenset(chief.items())) not in found
    # No new step for a whole window: 0, not the old rate.
    clock.now += 10
    snap["tasks"][0]["step"] = 20
    assert (
        value(samples(metrics.exposition()), "tfyarn_task_steps_per_second", **chief)
        == 1.0
    )
    clock.now += 61
    assert (
        value(samples(metrics.exposition()), "tfyarn_task_steps_per_second", **chief)
        == 0.0
    )


def test_nothing_published_yet_still_scrapes() -> None:
    metrics = JobMetrics(PublishedSnapshot(lambda: ""))
    text = metrics.exposition()
    # A valid exposition (the call counter is declared), and no gauge made up
    # from a snapshot that does not exist yet.
    assert b"# TYPE tfyarn_registry_calls_total counter" in text
    assert samples(text) == {}


def test_published_snapshot_is_parsed_once_per_version() -> None:
    text = {"v": json.dumps({"phase": "RUNNING"})}
    published = PublishedSnapshot(lambda: text["v"])
    first = published()
    assert first == {"phase": "RUNNING"} and published() is first
    text["v"] = json.dumps({"phase": "FAILED"})
    assert published()["phase"] == "FAILED"


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("cluster restarted: ps:0 (node2) was lost: its container ended", "lost"),
        ("worker:1 replaced: worker:1 (node1) exited with code 3", "exit"),
        (
            "cluster restarted: chief:0 exited with code -9 (killed by signal 9)",
            "signal",
        ),
        ("cluster restarted: worker:0 (n) sent no heartbeat for 30 s", "heartbeat"),
        ("cluster restarted: the job stalled: no task reported", "stall"),
        ("cluster restarted: 1 task(s) did not register within", "registration"),
        ("application master attempt 2: attempt 1 ended", "master"),
        ("something new", "other"),
    ],
)
def test_restart_reasons_map_to_a_few_labels(reason: str, kind: str) -> None:
    assert reason_kind(reason) == kind


@pytest.fixture
def counted_master(
    credentials: tuple[bytes, bytes],
) -> Iterator[tuple[str, JobMetrics]]:
    """The real servicer on port 0 with the counting hook (YARN faked, no loop run)."""
    metrics = JobMetrics(dict)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        state = JobState(job(tasks={"worker": 1}), FakeLauncher())
        server, port = create_server(
            state, *credentials, "127.0.0.1:0", on_call=metrics.count_call
        )
        await server.start()
        holder.update(server=server, port=port)
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(start(), loop)
    assert ready.wait(10)
    try:
        yield f"127.0.0.1:{holder['port']}", metrics
    finally:
        asyncio.run_coroutine_threadsafe(holder["server"].stop(0), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


def test_registry_calls_are_counted_by_method_and_code(
    counted_master: tuple[str, JobMetrics], credentials: tuple[bytes, bytes]
) -> None:
    address, metrics = counted_master
    stub = master_pb2_grpc.MasterStub(secure_channel(address, *credentials))
    worker = pb.TaskKey(role="worker", index=0)
    # Registered (a task's first call): the job's one task forms the cluster.
    registration = pb.RegisterTaskRequest(task=worker, host="127.0.0.1", port=4000)
    watch = stub.WatchCluster(
        pb.WatchClusterRequest(task=worker, register=registration), timeout=10
    )
    assert next(watch).cluster_spec.generation == 1
    watch.cancel()
    stub.Heartbeat(pb.HeartbeatRequest(task=worker), timeout=5)
    with pytest.raises(grpc.RpcError) as refused:
        stub.Heartbeat(
            pb.HeartbeatRequest(task=pb.TaskKey(role="worker", index=7)), timeout=5
        )
    assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    with pytest.raises(grpc.RpcError):
        next(
            iter(stub.WatchCluster(pb.WatchClusterRequest(task=pb.TaskKey(role="ps"))))
        )
    calls = "tfyarn_registry_calls_total"
    # A refused stream's status can reach the client before the server's
    # handler has unwound past the counter: wait for it, bounded.
    refused_watch = (
        calls,
        frozenset({("method", "WatchCluster"), ("code", "NOT_FOUND")}),
    )
    deadline = time.monotonic() + 10
    found = samples(metrics.exposition())
    while refused_watch not in found and time.monotonic() < deadline:
        time.sleep(0.02)
        found = samples(metrics.exposition())
    assert value(found, calls, method="WatchCluster", code="OK") == 1
    assert value(found, calls, method="Heartbeat", code="OK") == 1
    assert value(found, calls, method="Heartbeat", code="NOT_FOUND") == 1
    assert value(found, calls, method="WatchCluster", code="NOT_FOUND") == 1


def test_disruptions_and_preemptions_are_counted_by_kind() -> None:
    snap = snapshot(
        disruptions=3,
        max_disruptions=20,
        disruption_kinds={"preempted": 2, "released": 1},
        disruption_reasons=["worker:1 (h) was preempted: ..."] * 3,
    )
    found = samples(JobMetrics(lambda: snap).exposition())
    assert value(found, "tfyarn_disruptions_total", kind="preempted") == 2
    assert value(found, "tfyarn_disruptions_total", kind="released") == 1
    assert value(found, "tfyarn_disruptions_total", kind="disks failed") == 0
    assert value(found, "tfyarn_preemptions_total") == 2
    assert value(found, "tfyarn_max_disruptions") == 20
    # Not restarts: the restart gauges stay as the snapshot has them.
    assert value(found, "tfyarn_restart_budget_used") == 1


def test_no_disruption_yet_still_shows_every_kind_at_zero() -> None:
    found = samples(JobMetrics(lambda: snapshot()).exposition())
    assert value(found, "tfyarn_disruptions_total", kind="preempted") == 0
    assert value(found, "tfyarn_preemptions_total") == 0


def test_resizes_and_the_worker_count_are_exported() -> None:
    snap = snapshot(resizes=2, resize_reasons=["resized from 2 to 3 worker(s): a"] * 2)
    found = samples(JobMetrics(lambda: snap).exposition())
    assert value(found, "tfyarn_resizes_total") == 2
    workers = sum(t["role"] == "worker" for t in snap["tasks"])
    assert value(found, "tfyarn_workers") == workers
    # Not restarts: the restart gauges stay as the snapshot has them.
    assert value(found, "tfyarn_restarts") == 1
