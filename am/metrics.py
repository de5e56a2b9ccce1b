"""Prometheus metrics of one job, served at ``<tracking page>/metrics``.

Gauges come from the latest published snapshot (the ``tfyarn.status``
document), computed at scrape time by :class:`SnapshotCollector`: the scrape
runs in the page's HTTP thread, and the snapshot is the only thing of the
master's it may read (never ``JobState``). Registry calls are counted by the
servicer's hook (:meth:`JobMetrics.count_call`), a thread-safe counter.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from tfyarn.contract.exit_codes import DISRUPTIONS
from tfyarn.contract.status import Phase, TaskState

Snapshot = Callable[[], dict[str, Any]]

MIB = 1 << 20  # nvidia-smi counts memory in MiB; Prometheus in bytes

# steps/s is the slope over what the page saw in this window: long enough to
# smooth the snapshot's publish gaps (seconds), short enough to follow a change.
RATE_WINDOW = 60.0

# The snapshot's restart reasons are sentences (am/state.py, am/reconcile.py);
# a label needs a small fixed set, so each sentence maps to the first kind
# whose words it contains (else "other").
_REASON_WORDS = (
    ("master", "application master attempt"),
    ("registration", "did not register"),
    ("stall", "stalled"),
    ("heartbeat", "no heartbeat"),
    ("lost", "was lost"),
    ("signal", "killed by signal"),
    ("exit", "exited with code"),
)


def reason_kind(reason: str) -> str:
    """The label of one restart reason.

    Examples
    --------
    >>> reason_kind("cluster restarted: ps:0 (node1) was lost: its container ...")
    'lost'
    """
    return next((kind for kind, words in _REASON_WORDS if words in reason), "other")


class PublishedSnapshot:
    """The last published snapshot (JSON text) as a dict, parsed once per version.

    Called from the page's threads; the text is replaced whole by the
    reconcile loop, so reading it needs no lock (a race parses twice).
    """

    def __init__(self, text: Callable[[], str]) -> None:
        self.text = text
        self._cache: tuple[str, dict[str, Any]] = ("", {})

    def __call__(self) -> dict[str, Any]:
        text = self.text()
        cached_text, parsed = self._cache
        if text is not cached_text and text != cached_text:
            parsed = json.loads(text) if text else {}
            self._cache = (text, parsed)
        return parsed


class StepRates:
    """Steps per second of each task, from the snapshots the page has seen.

    The snapshot carries steps, not times, so the rate is the slope over the
    moments a reader observed them; a new attempt (steps start again) resets it.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._seen: dict[str, tuple[int, deque[tuple[float, int]]]] = {}
        self._lock = threading.Lock()  # the page serves requests in threads

    def observe(self, snapshot: dict[str, Any]) -> dict[str, float]:
        """Record every task's step now; return the rates known (task -> steps/s)."""
        now = self.clock()
        rates: dict[str, float] = {}
        with self._lock:
            for t in snapshot.get("tasks", []):
                key, step = t["task"], t.get("step")
                attempt, samples = self._seen.get(key, (-1, deque()))
                if attempt != t.get("attempt", 0) or step is None:
                    samples = deque()
                    attempt = t.get("attempt", 0)
                if step is not None and (not samples or samples[-1][1] != step):
                    samples.append((now, step))
                while len(samples) > 2 and now - samples[1][0] > RATE_WINDOW:
                    samples.popleft()
                self._seen[key] = (attempt, samples)
                if samples and now - samples[-1][0] > RATE_WINDOW:
                    rates[key] = 0.0  # no new step for a whole window
                elif len(samples) >= 2 and samples[-1][0] > samples[0][0]:
                    (t0, s0), (t1, s1) = samples[0], samples[-1]
                    rates[key] = (s1 - s0) / (t1 - t0)
        return rates


