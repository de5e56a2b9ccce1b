"""Which moves the job's phase and a task's state may make: two tables.

The master changes the job's :class:`Phase` only through
:meth:`am.state.JobState.move_to` and a task's :class:`TaskState` only through
:meth:`am.state.JobState.mark`; both refuse a move these tables do not list
with :class:`IllegalTransition`, so a wrong move fails where it is made instead
of showing up later as a status that makes no sense. A terminal phase or state
is never left (like Ray's job status, which never leaves a terminal one).

A task's state belongs to one attempt of it. Every attempt after the first
begins in :data:`NEW_ATTEMPT`, whatever the previous one ended in (only
``JobState.next_attempt`` enters it; no move within an attempt leads there);
the task table lists the moves within one attempt.
"""

from __future__ import annotations

from collections.abc import Mapping

from tfyarn.contract.status import Phase, TaskState

__all__ = [
    "NEW_ATTEMPT",
    "PHASE_MOVES",
    "TASK_MOVES",
    "IllegalTransition",
    "check_phase_move",
    "check_task_move",
]

# FAILED and KILLED can end every phase that is not terminal: the master's
# own error, its SIGTERM, or a failure the restart policy does not retry.
# SUCCEEDED only follows the lead's success.
PHASE_MOVES: Mapping[Phase, frozenset[Phase]] = {
    # Tasks may register (and fail) while the first containers are asked for.
    Phase.LAUNCHING: frozenset(
        {
            Phase.REGISTERING,
            Phase.RUNNING,
            Phase.RESTARTING,
            Phase.STOPPING,
            Phase.FAILED,
            Phase.KILLED,
        }
    ),
    Phase.REGISTERING: frozenset(
        {
            Phase.RUNNING,
            Phase.RESTARTING,
            Phase.WAITING_FOR_RESOURCES,  # gang allocation gave containers back
            Phase.STOPPING,
            Phase.FAILED,
            Phase.KILLED,
        }
    ),
    # Forming again once the next round's requests are out (REGISTERING or
    # RESTARTING, whichever it was), or formed before that.
    Phase.WAITING_FOR_RESOURCES: frozenset(
        {
            Phase.REGISTERING,
            Phase.RESTARTING,
            Phase.RUNNING,
            Phase.STOPPING,
            Phase.FAILED,
            Phase.KILLED,
        }
    ),
    Phase.RUNNING: frozenset(
        {
            Phase.FINISHING,
            Phase.RESTARTING,
            Phase.STOPPING,
            Phase.FAILED,
            Phase.KILLED,
        }
    ),
    # A failure while the cluster re-forms restarts it again.
    Phase.RESTARTING: frozenset(
        {
            Phase.RESTARTING,
            Phase.RUNNING,
            Phase.WAITING_FOR_RESOURCES,
            Phase.STOPPING,
            Phase.FAILED,
            Phase.KILLED,
        }
    ),
    # The lead succeeded: nothing restarts any more; `tfyarn kill` may come.
    Phase.FINISHING: frozenset(
        {Phase.SUCCEEDED, Phase.STOPPING, Phase.FAILED, Phase.KILLED}
    ),
    # A second `tfyarn kill` stops again; a lead that finished before the
    # kill still makes the job succeed once every task ended.
    Phase.STOPPING: frozenset(
        {Phase.STOPPING, Phase.SUCCEEDED, Phase.FAILED, Phase.KILLED}
    ),
    Phase.SUCCEEDED: frozenset(),
    Phase.FAILED: frozenset(),
    Phase.KILLED: frozenset(),
}

# Within one attempt. SUCCEEDED, FAILED and KILLED can end every state that
# is not terminal (the runtime's report of its script's end, or the master's
# kill); LOST every state with a container (gone, silent, or not registered
# in time without such a report).
TASK_MOVES: Mapping[TaskState, frozenset[TaskState]] = {
    # A runtime may register before the master sees its container running.
    TaskState.REQUESTED: frozenset(
        {
            TaskState.ALLOCATED,
            TaskState.REGISTERED,
            TaskState.SUCCEEDED,
            TaskState.FAILED,
            TaskState.KILLED,
            TaskState.LOST,
        }
    ),
    TaskState.ALLOCATED: frozenset(
        {
            TaskState.REGISTERED,
            TaskState.SUCCEEDED,
            TaskState.FAILED,
            TaskState.KILLED,
            TaskState.LOST,
        }
    ),
    TaskState.REGISTERED: frozenset(
        {
            TaskState.RUNNING,
            TaskState.SUCCEEDED,
            TaskState.FAILED,
            TaskState.KILLED,
            TaskState.LOST,
        }
    ),
    TaskState.RUNNING: frozenset(
        {TaskState.SUCCEEDED, TaskState.FAILED, TaskState.KILLED, TaskState.LOST}
    ),
    # Asked for in a new container, or registered again from its own one (a
    # restart in place, whose container is watched as such: never LOST here).
    TaskState.RELAUNCHING: frozenset(
        {
            TaskState.REQUESTED,
            TaskState.REGISTERED,
            TaskState.SUCCEEDED,
            TaskState.FAILED,
            TaskState.KILLED,
        }
    ),
    TaskState.SUCCEEDED: frozenset(),
    TaskState.FAILED: frozenset(),
    TaskState.KILLED: frozenset(),
    TaskState.LOST: frozenset(),
}

# The state every attempt after the first begins in: it waits for the previous
# attempt's container to end, or restarts in place in it.
NEW_ATTEMPT = TaskState.RELAUNCHING


class IllegalTransition(RuntimeError):
    """A move the tables do not allow: a defect in the master, not a user error.

    ``subject`` names what would have moved ("the job", "task worker:1");
    ``current`` and ``target`` are the phases or states.
    """

    def __init__(
        self, subject: str, current: Phase | TaskState, target: Phase | TaskState
    ) -> None:
        allowed = _allowed(current)
        super().__init__(
            f"{subject} cannot move from {current.value} to {target.value} "
            f"(from {current.value} only to: {allowed})"
        )
        self.subject = subject
        self.current = current
        self.target = target


def check_phase_move(current: Phase, target: Phase) -> None:
    """Raise :class:`IllegalTransition` unless the job may move ``current`` -> ``target``."""
    if target not in PHASE_MOVES[current]:
        raise IllegalTransition("the job", current, target)


def check_task_move(key: str, current: TaskState, target: TaskState) -> None:
    """Raise :class:`IllegalTransition` unless task ``key`` may move so in one attempt."""
    if target not in TASK_MOVES[current]:
        raise IllegalTransition(f"task {key}", current, target)


def _allowed(current: Phase | TaskState) -> str:
    if isinstance(current, Phase):
        targets = sorted(t.value for t in PHASE_MOVES[current])
    else:
        targets = sorted(t.value for t in TASK_MOVES[current])
    return ", ".join(targets) or "none, it is terminal"
