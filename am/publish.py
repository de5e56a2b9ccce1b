"""The job's status as readers see it: the ``tfyarn.status`` snapshot and YARN's progress.

The snapshot is a :class:`tfyarn.contract.status.JobStatus`, the type the client
reads back. :class:`Publisher` writes it to skein's key-value store from the
reconcile loop, throttled so that thousands of tasks registering do not build
a snapshot each.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any, Protocol

from am.launcher import Launcher
from am.model import BIG_JOB_TASKS, HISTORY_LIMIT, Task
from tfyarn.contract.status import (
    STATUS_KEY,
    SUMMARY_KEY,
    JobStatus,
    JobSummary,
    Phase,
    TaskStatus,
)
from tfyarn.spec import JobSpec

log = logging.getLogger(__name__)

# skein's key-value store takes values up to its 4 MB gRPC message limit. The
# status of 5000 tasks is ~2.2 MB; beyond this it drops per-task history.
MAX_STATUS_BYTES = 3 * 1024 * 1024


class _Gpus(Protocol):
    def status_of(self, task: Task) -> dict[str, Any]: ...


class _Resizes(Protocol):
    @property
    def standby(self) -> Collection[Task]: ...
    @property
    def resizes(self) -> int: ...
    @property
    def reasons(self) -> Sequence[str]: ...


class _Notices(Protocol):
    def describe(self) -> str: ...


class Published(Protocol):
    """What the status shows of the job (read only; JobState has it all)."""

    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def launcher(self) -> Launcher: ...
    @property
    def spec(self) -> JobSpec: ...
    @property
    def phase(self) -> Phase: ...
    @property
    def tasks(self) -> Mapping[Any, Task]: ...
    @property
    def lead(self) -> Task: ...
    @property
    def formed(self) -> bool: ...
    @property
    def members(self) -> int: ...
    @property
    def unregistered(self) -> Collection[Task]: ...
    @property
    def generation(self) -> int: ...
    @property
    def restarts(self) -> int: ...
    @property
    def restart_reasons(self) -> Sequence[str]: ...
    @property
    def budget_used(self) -> int: ...
    @property
    def cluster_restarts(self) -> int: ...
    @property
    def started(self) -> float: ...
    @property
    def cluster_formed_at(self) -> float | None: ...
    @property
    def diagnostics(self) -> str: ...
    @property
    def master_address(self) -> str: ...
    @property
    def warnings(self) -> Sequence[str]: ...
    @property
    def hdfs_tokens(self) -> Mapping[str, Any] | None: ...
    @property
    def disrupted(self) -> Mapping[Task, str]: ...
    @property
    def disruption_reasons(self) -> Sequence[str]: ...
    @property
    def disruption_kinds(self) -> Mapping[str, int]: ...
    @property
    def gpus(self) -> _Gpus: ...
    @property
    def resizer(self) -> _Resizes: ...
    @property
    def notices(self) -> _Notices: ...


def snapshot(state: Published, *, keep: int | None = None) -> dict[str, Any]:
    """The ``tfyarn.status`` document read by ``tfyarn status`` and the live view.

    ``keep``: history and failure lines per task (default: all for small
    jobs, the latest 2 above 200 tasks).
    """
    now = state.clock()
    if keep is None:
        keep = HISTORY_LIMIT if len(state.tasks) <= BIG_JOB_TASKS else 2
    tasks = []
    for t in state.tasks.values():
        age = None
        if t.last_heartbeat is not None and not t.state.is_terminal():
            age = round(now - t.last_heartbeat, 1)
        tasks.append(
            TaskStatus(
                task=t.key,
                role=t.role.value,
                index=t.index,
                attempt=t.attempt,
                state=t.state,
                address=t.address,
                container_id=t.container_id,
                yarn_container_id=t.yarn_container_id,
                node=t.node,
                exit_code=t.exit_code,
                step=t.step,
                metrics=dict(t.metrics),
                last_heartbeat_age=age,
                failures=t.failures[-keep:] if keep else [],
                history=t.history[-keep:] if keep else [],
                disruption=state.disrupted.get(t, ""),
                **state.gpus.status_of(t),
                standby=t in state.resizer.standby,
            )
        )
    return JobStatus(
        phase=state.phase,
        generation=state.generation,
        restarts=state.restarts,
        restart_reasons=list(state.restart_reasons),
        max_restarts=state.spec.max_restarts,
        budget_used=state.budget_used,
        cluster_restarts=state.cluster_restarts,
        started=state.started,
        cluster_formed_at=state.cluster_formed_at,
        diagnostics=state.diagnostics,
        master_address=state.master_address,
        lead=state.lead.key,
        tasks=tasks,
        warnings=list(state.warnings),
        hdfs_tokens=dict(state.hdfs_tokens) if state.hdfs_tokens else None,
        disruptions=len(state.disruption_reasons),
        max_disruptions=state.spec.max_disruptions,
        disruption_reasons=list(state.disruption_reasons),
        disruption_kinds=dict(state.disruption_kinds),
        resizes=state.resizer.resizes,
        resize_reasons=list(state.resizer.reasons),
        stop_notice=state.notices.describe(),
    ).to_dict()


def status_document(state: Published) -> tuple[dict[str, Any], str]:
    """The snapshot and its JSON as published: without per-task history if
    the whole would not fit in skein's key-value store."""
    doc = snapshot(state)
    text = json.dumps(doc)
    if len(text) > MAX_STATUS_BYTES:
        doc = snapshot(state, keep=0)
        text = json.dumps(doc)
    return doc, text


