"""``--min_worker``: go on with fewer workers while YARN cannot give them; growing with standbys.

A worker that waits for a container longer than :func:`shrink_bound`
(``allocation_timeout``, or 60 s when that is 0: the time gang allocation
would also give up on a forming cluster) makes the job shrink: a resize
(am/resize.py: a stop notice, then a new generation) to the workers that have
containers, never below ``min_worker``. The highest indexes leave; a waiting
worker with a lower index keeps its place and asks again, and the containers
the leaving ones free are exactly what it needs (same role, same resources).

Once the smaller generation runs, the master asks YARN for the missing
workers' containers *standing by*: they start, register and wait outside the
cluster, costing the job nothing. When the lowest of them have running
containers (all of them, or :data:`GROW_SETTLE` seconds after the first), a
resize makes them members, their runtimes starting while the others save:
back to the target (``num_worker``, or what ``tfyarn scale`` set
since). ``tfyarn scale`` to more workers grows any job the same way
(am/resize.py asks for the standbys). A standby that fails is dropped and
asked for again. Resizes are counted, never charged to ``max_restarts``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from am.decisions import Decision, Note
from am.model import Task
from am.view import JobBasics, key_of
from tfyarn.contract.status import Phase, TaskState
from tfyarn.spec import Role

if TYPE_CHECKING:
    from am.notice import Notices
    from am.resize import Resizer


class Job(JobBasics, Protocol):
    """What ``--min_worker`` reads of the job; it changes it only through the
    resizer (am/resize.py) and the applier."""

    @property
    def tasks(self) -> Mapping[tuple[Role, int], Task]: ...
    @property
    def cluster_members(self) -> Sequence[Task]: ...
    @property
    def resizer(self) -> Resizer: ...
    @property
    def notices(self) -> Notices: ...

    def apply(self, decisions: Iterable[Decision]) -> None: ...


log = logging.getLogger(__name__)

# With allocation_timeout 0 (gang allocation off), the wait before shrinking.
DEFAULT_SHRINK_AFTER = 60.0
# Once one standby worker is in, how long to wait for the others before
# growing with those that are (each resize costs a generation).
GROW_SETTLE = 10.0
# A standby in these states can join: YARN gave its container.
STARTED = (TaskState.ALLOCATED, TaskState.REGISTERED)


def shrink_bound(allocation_timeout: float) -> float:
    """How long a worker may wait for its container before the job shrinks."""
    return allocation_timeout if allocation_timeout > 0 else DEFAULT_SHRINK_AFTER


class Elastic:
    """One job's ``--min_worker`` policy; :meth:`check` runs every reconcile pass."""

    def __init__(self, state: Job) -> None:
        self.state = state
        self._ready_since: float | None = None
        self._stuck = False  # "cannot shrink below min_worker" logged

    def check(self, now: float) -> None:
        """Shrink when workers wait too long for containers (``--min_worker``);
        grow when standbys are in."""
        state = self.state
        if state.settled:
            for task in list(state.resizer.standby):
                state.resizer.drop_standby(task, "the job is ending")
            return
        if state.notices.active or (state.spec.min_worker and self._shrink(now)):
            return
        self._grow(now)

    def hold(self, task: Task) -> bool:
        """A standby worker registered: it waits outside the cluster (True)."""
        if task not in self.state.resizer.standby:
            return False
        why = "standing by: it joins the job at the next resize"
        self.state.apply([Note(key_of(task), why)])
        return True

    def on_failure(self, task: Task, reason: str) -> bool:
        """A standby worker failed: dropped (asked for again later), not charged."""
        if task not in self.state.resizer.standby:
            return False
        self.state.resizer.drop_standby(task, f"standing by, it failed: {reason}")
        return True

    def _shrink(self, now: float) -> bool:
        state = self.state
        spec = state.spec
        bound = shrink_bound(spec.allocation_timeout)
        workers = [t for t in state.cluster_members if t.role is Role.WORKER]
        late = [
            t
            for t in workers
            if t.state is TaskState.REQUESTED and now - t.requested_at > bound
        ]
        if not late:
            self._stuck = False
            return False
        count = max(spec.min_worker, len(workers) - len(late))
        if count >= len(workers):
            if not self._stuck:
                self._stuck = True
                log.warning(
                    "%s got no container within %.0f s; the job has min_worker=%d "
                    "workers and waits",
                    ", ".join(t.key for t in late),
                    bound,
                    spec.min_worker,
                )
            return False
        reason = (
            f"{', '.join(t.key for t in late)} got no container within {bound:.0f} s: "
            f"going on with {count} of {state.resizer.target} worker(s) "
            f"(min_worker={spec.min_worker})"
        )
        state.resizer.begin(count, reason)
        return True

    def _grow(self, now: float) -> None:
        state = self.state
        resizer = state.resizer
        current = state.spec.count(Role.WORKER)
        for task in list(resizer.standby):
            if task.index >= resizer.target:  # `tfyarn scale` asked for fewer
                resizer.drop_standby(task, f"the job now keeps {resizer.target}")
        if current >= resizer.target:
            resizer.grow_reason = ""  # grown as `tfyarn scale` asked
        if current >= resizer.target or state.phase is not Phase.RUNNING:
            self._ready_since = None
            return
        for index in range(current, resizer.target):
            if (Role.WORKER, index) not in state.tasks:
                resizer.add_standby(
                    index,
                    f"standing by to grow back to {resizer.target} worker(s)",
                )
        # Standing by with a container, from the lowest index up. A container
        # that runs is enough: its runtime starts while the others save.
        ready = 0
        for index in range(current, resizer.target):
            found = state.tasks.get((Role.WORKER, index))
            if found is None or found.state not in STARTED:
                break
            ready += 1
        if not ready:
            self._ready_since = None
            return
        if self._ready_since is None:
            self._ready_since = now
        missing = resizer.target - current - ready
        if missing and now - self._ready_since < GROW_SETTLE:
            return
        self._ready_since = None
        if resizer.grow_reason and not missing:
            reason = resizer.grow_reason
        elif resizer.grow_reason:
            reason = (
                f"{ready} more worker(s) standing by: growing to {current + ready} "
                f"of {resizer.target} worker(s) ({resizer.grow_reason})"
            )
        else:
            reason = (
                f"YARN granted worker containers again: back to {current + ready} "
                f"of {resizer.target} worker(s)"
            )
        resizer.begin(current + ready, reason)
