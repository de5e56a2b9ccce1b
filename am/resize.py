"""Resizing a job: a graceful stop, then the next generation with another worker count.

``tfyarn scale APP --num_worker N`` (the ``Resize`` RPC) and ``--min_worker``
(am/elastic.py) change how many workers the job has. To grow, the master
first asks YARN for the new workers' containers *standing by* (they start,
register and wait outside the cluster while the job trains on), so the stop
costs no container start. A resize is always the same two steps: a stop notice to every running task (am/notice.py), so the
scripts that heed it save at their current step; then the next generation,
whose ClusterSpec, TF_CONFIG, legacy flags and data shards follow the new
size. The workers that stay restart in place; removed ones (the highest
indexes) get a final Stop and their containers are killed if they outlive
it; added ones get new containers. The ps, chief and evaluator counts never
change. Each resize is counted (``resizes``), never charged to max_restarts.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from am.decisions import AddStandby, Decision, DropStandby, Resize
from am.launcher import ContainerInfo, Launcher
from am.model import Task, TaskRejected
from am.view import JobBasics, key_of
from tfyarn.contract.status import Phase
from tfyarn.spec import JobSpec, Role

if TYPE_CHECKING:
    from am.notice import Notices


class Job(JobBasics, Protocol):
    """What a resize reads of the job; the new generation is the state's to
    make (:class:`~am.decisions.Resize`, applied by ``JobState.apply``)."""

    @property
    def notices(self) -> Notices: ...
    @property
    def tasks(self) -> Mapping[tuple[Role, int], Task]: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def containers(self) -> Mapping[str, ContainerInfo]: ...
    @property
    def launcher(self) -> Launcher: ...

    def apply(self, decisions: Iterable[Decision]) -> None: ...
    def poke(self) -> None: ...


log = logging.getLogger(__name__)

# A removed worker's container that YARN refuses to kill is tried this often.
KILL_TRIES = 5


def resized(spec: JobSpec, num_worker: int) -> JobSpec:
    """``spec`` with ``num_worker`` workers (their resources unchanged)."""
    group = dataclasses.replace(spec.group(Role.WORKER), count=num_worker)
    return dataclasses.replace(spec, tasks={**spec.tasks, Role.WORKER: group})


def refusal(state: Job, num_worker: int) -> TaskRejected | None:
    """Why the job cannot be resized to ``num_worker`` now (None: it can)."""
    spec = state.spec
    if not spec.count(Role.WORKER):
        return TaskRejected(
            "FAILED_PRECONDITION",
            "this job has no workers to scale (it was submitted with num_worker=0)",
        )
    if num_worker < 1:
        return TaskRejected(
            "INVALID_ARGUMENT",
            f"num_worker must be at least 1, got {num_worker}",
        )
    if num_worker < spec.min_worker:
        return TaskRejected(
            "INVALID_ARGUMENT",
            f"num_worker={num_worker} is below the job's min_worker={spec.min_worker}",
        )
    if state.phase.is_terminal() or state.settled:
        return TaskRejected(
            "FAILED_PRECONDITION",
            f"the job is {state.phase.value}: only a running job can be resized",
        )
    if state.notices.active:
        return TaskRejected(
            "FAILED_PRECONDITION",
            "the job is already ending its generation (a resize or graceful stop "
            "is under way); try again once it runs",
        )
    return None


class Resizer:
    """One job's resizes: the requests, the new generation, the removed workers."""

    def __init__(self, state: Job) -> None:
        self.state = state
        self.reasons: list[str] = []  # one per resize, oldest first
        # The worker count to keep or grow back to: the submitted one, then
        # what `tfyarn scale` asked (--min_worker shrinks below it for a while).
        self.target = state.spec.count(Role.WORKER)
        # Why the job grows once its standby workers are in, when `tfyarn
        # scale` asked for more ("" for --min_worker growing back).
        self.grow_reason = ""
        # Workers asked for ahead of a resize (am/elastic.py): in state.tasks,
        # not in the cluster, until a resize makes them members.
        self.standby: set[Task] = set()
        # Removed workers until their containers ended: key -> (task, kill by).
        self.leaving: dict[tuple[Role, int], tuple[Task, float]] = {}
        self._kill_tries: dict[str, int] = {}

    @property
    def resizes(self) -> int:
        return len(self.reasons)

    def request(self, num_worker: int, why: str) -> tuple[int, str]:
        """Resize to ``num_worker`` workers; return the count before and what happens.

        Raises
        ------
        TaskRejected
            The job cannot take that count now (the message says why).
        """
        state = self.state
        refused = refusal(state, num_worker)
        if refused is not None:
            raise refused
        before = state.spec.count(Role.WORKER)
        self.target = num_worker
        self.grow_reason = ""
        for task in [t for t in self.standby if t.index >= num_worker]:
            self.drop_standby(task, f"the job now keeps {num_worker} worker(s)")
        if num_worker == before:
            return before, f"the job already has {before} worker(s): nothing to do"
        if num_worker > before and state.phase is Phase.RUNNING:
            # The new workers' containers first, standing by (am/elastic.py):
            # the job trains on meanwhile and stops only once they can join.
            # (A job still forming has nothing to lose: it grows at once.)
            self.grow_reason = f"resized from {before} to {num_worker} worker(s): {why}"
            for index in range(before, num_worker):
                if (Role.WORKER, index) not in state.tasks:
                    self.add_standby(
                        index, f"standing by to grow to {num_worker} worker(s)"
                    )
            # Ask YARN now, not at the next scan: skein's AM sends a request
            # only with its next allocate call, up to 5 s away on a job with
            # nothing pending (its idle heartbeat).
            state.poke()
            return before, (
                f"asking YARN for {num_worker - before} more worker container(s); "
                "the job trains on until they stand by, then a stop notice and "
                f"the next generation with {num_worker} worker(s)"
            )
        grace = self.begin(
            num_worker, f"resized from {before} to {num_worker} worker(s): {why}"
        )
        return before, (
            f"stop notice sent (up to {grace:.0f} s to save), then the next "
            f"generation with {num_worker} worker(s)"
        )

    def begin(self, num_worker: int, reason: str) -> float:
        """A stop notice now, the generation of ``num_worker`` workers after it;
        the notice's grace."""
        then = functools.partial(self.state.apply, [Resize(num_worker, reason)])
        return self.state.notices.begin(reason, then)

    def add_standby(self, index: int, why: str) -> None:
        """Ask YARN for worker ``index``'s container ahead of a resize: it
        registers and waits, outside the cluster (am/elastic.py)."""
        self.state.apply([AddStandby(index, why)])

    def drop_standby(self, task: Task, why: str) -> None:
        """A standing-by worker is not wanted (or failed): it leaves the job."""
        self.state.apply([DropStandby(key_of(task), why)])

    # -- the resizer's own records, kept by the state as it applies a resize -----

    def resized(self, reason: str) -> None:
        """A resize is applied: counted, and said."""
        self.reasons.append(reason)
        log.warning("%s", reason)

    def leave(self, task: Task, kill_by: float) -> None:
        """A removed worker: its container is killed if it outlives ``kill_by``."""
        self.leaving[(task.role, task.index)] = (task, kill_by)

    def earlier_attempt(self, index: int) -> int | None:
        """The attempt of a removed worker ``index`` still leaving, if any."""
        earlier = self.leaving.get((Role.WORKER, index))
        return earlier[0].attempt if earlier else None

    def leaving_task(self, role: str, index: int) -> Task | None:
        """A removed worker whose container has not ended yet."""
        try:
            found = self.leaving.get((Role(role), index))
        except ValueError:
            return None
        return found[0] if found else None

    async def check(self, now: float) -> None:
        """Each reconcile pass: kill removed workers' containers that outlive their Stop."""
        state = self.state
        for key, (task, kill_by) in list(self.leaving.items()):
            cid = task.retiring or task.container_id
            info = state.containers.get(cid or "")
            if cid is None or (info is not None and info.ended):
                del self.leaving[key]
                continue
            pending = info is None or info.state in ("WAITING", "REQUESTED")
            if now < kill_by and not pending:
                continue
            tries = self._kill_tries.get(cid, 0)
            if tries >= KILL_TRIES:
                del self.leaving[key]  # it ends with the application at the latest
                continue
            self._kill_tries[cid] = tries + 1
            try:
                await state.launcher.kill(cid)
            except Exception:  # tried again on the next pass
                log.warning(
                    "could not kill removed %s's container %s", key, cid, exc_info=True
                )
