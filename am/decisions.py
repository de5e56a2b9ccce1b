"""What a decider says should happen to the job: plain, frozen values.

Deciders (:mod:`am.checks`, :mod:`am.gang`, :mod:`am.policy`, :mod:`am.lease`)
read a view of the job (:mod:`am.view`) and return these; only
:meth:`am.state.JobState.apply` carries them out, through the transition
tables (:mod:`am.transitions`), so one module changes the job's state.

Tasks are named by their key, ``(role, index)``: a decision holds no task
object it could change. Calls to YARN are not decisions: the reconcile loop
makes them (:mod:`am.reconcile`) and reports what they did as decisions
(:class:`Launched`, :class:`RetireKilled`, ...). :class:`AskAccount` is the
one the loop itself carries out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from am.launcher import ContainerInfo
from am.policy import Failure
from tfyarn.contract.status import Phase, TaskState
from tfyarn.spec import Role

TaskKey = tuple[Role, int]


@dataclass(frozen=True)
class Mark:
    """Move a task to ``status`` within its attempt (the task table decides if it may)."""

    task: TaskKey
    status: TaskState
    reason: str
    quiet: bool = False


@dataclass(frozen=True)
class Fail:
    """A task failed: the restart policy (:func:`am.policy.decide`) says what it costs.

    ``disruption``: YARN's word when it took the container back ("preempted").
    """

    task: TaskKey
    reason: str
    kind: Failure
    disruption: str = ""


@dataclass(frozen=True)
class Finish:
    """The job's outcome is decided: the loop ends with ``phase`` and ``diagnostics``.

    ``end_app``: the master ends the application itself, even KILLED (no
    client will kill it: a lease expired, or the client that stopped the job
    never came back).
    """

    phase: Phase
    diagnostics: str
    end_app: bool = False


@dataclass(frozen=True)
class StopTask:
    """Tell a task to stop (a Stop on its streams; killed if it does not)."""

    task: TaskKey
    reason: str


@dataclass(frozen=True)
class Note:
    """A line in a task's history."""

    task: TaskKey
    text: str
    quiet: bool = False


@dataclass(frozen=True)
class StallSeen:
    """A stall was charged: progress is forgotten so one stall fails once."""


@dataclass(frozen=True)
class InPlaceFailed:
    """A restart in place did not come back: a new container is asked for
    (``retiring``: the container still alive, killed at once)."""

    task: TaskKey
    why: str
    retiring: str | None


@dataclass(frozen=True)
class Retire:
    """End the task's attempt: a Stop, its container left behind (``retiring``,
    killed after ``grace`` if still alive), the next attempt queued for a new one."""

    task: TaskKey
    reason: str
    grace: float
    retiring: str | None


@dataclass(frozen=True)
class RestartInPlace:
    """Restart the task's script in its own container: a Stop naming the next
    attempt, which must register by ``by``; ``note`` goes in its history."""

    task: TaskKey
    reason: str
    by: float
    note: str


@dataclass(frozen=True)
class GaveBack:
    """Gang allocation gave the task's container back (after its :class:`Retire`):
    killed at once (``retire_by``), asked for again at ``relaunch_at``, its
    registration timeout still counting from ``waiting_since``."""

    task: TaskKey
    retire_by: float
    relaunch_at: float
    waiting_since: float


@dataclass(frozen=True)
class ContainerSeen:
    """YARN's view of a task's container: its YARN id and node, when newly known."""

    task: TaskKey
    yarn_container_id: str | None
    node: str | None


@dataclass(frozen=True)
class ContainerEnded:
    """YARN says the task's container ended (the runtime may still report)."""

    task: TaskKey
    at: float


@dataclass(frozen=True)
class ContainersPolled:
    """YARN's view of every container, as the last poll returned it."""

    containers: Mapping[str, ContainerInfo]


@dataclass(frozen=True)
class Launched:
    """A container was asked for the task's current attempt (``requested_at``:
    when, if not already set by :class:`Relaunching`)."""

    task: TaskKey
    container_id: str
    note: str
    quiet: bool = False
    requested_at: float | None = None


@dataclass(frozen=True)
class Relaunching:
    """The task's previous container ended (or was given up on): it leaves the
    relaunch queue, REQUESTED at ``now`` (a gang give-back's request still
    counts from the formation's start), and its new container is asked for next."""

    task: TaskKey
    now: float


@dataclass(frozen=True)
class NotRelaunched:
    """The job finished while the task waited to be relaunched: KILLED instead."""

    task: TaskKey
    reason: str


@dataclass(frozen=True)
class RetireKilled:
    """The old container of a relaunching task was killed; it has until ``by`` to end."""

    task: TaskKey
    by: float


@dataclass(frozen=True)
class RestartsSaving:
    """The restart record is being saved for a later master attempt."""


@dataclass(frozen=True)
class Ended:
    """The application ends with these diagnostics (as YARN keeps them)."""

    diagnostics: str


@dataclass(frozen=True)
class Resize:
    """The next generation, with ``num_worker`` workers (after its stop notice)."""

    num_worker: int
    reason: str


@dataclass(frozen=True)
class AddStandby:
    """Worker ``index`` is asked for ahead of a resize, standing by outside the cluster."""

    index: int
    reason: str


@dataclass(frozen=True)
class DropStandby:
    """A standing-by worker leaves the job (not wanted any more, or failed)."""

    task: TaskKey
    reason: str


@dataclass(frozen=True)
class ServingAt:
    """The master's gRPC service listens at ``address`` (``host:port``)."""

    address: str


@dataclass(frozen=True)
class Warn:
    """A warning every reader of the status sees (am/tokens.py: no keytab)."""

    text: str


@dataclass(frozen=True)
class TokenStatus:
    """What the status says of the job's HDFS delegation tokens (am/tokens.py)."""

    status: Mapping[str, Any]


@dataclass(frozen=True)
class FailureHint:
    """A line for a failed task's diagnostics, from its stderr's tail ("" if none)."""

    hint: Callable[[str], str]


@dataclass(frozen=True)
class AskAccount:
    """Ask the container's NodeManager why it ended (the reconcile loop does)."""

    container: ContainerInfo


Decision = (
    Mark
    | Fail
    | Finish
    | StopTask
    | Note
    | StallSeen
    | InPlaceFailed
    | Retire
    | RestartInPlace
    | GaveBack
    | Resize
    | AddStandby
    | DropStandby
    | ContainerSeen
    | ContainerEnded
    | ContainersPolled
    | Launched
    | Relaunching
    | NotRelaunched
    | RetireKilled
    | RestartsSaving
    | Ended
    | ServingAt
    | Warn
    | TokenStatus
    | FailureHint
    | AskAccount
)
"""Every decision; :meth:`am.state.JobState.apply` carries out all but
:class:`AskAccount`, which the reconcile loop does (a call to YARN)."""
