"""What deciders may read of the job: read-only protocols, no ``JobState``.

:class:`am.state.JobState` and :class:`am.model.Task` satisfy these
structurally (mypy checks it where the state hands itself to a decider), so
deciders import neither ``am.state`` nor anything that could change the job:
every member here is a read-only property, and mypy refuses an assignment to one.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from am.launcher import ContainerInfo
from am.lease import LeaseView
from tfyarn.contract.status import Phase, TaskState
from tfyarn.spec import JobSpec, Role


class TaskView(Protocol):
    """One task as deciders see it (:class:`am.model.Task`)."""

    @property
    def role(self) -> Role: ...
    @property
    def index(self) -> int: ...
    @property
    def key(self) -> str: ...
    @property
    def attempt(self) -> int: ...
    @property
    def state(self) -> TaskState: ...
    @property
    def container_id(self) -> str | None: ...
    @property
    def yarn_container_id(self) -> str | None: ...
    @property
    def node(self) -> str | None: ...
    @property
    def requested_at(self) -> float: ...
    @property
    def last_heartbeat(self) -> float | None: ...
    @property
    def last_progress(self) -> float | None: ...
    @property
    def step(self) -> int | None: ...
    @property
    def stop_requested_at(self) -> float | None: ...
    @property
    def container_ended_at(self) -> float | None: ...
    @property
    def stop_grace(self) -> float: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def in_place_stop(self) -> bytes | None: ...
    @property
    def in_place_by(self) -> float: ...

    def where(self) -> str: ...


class JobBasics(Protocol):
    """What every decider reads of the job first: its spec, its phase and
    whether its cluster has settled (formed, nothing in flight)."""

    @property
    def spec(self) -> JobSpec: ...
    @property
    def phase(self) -> Phase: ...
    @property
    def settled(self) -> bool: ...


class JobView(JobBasics, Protocol):
    """The job as the reconcile loop's deciders see it (:mod:`am.checks`)."""

    @property
    def tasks(self) -> Mapping[tuple[Role, int], TaskView]: ...
    @property
    def lead(self) -> TaskView: ...
    @property
    def containers(self) -> Mapping[str, ContainerInfo]: ...
    @property
    def log_each(self) -> bool: ...
    @property
    def progress_at(self) -> float | None: ...
    @property
    def finishing_since(self) -> float | None: ...
    @property
    def stopping_since(self) -> float | None: ...
    @property
    def stop_reason(self) -> str: ...
    @property
    def restart_reasons(self) -> Sequence[str]: ...
    @property
    def draining(self) -> bool:
        """A stop notice's drain is under way (am/notice.py)."""
        ...

    @property
    def standby(self) -> Collection[TaskView]:
        """Workers standing by for the next resize (am/resize.py)."""
        ...

    @property
    def gang_gave_back(self) -> int:
        """Gang allocation's give-backs over the job's life (am/gang.py)."""
        ...

    def gpu_trouble(self) -> str:
        """Nodes whose GPU discovery fails (am/gpus.py), "" if none."""
        ...

    def lease_view(self, now: float) -> LeaseView:
        """A server set's lease at ``now`` (am/lease.py)."""
        ...


def key_of(task: TaskView) -> tuple[Role, int]:
    """The key decisions name a task by (:data:`am.decisions.TaskKey`)."""
    return (task.role, task.index)
