"""What the master knows about each task: the ``Task`` record, its streams, its refusals.

Plain data and the bounds every part of the master shares; no decisions and no
YARN calls (those are in :mod:`am.policy` and :mod:`am.reconcile`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from tfyarn._proto import master_pb2 as pb
from tfyarn.contract.failure import error_first
from tfyarn.contract.status import TaskState
from tfyarn.spec import Role

# After a Stop's grace the runtime has this long to exit before we kill it.
KILL_MARGIN = 5.0
# A task restarting in place registers again within this after its script
# ended (a new interpreter and one call: seconds), else a new container is asked for.
IN_PLACE_REGISTER = 30.0
STDERR_TAIL_CHARS = 4000
HISTORY_LIMIT = 50
# Jobs bigger than this log a summary each pass instead of every task's
# routine steps (which stay in its history), and their status keeps only each
# task's latest history lines.
BIG_JOB_TASKS = 200


class TaskRejected(Exception):
    """A task's call cannot be accepted; ``code`` is a ``grpc.StatusCode`` name."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class Watcher:
    """One task's WatchCluster stream: a queue of serialized ClusterEvents.

    Events are serialized once per generation and shared by every stream.
    """

    def __init__(self, task: Task, attempt: int) -> None:
        self.task = task
        self.attempt = attempt
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()

    def put(self, event: bytes) -> None:
        self._queue.put_nowait(event)

    def close(self) -> None:
        self._queue.put_nowait(None)

    async def events(self) -> AsyncIterator[bytes]:
        while True:
            event = await self._queue.get()
            if event is None:
                return
            yield event


@dataclass(eq=False)
class Task:
    """One TensorFlow task and its current attempt."""

    role: Role
    index: int
    attempt: int = 0
    state: TaskState = TaskState.REQUESTED
    container_id: str | None = None
    yarn_container_id: str | None = None
    node: str | None = None
    host: str | None = None
    port: int | None = None
    exit_code: int | None = None
    stderr_tail: str = ""
    step: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    requested_at: float = 0.0
    last_heartbeat: float | None = None
    container_ended_at: float | None = None
    stop_requested_at: float | None = None
    stop_grace: float = 0.0
    stop_delivered: bool = False  # a stream carried the Stop to the runtime
    stop_reason: str = ""
    history: list[str] = field(default_factory=list)
    watchers: set[Watcher] = field(default_factory=set)
    last_progress: float | None = None  # when its step last changed
    # Why each earlier attempt ended (shown per task in the status).
    failures: list[str] = field(default_factory=list)
    # The previous attempt's container, until it has ended (see am/attempts.py).
    retiring: str | None = None
    retire_by: float = 0.0
    retire_killed: bool = False
    # A gang give-back (am/gang.py): the next attempt is asked for no sooner,
    # and its registration timeout still counts from the formation's start.
    relaunch_at: float = 0.0
    waiting_since: float | None = None
    # Restarting in place (am/attempts.py): the Stop that told the
    # previous attempt (sent again to it if it reconnects), and by when the
    # new attempt must register in the same container, else a new one is asked for.
    in_place_stop: bytes | None = None
    in_place_by: float = 0.0
    # Its script asked tfyarn.should_stop() (heartbeats say): a stop notice
    # waits for it to save and end (am/notice.py).
    heeds_notice: bool = False

    @property
    def key(self) -> str:
        return f"{self.role.value}:{self.index}"

    @property
    def address(self) -> str | None:
        return f"{self.host}:{self.port}" if self.host else None

    def where(self) -> str:
        """Which container and node, for diagnostics."""
        parts = [f"attempt {self.attempt}"]
        if self.yarn_container_id:
            parts.append(self.yarn_container_id)
        host = self.host or (self.node or "").split(":")[0]
        if host:
            parts.append(f"on {host}")
        return ", ".join(parts)

    def tell_stop(self, event: bytes) -> bool:
        """Send a serialized Stop on every open stream and close them; True if any."""
        for watcher in list(self.watchers):
            watcher.put(event)
            watcher.close()
        return bool(self.watchers)


def stop_event(reason: str, grace: float, *, next_attempt: int = 0) -> bytes:
    """A serialized ``ClusterEvent`` carrying a Stop (``next_attempt``: in place)."""
    stop = pb.Stop(reason=reason, grace_seconds=grace, next_attempt=next_attempt)
    return pb.ClusterEvent(stop=stop).SerializeToString()


def exit_reason(task: Task, hint: str = "") -> str:
    """Why a task's script failed, for diagnostics: its exit, its error, ``hint``."""
    text = f"{task.key} ({task.where()}) exited with code {task.exit_code}"
    if task.exit_code is not None and task.exit_code < 0:
        text += f" (killed by signal {-task.exit_code})"
    if task.stderr_tail.strip():
        # The exception line first: a tail cut through a traceback would
        # otherwise show frames and ^^^^ markers, not the error.
        lines = error_first(task.stderr_tail).splitlines()
        text += ". Last lines of its stderr:\n" + "\n".join(
            "  " + line for line in lines
        )
    return f"{text}\n{hint}" if hint else text