def yarn_progress(state: Published) -> float:
    """0-0.1 while registering, then the lead's step/total_steps if it reports them."""
    if state.phase.is_terminal():
        return 1.0
    if state.phase is Phase.FINISHING:
        return 0.95
    if not state.formed:
        members = state.members
        return 0.1 * (members - len(state.unregistered)) / max(1, members)
    lead = state.lead
    total = lead.metrics.get("total_steps")
    if total and lead.step is not None:
        return 0.1 + 0.85 * min(1.0, lead.step / total)
    return 0.1


class Publisher:
    """Publishes a job's snapshot and progress when due; a failing store is survived.

    ``dirty`` is set by the state whenever something a status reader would
    see changed.
    """

    def __init__(self, state: Published, *, interval: float) -> None:
        self.state = state
        self.interval = interval
        self.dirty = True
        # The latest snapshot as JSON; other threads (the status page) read only this.
        self.last_status = ""
        self._published_at = float("-inf")
        self._snapshot_cost = 0.0
        self._error = ""  # the last publish failure, logged once
        self._progress = -1.0

    async def publish(self, *, force: bool = False) -> None:
        # Built only when due: with thousands of tasks a snapshot per event
        # would make registration quadratic.
        state = self.state
        now = state.clock()
        since = now - self._published_at
        # A big job's snapshot takes tens of ms (5000 tasks: ~60 ms, 2.2 MB of
        # JSON): keep it under ~2% of the time, i.e. a refresh every ~3 s.
        gap = max(self.interval / 4, 50 * self._snapshot_cost)
        if (
            force
            or (self.dirty and since >= gap)
            or since >= 5 * self.interval  # refresh heartbeat ages
        ):
            self.dirty = False
            # This thread's CPU time, not the wall clock's: a master descheduled
            # on a busy node must not take a long build for a costly one and
            # publish less often (a unit test saw a 1 s gap so stretched).
            started = time.thread_time()
            doc, status = status_document(state)
            self.last_status = status
            self._snapshot_cost = time.thread_time() - started
            self._published_at = now
            try:
                await state.launcher.publish(STATUS_KEY, status)
                # After the status: a client that sees a new digest finds the
                # status it stands for (big jobs poll only this small key).
                await state.launcher.publish(SUMMARY_KEY, JobSummary.of(doc).to_json())
            except Exception as exc:  # noqa: BLE001 -- the job goes on without it
                if str(exc) != self._error:
                    log.warning("could not publish the status: %s", exc)
                self._error = str(exc)
            else:
                self._error = ""
        progress = yarn_progress(state)
        if abs(progress - self._progress) >= 0.01:
            await state.launcher.set_progress(progress)
            self._progress = progress
