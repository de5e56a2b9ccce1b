"""A task's attempts: how the master ends one and begins the next.

Two ways, both into the next attempt (RELAUNCHING, see am/transitions.py):
retired, to a new container (the old one gets a Stop with grace, then is
killed; the new one is asked for once the old one ended), or restarted in
place, in the container it holds. The job decides which
(am/policy.py) and calls :class:`Attempts`; the reconcile loop carries out the
kills and launches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol

from am.launcher import ContainerInfo
from am.model import (
    IN_PLACE_REGISTER,
    KILL_MARGIN,
    Task,
    TaskRejected,
    stop_event,
)
from tfyarn.contract.status import TaskState
from tfyarn.spec import JobSpec

if TYPE_CHECKING:
    from am.resize import Resizer


class Job(Protocol):
    """What ending and beginning attempts needs of the job (JobState has it)."""

    @property
    def spec(self) -> JobSpec: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def containers(self) -> Mapping[str, ContainerInfo]: ...
    @property
    def relaunch(self) -> set[Task]: ...
    @property
    def resizer(self) -> Resizer: ...

    def task(self, role: str, index: int, attempt: int | None = None) -> Task: ...
    def next_attempt(self, task: Task, why: str) -> None: ...
    def note(self, task: Task, text: str, *, quiet: bool = False) -> None: ...
    def poke(self) -> None: ...


class Attempts:
    """Ends one job's task attempts and queues the next ones (see the module)."""

    def __init__(self, state: Job) -> None:
        self.state = state

    def retire(self, task: Task, reason: str) -> None:
        """End the task's current attempt (if still alive) and queue the next one.

        The old container gets a Stop with grace and is killed after it; the
        new attempt is launched only once the old container has ended, so two
        TensorFlow servers never share the task's port (both bind it with
        SO_REUSEPORT). ``task.port`` is kept: the new attempt asks for it.
        """
        state = self.state
        task.tell_stop(stop_event(reason, state.spec.stop_grace))
        task.watchers.clear()
        # A wedged or silent task cannot use a grace, nor one whose container
        # is still asked for (nothing runs there): kill it at once.
        at_once = task.state in (TaskState.LOST, TaskState.REQUESTED)
        self._queue_relaunch(
            task, 0 if at_once else state.spec.stop_grace + KILL_MARGIN
        )
        state.next_attempt(task, reason)

    def replace(self, task: Task, reason: str) -> None:
        """Bring a failed task back alone: in place if it can, else anew."""
        if self.can_restart_in_place(task):
            self.restart_in_place(task, f"{task.key} restarts: {reason}")
        else:
            self.retire(task, f"{task.key} is replaced: {reason}")

    def restart_in_place(self, task: Task, reason: str) -> None:
        """Restart a healthy task's script in its own container.

        Its runtime stops the script (SIGTERM, the grace, SIGKILL), starts a
        fresh interpreter (pre-importing TensorFlow again), and registers as
        the next attempt from the same container, on the port it holds: no
        request to YARN, no container start, no localization. Should it not
        register by ``in_place_by`` (or its container end), the reconcile loop
        falls back to a new container (:meth:`in_place_failed`).
        """
        state = self.state
        event = stop_event(reason, state.spec.stop_grace, next_attempt=task.attempt + 1)
        task.tell_stop(event)
        task.watchers.clear()
        task.in_place_stop = event
        task.in_place_by = (
            state.clock() + state.spec.stop_grace + KILL_MARGIN + IN_PLACE_REGISTER
        )
        where = task.yarn_container_id or task.container_id
        state.next_attempt(task, f"restarting in place in {where}: {reason}")

    def can_restart_in_place(self, task: Task) -> bool:
        """Its runtime is up, in a live container, and listening: registered
        and heartbeating, or it just reported its script's failure (it waits
        a moment for this answer). Lost and silent tasks are not."""
        live = task.state in (TaskState.REGISTERED, TaskState.RUNNING) or (
            task.state is TaskState.FAILED and task.exit_code is not None
        )
        return (
            live
            and task.last_heartbeat is not None  # registered in this attempt
            and task.container_id is not None
            and self._container_alive(task.container_id)
            and task.stop_requested_at is None
            and task.in_place_stop is None
        )

    def not_started_yet(self, task: Task) -> bool:
        """Its container runs but its runtime has not registered in this
        attempt: nothing of it is in any generation yet."""
        return (
            task.state is TaskState.ALLOCATED
            and task.last_heartbeat is None
            and task.container_id is not None
            and self._container_alive(task.container_id)
            and task.stop_requested_at is None
        )

    def give_back(
        self, tasks: Iterable[Task], reason: str, *, relaunch_at: float
    ) -> None:
        """Gang allocation (am/gang.py): end these forming tasks' attempts now.

        Their containers are killed at once (pending requests are cancelled
        the same way) and the next attempts are asked for at ``relaunch_at``.
        Nothing ran yet, so nothing to save and no address to keep.
        """
        now = self.state.clock()
        for task in tasks:
            since = task.requested_at
            self.retire(task, reason)
            task.retire_by = now
            task.relaunch_at = relaunch_at
            task.waiting_since = since
            task.host = task.port = None

    def in_place_failed(self, task: Task, why: str) -> None:
        """A restart in place did not come back: ask YARN for a new container.

        Not charged to the budget: it is the same restart, carried out the
        ordinary way. A live container is killed first (at once: it had its grace).
        """
        state = self.state
        self._queue_relaunch(task, 0)
        if task.retiring:
            task.attempt += 1  # its late registration, before the kill, is refused
        state.note(task, f"restart in place failed ({why}): asking for a new container")

    def in_place_previous(self, role: str, index: int, attempt: int) -> Task | None:
        """The task, if ``attempt`` is the one it is restarting in place from.

        That attempt's heartbeats are accepted and a reconnecting stream gets
        its Stop again: refused, the runtime would exit instead of restarting.
        """
        state = self.state
        try:
            task = state.task(role, index)
        except TaskRejected:  # or a worker a resize removed (am/resize.py)
            left = state.resizer.leaving_task(role, index)
            if left is None:
                return None
            task = left
        if task.in_place_stop is not None and attempt == task.attempt - 1:
            return task
        return None

    def _queue_relaunch(self, task: Task, grace: float) -> None:
        """Leave the task's container behind: the reconcile loop kills it if
        still alive after ``grace`` seconds, then asks YARN for a new one."""
        state = self.state
        old = task.container_id
        task.retiring = old if old is not None and self._container_alive(old) else None
        task.retire_by = state.clock() + grace
        task.retire_killed = False
        task.in_place_stop = None
        task.container_id = task.yarn_container_id = task.node = None
        state.relaunch.add(task)
        state.poke()

    def _container_alive(self, container_id: str) -> bool:
        state = self.state
        info = state.containers.get(container_id)
        return info is None or not info.ended