class SnapshotCollector(Collector):
    """The job's gauges, read from the published snapshot at each scrape."""

    def __init__(
        self,
        snapshot: Snapshot,
        rates: StepRates,
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.snapshot = snapshot
        self.rates = rates
        self.wall_clock = wall_clock

    def collect(self) -> Iterator[Metric]:
        snap = self.snapshot()
        if not snap:
            return  # nothing published yet
        tasks = snap.get("tasks", [])
        rates = self.rates.observe(snap)

        phase = GaugeMetricFamily(
            "tfyarn_job_phase", "1 for the job's current phase", labels=["phase"]
        )
        for p in Phase:
            phase.add_metric([p.value], 1.0 if snap.get("phase") == p.value else 0.0)
        yield phase
        yield _gauge(
            "tfyarn_cluster_generation",
            "TensorFlow cluster generation (1 at formation, +1 per cluster restart)",
            snap.get("generation", 0),
        )
        yield from self._restarts(snap)
        yield from self._disruptions(snap)
        yield CounterMetricFamily(
            "tfyarn_resizes",
            "Worker-count changes (tfyarn scale, --min_worker), each a graceful "
            "stop and a new generation; not charged to max_restarts",
            value=snap.get("resizes", 0),
        )
        yield _gauge(
            "tfyarn_workers",
            "Worker tasks of the current generation",
            sum(t.get("role") == "worker" for t in tasks),
        )
        formed, started = snap.get("cluster_formed_at"), snap.get("started")
        if formed is not None and started is not None:
            yield _gauge(
                "tfyarn_cluster_formation_seconds",
                "Seconds from the master's start to the (latest) cluster's formation",
                formed - started,
            )
        if started is not None:
            yield _gauge(
                "tfyarn_job_age_seconds",
                "Seconds since the master started the job",
                self.wall_clock() - started,
            )

        by_state = GaugeMetricFamily(
            "tfyarn_tasks", "Tasks by role and state", labels=["role", "state"]
        )
        counts: dict[tuple[str, str], int] = {}
        for t in tasks:
            counts[t["role"], t["state"]] = counts.get((t["role"], t["state"]), 0) + 1
        # Every state of every role, zeros included, so a dashboard's series
        # drop to 0 instead of vanishing.
        for role in sorted({t["role"] for t in tasks}):
            for s in TaskState:
                by_state.add_metric([role, s.value], counts.get((role, s.value), 0))
        yield by_state
        yield from self._per_task(tasks, rates)

    def _restarts(self, snap: dict[str, Any]) -> Iterator[Metric]:
        yield _gauge(
            "tfyarn_restarts",
            "Task replacements and cluster restarts so far",
            snap.get("restarts", 0),
        )
        yield _gauge(
            "tfyarn_restart_budget_used",
            "Restarts charged against max_restarts",
            snap.get("budget_used", 0),
        )
        if snap.get("max_restarts") is not None:
            yield _gauge(
                "tfyarn_max_restarts", "The job's max_restarts", snap["max_restarts"]
            )
        by_reason = GaugeMetricFamily(
            "tfyarn_restarts_by_reason",
            "Restarts by the kind of failure behind them",
            labels=["reason"],
        )
        kinds: dict[str, int] = {k: 0 for k, _ in _REASON_WORDS} | {"other": 0}
        for reason in snap.get("restart_reasons", []):
            kinds[reason_kind(reason)] += 1
        for kind, n in kinds.items():
            by_reason.add_metric([kind], n)
        yield by_reason

    def _disruptions(self, snap: dict[str, Any]) -> Iterator[Metric]:
        """Containers YARN took back (preemption first), outside max_restarts."""
        by_kind = CounterMetricFamily(
            "tfyarn_disruptions",
            "Containers YARN took back through no fault of the job, by kind "
            "(preempted, released, disks failed, ...); not charged to max_restarts",
            labels=["kind"],
        )
        kinds = {word: 0 for word in DISRUPTIONS.values()}
        kinds.update(snap.get("disruption_kinds") or {})
        for kind, n in sorted(kinds.items()):
            by_kind.add_metric([kind], n)
        yield by_kind
        yield CounterMetricFamily(
            "tfyarn_preemptions",
            "Task containers the scheduler preempted (also in tfyarn_disruptions)",
            value=kinds.get("preempted", 0),
        )
        if snap.get("max_disruptions") is not None:
            yield _gauge(
                "tfyarn_max_disruptions",
                "The job's max_disruptions",
                snap["max_disruptions"],
            )

    def _per_task(
        self, tasks: list[dict[str, Any]], rates: dict[str, float]
    ) -> Iterator[Metric]:
        labels = ["task", "role"]
        step = GaugeMetricFamily(
            "tfyarn_task_step", "Last step the task reported", labels=labels
        )
        rate = GaugeMetricFamily(
            "tfyarn_task_steps_per_second",
            f"Steps per second over the last {RATE_WINDOW:.0f} s",
            labels=labels,
        )
        age = GaugeMetricFamily(
            "tfyarn_task_heartbeat_age_seconds",
            "Seconds since the task's last heartbeat",
            labels=labels,
        )
        attempt = GaugeMetricFamily(
            "tfyarn_task_attempt", "The task's attempt (0: first)", labels=labels
        )
        metric = GaugeMetricFamily(
            "tfyarn_task_metric",
            "Metrics the script passed to tfyarn.report_progress",
            labels=[*labels, "metric"],
        )
        gpu_labels = [*labels, "gpu", "uuid"]
        gpu_busy = GaugeMetricFamily(
            "tfyarn_task_gpu_utilization_percent",
            "GPU utilisation of each of the task's GPUs, as nvidia-smi reports it",
            labels=gpu_labels,
        )
        gpu_used = GaugeMetricFamily(
            "tfyarn_task_gpu_memory_used_bytes",
            "GPU memory in use on each of the task's GPUs (nvidia-smi)",
            labels=gpu_labels,
        )
        gpu_total = GaugeMetricFamily(
            "tfyarn_task_gpu_memory_total_bytes",
            "GPU memory of each of the task's GPUs (nvidia-smi)",
            labels=gpu_labels,
        )
        for t in tasks:
            key = [t["task"], t["role"]]
            for g in t.get("gpus") or []:
                if g.get("utilization") is None:
                    continue  # no nvidia-smi where the task runs: nothing
                gpu = [*key, str(g.get("index")), str(g.get("uuid") or "")]
                gpu_busy.add_metric(gpu, float(g["utilization"]))
                gpu_used.add_metric(gpu, float(g.get("memory_used_mib", 0)) * MIB)
                gpu_total.add_metric(gpu, float(g.get("memory_total_mib", 0)) * MIB)
            attempt.add_metric(key, t.get("attempt", 0))
            if t.get("step") is not None:
                step.add_metric(key, t["step"])
            if t["task"] in rates:
                rate.add_metric(key, rates[t["task"]])
            if t.get("last_heartbeat_age") is not None:
                age.add_metric(key, t["last_heartbeat_age"])
            for name, value in sorted((t.get("metrics") or {}).items()):
                metric.add_metric([*key, name], float(value))
        yield from (step, rate, age, attempt, metric, gpu_busy, gpu_used, gpu_total)


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=float(value))


class JobMetrics:
    """The master's registry: snapshot gauges plus the registry-call counter."""

    def __init__(self, snapshot: Snapshot, rates: StepRates | None = None) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.rates = rates or StepRates()
        self.registry.register(SnapshotCollector(snapshot, self.rates))
        self._calls = Counter(
            "tfyarn_registry_calls",
            "gRPC calls the master answered, by method and status code",
            ["method", "code"],
            registry=self.registry,
        )

    def count_call(self, method: str, code: str) -> None:
        """The servicer's hook: one call of ``method`` ended with ``code``."""
        self._calls.labels(method, code).inc()

    def exposition(self) -> bytes:
        """The Prometheus text exposition format of every metric now."""
        return generate_latest(self.registry)
