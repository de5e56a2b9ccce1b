"""Graceful stops: a stop notice to every task before the master ends a generation.

When the master ends a running generation on purpose (a resize, a restart it
decided with the cluster intact, ``tfyarn kill --graceful``), it first sends
every running task a ``StopNotice`` (reason, grace, deadline) and waits: the
scripts that heed notices (``tfyarn.should_stop()``, reported in heartbeats)
save and exit, typically with :data:`~tfyarn.contract.notice.RESTART_CODE`.
Once every one of them has ended, or at the deadline (``stop_grace`` after
the notice), the drain ends and the master carries out what it decided: the
Stops (SIGTERM, then SIGKILL after ``stop_grace``) go to whatever still runs
and the next generation forms, or the job stops. Scripts that never ask are
not waited for: if none asks, the Stops follow the notice at once, as before.

A script that ends after the notice with 0 or the restart code is neither a
failure nor a success: its runtime keeps the container and waits for the
Stop, which restarts it in place. Other ends during a drain are noted and not
charged (am/policy.py: the generation ends anyway).

A generation that lost a member (a failure restart) gets no notice: it
cannot save at one step (the all-reduce or the parameter servers are gone),
so its survivors are stopped at once, as before, and resume from their
latest checkpoint.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from am.decisions import Decision, Note
from am.model import Task, Watcher
from am.view import key_of
from tfyarn._proto import master_pb2 as pb
from tfyarn.contract.notice import RESTART_CODE
from tfyarn.contract.status import TaskState
from tfyarn.spec import JobSpec, Role


class Job(Protocol):
    """What a drain reads of the job, and how it notes (through the applier)."""

    @property
    def spec(self) -> JobSpec: ...
    @property
    def tasks(self) -> Mapping[tuple[Role, int], Task]: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def wall(self) -> Callable[[], float]: ...

    def apply(self, decisions: Iterable[Decision]) -> None: ...
    def poke(self) -> None: ...


log = logging.getLogger(__name__)

# Script ends after a notice that mean "saved, start me again".
SAVED_EXITS = frozenset({0, RESTART_CODE})


def notice_event(reason: str, grace: float, deadline: float) -> bytes:
    """A serialized ``ClusterEvent`` carrying a StopNotice (``deadline``: epoch s)."""
    notice = pb.StopNotice(reason=reason, grace_seconds=grace, deadline=deadline)
    return pb.ClusterEvent(stop_notice=notice).SerializeToString()


@dataclass
class Drain:
    """One graceful end of a generation: who was told, who has ended, what follows."""

    reason: str
    grace: float
    deadline: float  # on the master's clock
    event: bytes
    then: Callable[[], None]
    # Noticed tasks and the attempt that was told (a later attempt is not waited for).
    noticed: dict[Task, int] = field(default_factory=dict)
    # Noticed tasks whose script ended after the notice, with its exit code.
    ended: dict[Task, int] = field(default_factory=dict)
    stops_job: bool = False


class Notices:
    """The job's graceful stops (see the module); at most one drain at a time."""

    def __init__(self, state: Job) -> None:
        self.state = state
        self.drain: Drain | None = None

    @property
    def active(self) -> bool:
        """A drain is under way: the generation ends once it does."""
        return self.drain is not None

    def begin(
        self,
        reason: str,
        then: Callable[[], None],
        *,
        grace: float | None = None,
        stops_job: bool = False,
    ) -> float:
        """Notice every running task, then ``then()`` once they saved (bounded).

        During a drain another purpose does not start a second one: a stop of
        the job takes the drain over (its ``then`` wins), anything else is
        already covered by the drain's own end of the generation. Returns the
        grace given.
        """
        state = self.state
        grace = state.spec.stop_grace if grace is None else grace
        if self.drain is not None:
            if stops_job and not self.drain.stops_job:
                self.drain.then, self.drain.stops_job = then, True
                self.drain.reason = reason
            return self.drain.grace
        now = state.clock()
        event = notice_event(reason, grace, state.wall() + grace)
        drain = Drain(reason, grace, now + grace, event, then, stops_job=stops_job)
        for task in state.tasks.values():
            if task.state is TaskState.RUNNING and task.stop_requested_at is None:
                drain.noticed[task] = task.attempt
                for watcher in task.watchers:
                    watcher.put(event)
        waiting = [t for t in drain.noticed if t.heeds_notice]
        log.info(
            "stop notice to %d task(s), %d of them saving (at most %.0f s): %s",
            len(drain.noticed),
            len(waiting),
            grace,
            reason,
        )
        self.drain = drain
        for task in waiting:
            why = f"stop notice: {reason} (save within {grace:.0f} s)"
            state.apply([Note(key_of(task), why)])
        self.check(now)
        return grace

    def on_watch(self, task: Task, watcher: Watcher) -> None:
        """A noticed task's new stream gets the notice again."""
        drain = self.drain
        if drain is not None and drain.noticed.get(task) == task.attempt:
            watcher.put(drain.event)

    def on_end(self, task: Task, code: int) -> bool:
        """A script ended (``ReportTaskEnd``); True if it ended for the notice.

        Such a task keeps its state (its runtime waits in its container for
        the Stop that restarts it) and is charged nothing.
        """
        drain = self.drain
        if (
            drain is None
            or drain.noticed.get(task) != task.attempt
            or code not in SAVED_EXITS
            or task.stop_requested_at is not None
        ):
            return False
        drain.ended[task] = code  # the state records its exit code
        why = (
            f"script ended (exit {code}) after the stop notice: it waits for the "
            "next generation"
        )
        self.state.apply([Note(key_of(task), why)])
        self.state.poke()
        return True

    def check(self, now: float) -> None:
        """End the drain once every heeding script ended, or at its deadline."""
        drain = self.drain
        if drain is None:
            return
        if now < drain.deadline and any(
            self._saving(task, attempt) for task, attempt in drain.noticed.items()
        ):
            return
        late = [t.key for t, a in drain.noticed.items() if self._saving(t, a)]
        if late:
            log.warning(
                "stop notice: %s still saving at the deadline: stopping them",
                ", ".join(late),
            )
        self.drain = None
        drain.then()
        self.state.poke()

    def _saving(self, task: Task, attempt: int) -> bool:
        """Whether the drain still waits for this task's script."""
        drain = self.drain
        assert drain is not None
        return (
            task.heeds_notice
            and task.attempt == attempt
            and task not in drain.ended
            and not task.state.is_terminal()
            and task.stop_requested_at is None
        )

    def describe(self) -> str:
        """The drain in words for the status ("" when none)."""
        drain = self.drain
        if drain is None:
            return ""
        left = max(0.0, drain.deadline - self.state.clock())
        return (
            f"stop notice: {drain.reason}; {len(drain.ended)} of "
            f"{len(drain.noticed)} task(s) saved and ended, {left:.0f} s left"
        )
