"""The job's state machine and the master's one reconcile loop.

Everything here runs on the master's asyncio loop. gRPC handlers call the
synchronous methods (:meth:`JobState.register`, :meth:`JobState.heartbeat`, …):
they only record facts and make decisions, never wait. Side effects on YARN
(launching, killing, publishing, shutting down) happen in :meth:`JobState.run`,
the reconcile loop, which compares what should be with what is, like dask's
``SpecCluster._correct_state``.

What a failed task costs is decided in exactly one place,
:meth:`JobState._decide` (the recovery policy, see ARCHITECTURE.md): replace a
lost worker of a ParameterServerStrategy job alone, restart the whole
TensorFlow cluster otherwise, within ``spec.max_restarts``; past it, fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from am.launcher import PENDING_STATES, ContainerInfo, Launcher
from tfyarn._proto import master_pb2 as pb
from tfyarn.contract import clusterspec as _clusterspec
from tfyarn.contract import env as _env
from tfyarn.contract.heartbeat import heartbeat_interval, heartbeat_timeout
from tfyarn.contract.status import (
    STATUS_KEY,
    JobStatus,
    Phase,
    TaskState,
    TaskStatus,
)
from tfyarn.spec import ROLES, JobSpec, Role

log = logging.getLogger(__name__)

# A runtime reports its script's end before its container exits; when YARN says
# a container ended, wait this long for that report before calling it lost.
END_REPORT_GRACE = 3.0
# After a Stop's grace the runtime has this long to exit before we kill it.
KILL_MARGIN = 5.0
STDERR_TAIL_CHARS = 4000
HISTORY_LIMIT = 50
MIN_PASS_GAP = 0.05
# Jobs bigger than this log a summary each pass instead of every task's
# routine steps (which stay in its history), and their status keeps only each
# task's latest history lines.
BIG_JOB_TASKS = 200
# A full pass (poll YARN's view of every container, check every task) costs
# ~1 ms per 50 tasks in the master, and more in skein's get_containers: big
# jobs scan less often, 5000 tasks every 2.5 s.
TASKS_PER_TICK_SECOND = 2000
# skein's key-value store takes values up to its 4 MB gRPC message limit. The
# status of 5000 tasks is ~2.2 MB; beyond this it drops per-task history.
MAX_STATUS_BYTES = 3 * 1024 * 1024
# After `tfyarn kill` stopped every task, how long the master waits for the
# client's YARN kill before ending the application KILLED itself.
STOPPED_LINGER = 30.0


class Action(Enum):
    """What the master does about a failed task (see ``JobState._decide``)."""

    FAIL_JOB = "fail the job"
    REPLACE_TASK = "replace the task alone"
    RESTART_CLUSTER = "restart the whole TensorFlow cluster"
    IGNORE = "ignore"  # the job's outcome (or a restart) is already decided


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
    # The previous attempt's container, until it has ended (see _retire).
    retiring: str | None = None
    retire_by: float = 0.0
    retire_killed: bool = False

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


class JobState:
    """The master's whole view of one job, and the loop that acts on it.

    Parameters
    ----------
    spec
        The job, as submitted.
    launcher
        YARN, or a fake.
    master_address
        ``host:port`` of the gRPC service, given to every task.
    clock, wall
        Monotonic time for timeouts and epoch time for the status snapshot;
        tests replace them.
    tick
        The longest the reconcile loop sleeps between passes (raised for big
        jobs: see TASKS_PER_TICK_SECOND).
    """

    def __init__(
        self,
        spec: JobSpec,
        launcher: Launcher,
        *,
        master_address: str = "",
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        tick: float = 0.5,
        publish_interval: float = 1.0,
    ) -> None:
        self.spec = spec
        self.launcher = launcher
        self.master_address = master_address
        self.clock = clock
        self.wall = wall
        self.publish_interval = publish_interval
        self.phase = Phase.LAUNCHING
        self.generation = 0
        # Every restart (task replacements, cluster restarts, AM re-attempts)
        # with its reason; `budget_used` counts those charged to max_restarts.
        self.restarts = 0
        self.restart_reasons: list[str] = []
        self.budget_used = 0
        # Whole-cluster restarts: ClusterSpec.restart / TFYARN_RESTART.
        self.cluster_restarts = 0
        self.failures: list[str] = []
        self.diagnostics = ""
        self.started = wall()
        self._stamp_second, self._stamp_text = -1, ""
        self.cluster_formed_at: float | None = None
        self.tasks: dict[tuple[Role, int], Task] = {
            key: Task(role=key[0], index=key[1]) for key in spec.task_keys()
        }
        self.lead = self.tasks[spec.lead_task()]
        # Cluster members not registered yet: the cluster forms when it empties.
        # A set, not a scan per registration, keeps 5000 registrations linear.
        # (A restart puts the tasks it relaunches back in.)
        self.unregistered: set[Task] = {
            t for t in self.tasks.values() if t.role.in_cluster_spec()
        }
        self._members = len(self.unregistered)
        self._cluster_event: bytes | None = None
        # Each member's address in the formed cluster: a replacement must
        # come back at the same one (TensorFlow's coordinator cannot follow a
        # moved worker).
        self._formed: dict[Task, str] = {}
        self._relaunch: set[Task] = set()  # new attempts waiting to launch
        self._progress_at: float | None = None  # any task's step last changed
        self._stopping_since: float | None = None  # `tfyarn kill` asked to stop
        self._shutdown_killed = False
        self._stop_reason = ""
        self._outcome: tuple[Phase, str] | None = None
        self._finishing_since: float | None = None
        self._wakeup = asyncio.Event()
        self._published_at = float("-inf")
        self._snapshot_cost = 0.0
        self._publish_error = ""  # the last publish failure, logged once
        self._dirty = True  # something a status reader would see changed
        self._polled_at = float("-inf")
        self._last_progress = -1.0
        self._containers: dict[str, ContainerInfo] = {}
        self._log_each = len(self.tasks) <= BIG_JOB_TASKS
        self.tick = max(tick, len(self.tasks) / TASKS_PER_TICK_SECOND)
        # A restart not yet saved for a later master attempt, and the save
        # under way (one at a time, so the newest record lands last).
        self._restarts_unsaved = False
        self._saving: asyncio.Task[None] | None = None
        self._summary = ""  # the last summary line a big job logged
        # The latest snapshot as JSON; other threads (the status page) read only this.
        self.last_status = ""

    # -- what handlers call (synchronous, never block) ------------------------

    def task(self, role: str, index: int, attempt: int | None = None) -> Task:
        """The task a request names; raise TaskRejected if it is not ours."""
        try:
            task = self.tasks[(Role(role), index)]
        except (ValueError, KeyError):
            known = ", ".join(t.key for t in self.tasks.values())
            raise TaskRejected(
                "NOT_FOUND", f"no task {role}:{index} in this job (tasks: {known})"
            ) from None
        if attempt is not None and attempt != task.attempt:
            raise TaskRejected(
                "FAILED_PRECONDITION",
                f"{task.key} attempt {attempt} was replaced by attempt "
                f"{task.attempt}; this container should exit",
            )
        return task

    def register(self, req: pb.RegisterTaskRequest) -> int:
        """Record a task's address; form the cluster once every task is in."""
        task = self.task(req.task.role, req.task.index, req.attempt)
        if not req.host or not 0 < req.port < 65536:
            raise TaskRejected(
                "INVALID_ARGUMENT",
                f"{task.key} registered without a usable address "
                f"(host={req.host!r}, port={req.port})",
            )
        if self.phase.is_terminal() or task.state.is_terminal():
            raise TaskRejected(
                "FAILED_PRECONDITION",
                f"{task.key} cannot register: it is {task.state.value} and the "
                f"job is {self.phase.value}",
            )
        if task.state.is_registered():
            if (task.host, task.port) == (req.host, req.port):
                return self.generation  # a retried call: already done
            raise TaskRejected(
                "ALREADY_EXISTS",
                f"{task.key} attempt {task.attempt} is already registered at "
                f"{task.address}, not {req.host}:{req.port}",
            )
        task.host, task.port = req.host, req.port
        task.container_id = req.container_id or task.container_id
        task.yarn_container_id = req.yarn_container_id or task.yarn_container_id
        task.last_heartbeat = self.clock()
        self._set(
            task,
            TaskState.REGISTERED,
            f"registered at {task.address}",
            quiet=not self._log_each,
        )
        self.unregistered.discard(task)
        formed_at = self._formed.get(task)
        if self._cluster_event is not None and formed_at not in (None, task.address):
            # A replaced worker could not keep its address: the running
            # coordinator cannot reach it there, so the whole cluster re-forms.
            # Not charged to the budget: the same failure, handled a second way.
            why = (
                f"{task.key} attempt {task.attempt} came back at {task.address}, "
                f"not at its old address {formed_at} (port taken)"
            )
            self._record_restart(f"cluster restarted: {why}", charge=False)
            self._restart_cluster(why)
            self._poke()
            return self.generation
        if self._cluster_event is not None:
            # Late joiners (an evaluator, a replaced worker at its old address)
            # get the cluster that already formed.
            self._set(task, TaskState.RUNNING, f"received cluster {self.generation}")
        else:
            self._maybe_form_cluster()
        self._poke()
        return self.generation

    def watch(self, role: str, index: int, attempt: int, known: int) -> Watcher:
        """Open a WatchCluster stream for a task."""
        task = self.task(role, index, attempt)
        watcher = Watcher(task, attempt)
        task.watchers.add(watcher)
        if self._cluster_event is not None and self.generation > known:
            watcher.put(self._cluster_event)
        if task.stop_requested_at is not None or self.phase.is_terminal():
            watcher.put(self._stop_event(task, task.stop_reason or "the job is ending"))
            watcher.close()
            task.stop_delivered = True
        return watcher

    def unwatch(self, watcher: Watcher) -> None:
        watcher.task.watchers.discard(watcher)

    def heartbeat(self, role: str, index: int, attempt: int) -> int:
        task = self.task(role, index, attempt)
        task.last_heartbeat = self.clock()
        return self.generation

    def progress(
        self, role: str, index: int, attempt: int, step: int, metrics: dict[str, float]
    ) -> None:
        task = self.task(role, index, attempt)
        now = self.clock()
        task.last_heartbeat = now
        if step != task.step:
            task.last_progress = self._progress_at = now
        task.step = step
        task.metrics = metrics
        self._dirty = True

    def task_end(
        self, role: str, index: int, attempt: int, code: int, tail: str
    ) -> None:
        """A task's script ended with ``code``; decide what that means for the job."""
        task = self.task(role, index, attempt)
        if task.state.is_terminal():
            return  # already decided (e.g. its container was seen gone first)
        task.exit_code = code
        task.stderr_tail = tail[-STDERR_TAIL_CHARS:]
        if task.stop_requested_at is not None:
            self._set(task, TaskState.KILLED, f"stopped by the master (exit {code})")
        elif code == 0:
            self._set(task, TaskState.SUCCEEDED, "script exited 0")
            if task is self.lead:
                self._on_lead_success()
        else:
            self._set(task, TaskState.FAILED, f"script exited {code}")
            self._on_failure(task, self._exit_reason(task))
        self._poke()

    def stop_job(self, reason: str, grace: float) -> tuple[float, int]:
        """``tfyarn kill``: stop every task with a grace; restart nothing.

        The client kills the application once the tasks ended; should it not,
        the master ends the application KILLED itself (STOPPED_LINGER later).
        Returns the grace given and how many tasks were told to stop.
        """
        grace = grace if grace > 0 else self.spec.stop_grace
        if self._outcome is not None:
            return grace, 0
        self._stopping_since = self.clock()
        self._stop_reason = reason
        self.phase = Phase.STOPPING
        count = 0
        for task in self.tasks.values():
            if not task.state.is_terminal() and task.stop_requested_at is None:
                count += 1
            if task.state is TaskState.RELAUNCHING:
                self._set(task, TaskState.KILLED, f"not relaunched: {reason}")
                continue
            self._request_stop(task, reason, grace=grace)
        self._relaunch.clear()
        self._poke()
        return grace, count

    def request_kill(self, reason: str) -> None:
        """The application is being killed from outside (SIGTERM to the master)."""
        if self._outcome is None:
            self._outcome = (Phase.KILLED, reason)
        self._poke()

    # -- decisions --------------------------------------------------------------

    def _decide(self, task: Task, reason: str) -> Action:
        """The one place deciding what a failed task costs the job.

        - The job's outcome is settled (or the lead finished): ignore.
        - The restart budget (``spec.max_restarts``) is used up: fail the job.
        - A worker of a ParameterServerStrategy job (a chief and ps tasks, not
          ``legacy_flags``), or an evaluator: replace that task alone, at the
          same address; the coordinator absorbs the loss and takes the worker
          back (FIELD_NOTES).
        - Anything else (a ps, the chief, any task of an all-reduce or TF1-style
          job): stop every task and start the whole TensorFlow cluster again;
          scripts resume from their latest checkpoint.
        """
        if (
            self._outcome is not None
            or self._finishing_since is not None
            or self._stopping_since is not None
        ):
            return Action.IGNORE  # the outcome is already settled
        if self.budget_used >= self.spec.max_restarts:
            return Action.FAIL_JOB
        if task.role is Role.EVALUATOR or (
            task.role is Role.WORKER and self._ps_strategy()
        ):
            return Action.REPLACE_TASK
        return Action.RESTART_CLUSTER

    def _ps_strategy(self) -> bool:
        """Whether the job runs TF2's ParameterServerStrategy with a coordinator."""
        spec = self.spec
        return bool(
            spec.count(Role.CHIEF) and spec.count(Role.PS) and not spec.legacy_flags
        )

    def _on_failure(self, task: Task, reason: str) -> None:
        action = self._decide(task, reason)
        log.warning("%s failed: %s -> %s", task.key, reason, action.value)
        if action is Action.IGNORE:
            self._note(task, f"failure ignored, the job's outcome is settled: {reason}")
            return
        self.failures.append(reason)
        task.failures.append(reason)
        if action is Action.FAIL_JOB:
            self._outcome = (Phase.FAILED, self._budget_message(reason))
        elif action is Action.REPLACE_TASK:
            self._record_restart(f"{task.key} replaced: {reason}", charge=True)
            self._retire(task, f"{task.key} is replaced: {reason}")
        else:
            self._record_restart(f"cluster restarted: {reason}", charge=True)
            self._restart_cluster(reason)

    def _record_restart(self, why: str, *, charge: bool) -> None:
        if charge:
            self.budget_used += 1
        self.restarts += 1
        self.restart_reasons.append(why)
        self._restarts_unsaved = True

    def restart_record(self) -> dict[str, Any]:
        """What a later master attempt needs to go on counting (resume_after_master_loss)."""
        return {
            "budget_used": self.budget_used,
            "restarts": self.restarts,
            "cluster_restarts": self.cluster_restarts,
            "restart_reasons": self.restart_reasons,
            "failures": self.failures,
        }

    def resume_after_master_loss(
        self, attempt: int, record: dict[str, Any] | None
    ) -> None:
        """Go on from an earlier master attempt's restart record, if it left one.

        A new master attempt starts every task again, which is one more
        cluster restart, not charged to max_restarts (YARN's max_am_attempts
        bounds it). The failures charged before still count: without the
        record, a task that fails every time would get a fresh budget in
        every attempt.
        """
        record = record or {}
        self.budget_used = int(record.get("budget_used", 0))
        self.failures = [str(f) for f in record.get("failures", [])]
        self.restart_reasons = [str(r) for r in record.get("restart_reasons", [])]
        # Without a record, count each earlier attempt as one restart.
        self.restarts = int(record.get("restarts", attempt - 2))
        self.cluster_restarts = int(record.get("cluster_restarts", attempt - 2)) + 1
        self._record_restart(
            f"application master attempt {attempt}: attempt {attempt - 1} ended",
            charge=False,
        )

    def _budget_message(self, reason: str) -> str:
        if not self.spec.max_restarts:
            return reason  # no recovery was asked for: the failure says it all
        earlier = self.failures[:-1]
        text = (
            f"{reason}\nThe restart budget is used up ({self.budget_used} of "
            f"max_restarts={self.spec.max_restarts}); every failure of this job:"
        )
        for n, failure in enumerate([*earlier, reason], 1):
            text += f"\n{n}. {failure}"
        return text + "\n(raise --max_restarts to allow more restarts)"

    def _retire(self, task: Task, reason: str) -> None:
        """End the task's current attempt (if still alive) and queue the next one.

        The old container gets a Stop with grace and is killed after it; the
        new attempt is launched only once the old container has ended, so two
        TensorFlow servers never share the task's port (both bind it with
        SO_REUSEPORT). ``task.port`` is kept: the new attempt asks for it.
        """
        old = task.container_id
        alive = old is not None and not (
            (info := self._containers.get(old)) is not None and info.ended
        )
        event = self._stop_event(task, reason)
        for watcher in list(task.watchers):
            watcher.put(event)
            watcher.close()
        task.watchers.clear()
        now = self.clock()
        task.retiring = old if alive else None
        # A wedged or silent task cannot use a grace: kill it at once.
        wedged = task.state is TaskState.LOST
        task.retire_by = now + (0 if wedged else self.spec.stop_grace + KILL_MARGIN)
        task.retire_killed = False
        task.attempt += 1
        task.container_id = task.yarn_container_id = task.node = None
        task.exit_code = None
        task.stderr_tail = ""
        task.last_heartbeat = task.container_ended_at = None
        task.stop_requested_at = None
        task.stop_delivered = False
        task.stop_reason = ""
        task.last_progress = None
        task.step = None  # progress belongs to an attempt: the next one reports anew
        task.metrics = {}
        self._set(task, TaskState.RELAUNCHING, reason)
        self._relaunch.add(task)
        self._poke()

    def _restart_cluster(self, reason: str) -> None:
        """Stop every task and form the TensorFlow cluster again from scratch."""
        self.cluster_restarts += 1
        self.phase = Phase.RESTARTING
        self._cluster_event = None
        self._formed.clear()
        self._progress_at = None
        self.cluster_formed_at = None
        log.warning("restarting the whole cluster: %s", reason)
        for task in self.tasks.values():
            self._retire(task, f"the cluster restarts: {reason}")
        self.unregistered = {t for t in self.tasks.values() if t.role.in_cluster_spec()}

    def _on_lead_success(self) -> None:
        if self._outcome is not None or self._finishing_since is not None:
            return
        self._finishing_since = self.clock()
        self.phase = Phase.FINISHING
        # ps tasks block in server.join() forever and an evaluator loops over
        # checkpoints: neither ends by itself. Under ParameterServerStrategy the
        # workers only serve the coordinator too; elsewhere they train and get
        # worker_grace to finish their own last steps.
        serving = {Role.PS, Role.EVALUATOR}
        if self._ps_strategy():
            serving.add(Role.WORKER)
        log.info(
            "%s succeeded: stopping %s tasks",
            self.lead.key,
            ", ".join(sorted(r.value for r in serving)),
        )
        for task in self.tasks.values():
            if task.role in serving:
                self._request_stop(task, f"{self.lead.key} finished")

    def _exit_reason(self, task: Task) -> str:
        text = f"{task.key} ({task.where()}) exited with code {task.exit_code}"
        if task.exit_code is not None and task.exit_code < 0:
            text += f" (killed by signal {-task.exit_code})"
        tail = task.stderr_tail.strip()
        if tail:
            lines = tail.splitlines()[-20:]
            text += ". Last lines of its stderr:\n" + "\n".join(
                "  " + line for line in lines
            )
        return text

    def _maybe_form_cluster(self) -> None:
        if self.unregistered:
            return
        members = [t for t in self.tasks.values() if t.role.in_cluster_spec()]
        self.generation += 1
        jobs: dict[str, list[tuple[str, int]]] = {}
        for role in ROLES:
            tasks = [(t.host or "", t.port or 0) for t in members if t.role is role]
            if tasks:
                jobs[role.value] = tasks
        spec = _clusterspec.encode(
            jobs, generation=self.generation, restart=self.cluster_restarts
        )
        # Serialized once for every stream (5000 tasks: ~30 kB).
        self._cluster_event = pb.ClusterEvent(cluster_spec=spec).SerializeToString()
        self._formed = {t: t.address or "" for t in members}
        self.cluster_formed_at = self.wall()
        self._progress_at = self.clock()
        for task in members:
            task.last_progress = self._progress_at
        self.phase = Phase.RUNNING
        log.info(
            "cluster formed (generation %d, %d tasks)", self.generation, len(members)
        )
        for task in self.tasks.values():
            if task.state is TaskState.REGISTERED:
                # Logged once above for all of them.
                self._set(
                    task,
                    TaskState.RUNNING,
                    f"received cluster {self.generation}",
                    quiet=True,
                )
            for watcher in task.watchers:
                watcher.put(self._cluster_event)

    def tasks_registered(self) -> int:
        return sum(t.state.is_registered() for t in self.tasks.values())

    def cluster(self) -> dict[str, list[str]]:
        """The formed cluster in TF_CONFIG's layout (empty before it forms)."""
        if self._cluster_event is None:
            return {}
        event = pb.ClusterEvent.FromString(self._cluster_event)
        return _clusterspec.decode(event.cluster_spec)

    # -- the reconcile loop ---------------------------------------------------------

    async def run(self) -> tuple[Phase, str]:
        """Launch every task, then reconcile until the job ends; return the outcome.

        The application is shut down (``launcher.shutdown``) before this returns.
        """
        await self._publish(force=True)
        try:
            await self._launch_all()
        except Exception as exc:  # YARN refused a request: nothing will run
            log.exception("launching containers failed")
            if self._outcome is None:
                self._outcome = (
                    Phase.FAILED,
                    f"tfyarn master could not request containers: {exc}",
                )
        if self.phase is Phase.LAUNCHING:
            self.phase = Phase.REGISTERING
        while True:
            try:
                await self._reconcile()
            except Exception:  # one bad pass must not kill the master
                log.exception("reconcile pass failed; retrying")
            if self._outcome is not None:
                break
            self._wakeup.clear()
            try:
                await asyncio.wait_for(self._wakeup.wait(), self.tick)
            except asyncio.TimeoutError:
                pass
            # Events wake the loop early, but a burst of them (thousands of
            # registrations) costs one pass per MIN_PASS_GAP, not one each.
            await asyncio.sleep(MIN_PASS_GAP)
        return await self._finish(*self._outcome)

    async def _launch_all(self) -> None:
        # One log line per role, not one per task: a big job has thousands.
        for role in ROLES:
            tasks = [t for t in self.tasks.values() if t.role is role]
            for task in tasks:
                if self._outcome is not None:
                    return
                await self._launch(task, quiet=True)
            if tasks:
                log.info(
                    "requested %d %s container(s): %s .. %s",
                    len(tasks),
                    role.value,
                    tasks[0].container_id,
                    tasks[-1].container_id,
                )

    async def _launch(self, task: Task, *, quiet: bool = False) -> None:
        env = {
            _env.TASK_INDEX: str(task.index),
            _env.ATTEMPT: str(task.attempt),
            _env.MASTER_ADDRESS: self.master_address,
            _env.RESTART: str(self.cluster_restarts),
        }
        if task.port:
            env[_env.PORT] = str(task.port)  # a replaced task keeps its address
        task.requested_at = self.clock()
        info = await self.launcher.start(task.role.value, env)
        task.container_id = info.id
        self._note(task, f"requested container {info.id}", quiet=quiet)

    async def _reconcile(self) -> None:
        now = self.clock()
        # Scans over every task run once per tick; events in between (a burst
        # of registrations) only pay for the cheap checks below.
        if now - self._polled_at >= self.tick:
            self._polled_at = now
            try:
                self._containers = await self.launcher.poll()
            except Exception:  # the timeouts below must still fire
                log.warning(
                    "polling containers failed; using the last view", exc_info=True
                )
            for task in self.tasks.values():
                self._watch_container(task, now)
            if not self._log_each:
                self._log_summary()
            self._check_registration(now)
            self._check_heartbeats(now)
            self._check_stall(now)
            await self._enforce_stops(now)
            await self._relaunch_ready(now)
        if self._finishing_since is not None:
            self._check_finishing(now)
        if self._stopping_since is not None:
            self._check_stopping(now)
        if self._restarts_unsaved and (self._saving is None or self._saving.done()):
            self._restarts_unsaved = False
            self._saving = asyncio.create_task(self._save_restarts())
        await self._publish()

    async def _save_restarts(self) -> None:
        try:
            await self.launcher.save_restarts(self.restart_record())
        except Exception:  # a later attempt then starts its budget afresh
            log.warning("could not save the restart record", exc_info=True)

    def _log_summary(self) -> None:
        counts: dict[str, int] = {}
        for task in self.tasks.values():
            counts[task.state.value] = counts.get(task.state.value, 0) + 1
        line = ", ".join(f"{n} {state}" for state, n in sorted(counts.items()))
        if line != self._summary:
            self._summary = line
            log.info("%d tasks: %s", len(self.tasks), line)

    def _watch_container(self, task: Task, now: float) -> None:
        info = self._containers.get(task.container_id or "")
        if info is None or task.state.is_terminal():
            return
        if info.yarn_container_id and not task.yarn_container_id:
            task.yarn_container_id = info.yarn_container_id
        if info.node:
            task.node = info.node
        if task.state is TaskState.REQUESTED and info.state == "RUNNING":
            self._set(
                task,
                TaskState.ALLOCATED,
                f"got {info.yarn_container_id} on {info.node}",
                quiet=not self._log_each,
            )
        if not info.ended:
            return
        if task.container_ended_at is None:
            task.container_ended_at = now
            return
        if now - task.container_ended_at < END_REPORT_GRACE:
            return
        # The container is gone and the runtime never said how its script ended.
        if task.stop_requested_at is not None:
            self._set(task, TaskState.KILLED, f"container {info.state}")
            return
        message = info.exit_message.strip() or "no message from YARN"
        self._set(task, TaskState.LOST, f"container {info.state}: {message}")
        self._on_failure(
            task,
            f"{task.key} ({task.where()}) was lost: its container ended "
            f"{info.state} without the task reporting an exit code "
            f"(YARN: {message})",
        )

    def _check_registration(self, now: float) -> None:
        timeout = self.spec.registration_timeout
        late = [
            t
            for t in self.tasks.values()
            if t.state in (TaskState.REQUESTED, TaskState.ALLOCATED)
            and t.stop_requested_at is None
            and now - t.requested_at > timeout
        ]
        if not late:
            return
        for task in late:
            self._set(task, TaskState.LOST, f"not registered after {timeout:.0f} s")
        reasons = "; ".join(self._waiting_for(t, now) for t in late)
        self._on_failure(
            late[0],
            f"{len(late)} task(s) did not register within the registration timeout "
            f"of {timeout:.0f} s: {reasons}",
        )

    def _waiting_for(self, task: Task, now: float) -> str:
        waited = now - task.requested_at
        info = self._containers.get(task.container_id or "")
        if info is None or info.state in PENDING_STATES:
            group = self.spec.group(task.role)
            gpus = f", {group.gpus} GPUs" if group.gpus else ""
            return (
                f"{task.key} waiting for a container of {group.memory_mib} MiB, "
                f"{group.vcores} vcores{gpus}; not granted after {waited:.0f} s "
                "(the cluster may not have these resources free, or at all)"
            )
        return (
            f"{task.key} got container {info.yarn_container_id} on "
            f"{info.node.split(':')[0]} but did not register after {waited:.0f} s "
            "(see that container's log: did the tfyarn runtime start?)"
        )

    def _check_heartbeats(self, now: float) -> None:
        # Big jobs heartbeat less often (tfyarn.contract.channel.heartbeat_interval).
        interval = heartbeat_interval(self.spec.heartbeat_interval, len(self.tasks))
        timeout = heartbeat_timeout(self.spec.heartbeat_timeout, interval)
        for task in self.tasks.values():
            if (
                task.state.is_registered()
                and task.stop_requested_at is None
                and task.last_heartbeat is not None
                and now - task.last_heartbeat > timeout
            ):
                silent = now - task.last_heartbeat
                self._set(task, TaskState.LOST, f"no heartbeat for {silent:.0f} s")
                self._on_failure(
                    task,
                    f"{task.key} ({task.where()}) sent no heartbeat for {silent:.0f} s "
                    f"(limit {timeout:.0f} s): its process is wedged or its node "
                    "or network is gone",
                )

    def _check_stall(self, now: float) -> None:
        """--stall_timeout: no task reported a new step for that long."""
        timeout = self.spec.stall_timeout
        if (
            not timeout
            or self._progress_at is None
            or self.phase is not Phase.RUNNING
            or now - self._progress_at <= timeout
        ):
            return
        members = [t for t in self.tasks.values() if t.state is TaskState.RUNNING]
        named = []
        for t in members:
            if t.step is None:
                named.append(f"{t.key} never reported progress")
            else:
                idle = now - (t.last_progress or now)
                named.append(f"{t.key} at step {t.step} for {idle:.0f} s")
        idle = now - self._progress_at
        self._progress_at = None  # one failure per stall
        # A stall is the whole job's: charged to the lead, so it restarts the
        # cluster (no single task to replace).
        self._on_failure(
            self.lead,
            f"the job stalled: no task reported training progress for {idle:.0f} s "
            f"(stall_timeout {timeout:.0f} s): " + "; ".join(named),
        )

    async def _relaunch_ready(self, now: float) -> None:
        """Launch new attempts whose predecessor's container has ended."""
        for task in sorted(self._relaunch, key=lambda t: (t.role.value, t.index)):
            if self._outcome is not None:
                return
            if self._finishing_since is not None:
                # The lead finished meanwhile: nothing to bring back.
                self._relaunch.discard(task)
                if task.retiring:
                    with contextlib.suppress(Exception):
                        await self.launcher.kill(task.retiring)
                self._set(task, TaskState.KILLED, "not relaunched: the job finished")
                continue
            old = task.retiring
            if old is not None:
                info = self._containers.get(old)
                if info is None or not info.ended:
                    if now < task.retire_by:
                        continue
                    if not task.retire_killed:
                        task.retire_killed = True
                        task.retire_by = now + KILL_MARGIN
                        self._note(task, f"killing the old container {old}")
                        try:
                            await self.launcher.kill(old)
                        except Exception:  # already gone, or YARN is busy
                            log.warning("killing %s failed", old, exc_info=True)
                        continue
                    # Killed and still not confirmed ended: go on (bounded).
            task.retiring = None
            self._relaunch.discard(task)
            self._set(task, TaskState.REQUESTED, f"attempt {task.attempt}")
            await self._launch(task)

    def _check_finishing(self, now: float) -> None:
        assert self._finishing_since is not None
        elapsed = now - self._finishing_since
        if elapsed > self.spec.worker_grace:
            for task in self.tasks.values():
                self._request_stop(
                    task,
                    f"{self.lead.key} finished {self.spec.worker_grace:.0f} s ago "
                    "(worker_grace)",
                )
        if all(t.state.is_terminal() for t in self.tasks.values()):
            self._outcome = (Phase.SUCCEEDED, self._success_message())
        elif elapsed > self.spec.worker_grace + self.spec.stop_grace + 2 * KILL_MARGIN:
            # Bounded even if YARN never confirms the kills.
            self._outcome = (Phase.SUCCEEDED, self._success_message())

    def _check_stopping(self, now: float) -> None:
        """After ``stop_job``: the client kills the app; if it never does, end it."""
        assert self._stopping_since is not None
        grace = max((t.stop_grace for t in self.tasks.values()), default=0.0)
        if now - self._stopping_since > grace + 2 * KILL_MARGIN + STOPPED_LINGER:
            self._outcome = (Phase.KILLED, self._stop_reason)
            self._shutdown_killed = True

    def _success_message(self) -> str:
        counts: dict[str, int] = {}
        for task in self.tasks.values():
            counts[task.state.value] = counts.get(task.state.value, 0) + 1
        summary = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
        return f"tfyarn: {self.lead.key} finished successfully ({summary})"

    def _request_stop(
        self, task: Task, reason: str, *, grace: float | None = None
    ) -> None:
        if task.state.is_terminal() or task.stop_requested_at is not None:
            return
        task.stop_requested_at = self.clock()
        task.stop_grace = self.spec.stop_grace if grace is None else grace
        task.stop_reason = reason
        self._note(task, f"stop requested: {reason}")
        event = self._stop_event(task, reason, task.stop_grace)
        for watcher in list(task.watchers):
            watcher.put(event)
            watcher.close()
            task.stop_delivered = True
        self._poke()

    def _stop_event(self, task: Task, reason: str, grace: float | None = None) -> bytes:
        grace = self.spec.stop_grace if grace is None else grace
        stop = pb.Stop(reason=reason, grace_seconds=grace)
        return pb.ClusterEvent(stop=stop).SerializeToString()

    async def _enforce_stops(self, now: float) -> None:
        for task in self.tasks.values():
            if task.stop_requested_at is None or task.state.is_terminal():
                continue
            # A task no stream told to stop cannot hear it: kill its container
            # now. One that heard it gets its grace to end the script and report.
            heard = task.stop_delivered and task.state.is_registered()
            if heard and now - task.stop_requested_at < task.stop_grace + KILL_MARGIN:
                continue
            if task.container_id:
                await self.launcher.kill(task.container_id)
            self._set(task, TaskState.KILLED, "container killed by the master")

    async def _finish(self, phase: Phase, diagnostics: str) -> tuple[Phase, str]:
        self.phase = phase
        if self.launcher.app_id and phase is not Phase.SUCCEEDED:
            diagnostics += (
                f"\nAll task logs: yarn logs -applicationId {self.launcher.app_id}"
            )
        self.diagnostics = diagnostics
        log.info("job %s: %s", phase.value, diagnostics)
        for task in self.tasks.values():
            event = self._stop_event(task, f"the job {phase.value.lower()}")
            for watcher in list(task.watchers):
                watcher.put(event)
                watcher.close()
        try:
            await self._publish(force=True)
            await self.launcher.set_progress(1.0)
        except Exception:
            log.exception("could not publish the final status")
        # A killed app is already being torn down by YARN, unless the client
        # that stopped it never came back to kill it.
        if phase is not Phase.KILLED or self._shutdown_killed:
            await self.launcher.shutdown(phase.value, diagnostics)
        return phase, diagnostics

    # -- status ---------------------------------------------------------------------

    def snapshot(self, *, keep: int | None = None) -> dict[str, Any]:
        """The ``tfyarn.status`` document read by ``tfyarn status`` and the live view.

        ``keep``: history and failure lines per task (default: all for small
        jobs, the latest 2 above 200 tasks).
        """
        now = self.clock()
        if keep is None:
            keep = HISTORY_LIMIT if len(self.tasks) <= BIG_JOB_TASKS else 2
        tasks = []
        for t in self.tasks.values():
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
                )
            )
        return JobStatus(
            phase=self.phase,
            generation=self.generation,
            restarts=self.restarts,
            restart_reasons=list(self.restart_reasons),
            max_restarts=self.spec.max_restarts,
            budget_used=self.budget_used,
            cluster_restarts=self.cluster_restarts,
            started=self.started,
            cluster_formed_at=self.cluster_formed_at,
            diagnostics=self.diagnostics,
            master_address=self.master_address,
            lead=self.lead.key,
            tasks=tasks,
        ).to_dict()

    def yarn_progress(self) -> float:
        """0-0.1 while registering, then the lead's step/total_steps if it reports them."""
        if self.phase.is_terminal():
            return 1.0
        if self.phase is Phase.FINISHING:
            return 0.95
        if self._cluster_event is None:
            done = self._members - len(self.unregistered)
            return 0.1 * done / max(1, self._members)
        total = self.lead.metrics.get("total_steps")
        if total and self.lead.step is not None:
            return 0.1 + 0.85 * min(1.0, self.lead.step / total)
        return 0.1

    async def _publish(self, *, force: bool = False) -> None:
        # Built only when due: with thousands of tasks a snapshot per event
        # would make registration quadratic.
        now = self.clock()
        since = now - self._published_at
        # A big job's snapshot takes tens of ms (5000 tasks: ~60 ms, 2.2 MB of
        # JSON): keep it under ~2% of the time, i.e. a refresh every ~3 s.
        gap = max(self.publish_interval / 4, 50 * self._snapshot_cost)
        if (
            force
            or (self._dirty and since >= gap)
            or since >= 5 * self.publish_interval  # refresh heartbeat ages
        ):
            self._dirty = False
            started = time.perf_counter()
            status = json.dumps(self.snapshot())
            if len(status) > MAX_STATUS_BYTES:
                status = json.dumps(self.snapshot(keep=0))
            self.last_status = status
            self._snapshot_cost = time.perf_counter() - started
            self._published_at = now
            try:
                await self.launcher.publish(STATUS_KEY, status)
            except Exception as exc:  # noqa: BLE001 -- the job goes on without it
                if str(exc) != self._publish_error:
                    log.warning("could not publish the status: %s", exc)
                self._publish_error = str(exc)
            else:
                self._publish_error = ""
        progress = self.yarn_progress()
        if abs(progress - self._last_progress) >= 0.01:
            await self.launcher.set_progress(progress)
            self._last_progress = progress

    # -- helpers ----------------------------------------------------------------------

    def _set(
        self, task: Task, state: TaskState, note: str, *, quiet: bool = False
    ) -> None:
        task.state = state
        self._note(task, f"{state.value}: {note}", quiet=quiet)

    def _note(self, task: Task, text: str, *, quiet: bool = False) -> None:
        """Add to the task's history; also log it unless a summary line says it."""
        task.history.append(f"{self._stamp()} {text}")
        self._dirty = True
        del task.history[:-HISTORY_LIMIT]
        if not quiet:
            log.info("%s %s", task.key, text)

    def _stamp(self) -> str:
        # Thousands of notes land in the same second when a big job forms.
        second = int(self.wall())
        if second != self._stamp_second:
            self._stamp_second = second
            self._stamp_text = time.strftime("%H:%M:%S", time.gmtime(second))
        return self._stamp_text

    def _poke(self) -> None:
        self._wakeup.set()
