"""A task's attempts: how the master ends one and begins the next, decided.

Two ways, both into the next attempt (RELAUNCHING, see am/transitions.py):
retired, to a new container (the old one gets a Stop with grace, then is
killed; the new one is asked for once the old one ended), or restarted in
place, in the container it holds. :class:`Attempts` reads the job and says
which, as decisions (:class:`~am.decisions.Retire`,
:class:`~am.decisions.RestartInPlace`, ...) that the state applies; the
reconcile loop carries out the kills and launches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from am.decisions import GaveBack, InPlaceFailed, RestartInPlace, Retire
from am.launcher import ContainerInfo
from am.model import IN_PLACE_REGISTER, KILL_MARGIN, Task, TaskRejected
from am.view import TaskView, key_of
from tfyarn.contract.status import TaskState
from tfyarn.spec import JobSpec

if TYPE_CHECKING:
    from am.resize import Resizer


class Job(Protocol):
    """What deciding on attempts reads of the job (JobState has it)."""

    @property
    def spec(self) -> JobSpec: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def containers(self) -> Mapping[str, ContainerInfo]: ...
    @property
    def resizer(self) -> Resizer: ...

    def task(self, role: str, index: int, attempt: int | None = None) -> Task: ...


class Attempts:
    """Decides how one job's task attempts end and the next ones begin."""

    def __init__(self, state: Job) -> None:
        self.state = state

    def retire(self, task: TaskView, reason: str) -> Retire:
        """End the task's current attempt (if still alive) and queue the next one.

        The old container gets a Stop with grace and is killed after it; the
        new attempt is launched only once the old container has ended, so two
        TensorFlow servers never share the task's port (both bind it with
        SO_REUSEPORT). The task's port is kept: the new attempt asks for it.
        """
        # A wedged or silent task cannot use a grace, nor one whose container
        # is still asked for (nothing runs there): kill it at once.
        at_once = task.state in (TaskState.LOST, TaskState.REQUESTED)
        grace = 0 if at_once else self.state.spec.stop_grace + KILL_MARGIN
        return Retire(key_of(task), reason, grace, self.retiring(task))

    def replace(self, task: TaskView, reason: str) -> Retire | RestartInPlace:
        """Bring a failed task back alone: in place if it can, else anew."""
        if self.can_restart_in_place(task):
            return self.restart_in_place(task, f"{task.key} restarts: {reason}")
        return self.retire(task, f"{task.key} is replaced: {reason}")

    def restart_in_place(self, task: TaskView, reason: str) -> RestartInPlace:
        """Restart a healthy task's script in its own container.

        Its runtime stops the script (SIGTERM, the grace, SIGKILL), starts a
        fresh interpreter (pre-importing TensorFlow again), and registers as
        the next attempt from the same container, on the port it holds: no
        request to YARN, no container start, no localization. Should it not
        register by the bound (or its container end), the reconcile loop
        falls back to a new container (:meth:`in_place_failed`).
        """
        state = self.state
        by = state.clock() + state.spec.stop_grace + KILL_MARGIN + IN_PLACE_REGISTER
        where = task.yarn_container_id or task.container_id
        note = f"restarting in place in {where}: {reason}"
        return RestartInPlace(key_of(task), reason, by, note)

    def can_restart_in_place(self, task: TaskView) -> bool:
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

    def not_started_yet(self, task: TaskView) -> bool:
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
        self, task: TaskView, reason: str, *, relaunch_at: float
    ) -> tuple[Retire, GaveBack]:
        """Gang allocation (am/gang.py): end this forming task's attempt now.

        Its container is killed at once (a pending request is cancelled the
        same way) and the next attempt is asked for at ``relaunch_at``.
        Nothing ran yet, so nothing to save and no address to keep.
        """
        now = self.state.clock()
        gave = GaveBack(key_of(task), now, relaunch_at, task.requested_at)
        return self.retire(task, reason), gave

    def in_place_failed(self, task: TaskView, why: str) -> InPlaceFailed:
        """A restart in place did not come back: ask YARN for a new container.

        Not charged to the budget: it is the same restart, carried out the
        ordinary way. A live container is killed first (at once: it had its grace).
        """
        return InPlaceFailed(key_of(task), why, self.retiring(task))

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

    def retiring(self, task: TaskView) -> str | None:
        """The container the task leaves behind, if still alive (killed later)."""
        old = task.container_id
        return old if old is not None and self._container_alive(old) else None

    def _container_alive(self, container_id: str) -> bool:
        info = self.state.containers.get(container_id)
        return info is None or not info.ended
