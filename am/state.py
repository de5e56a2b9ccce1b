"""The job's state machine and its one applier: what the master knows, as JobState.

Everything here runs on the master's asyncio loop. gRPC handlers call the
synchronous methods (:meth:`JobState.register`, :meth:`JobState.heartbeat`, …):
they only record facts and make decisions, never wait. No other module
changes the job: they read it (:mod:`am.view`, or a protocol of their own)
and return decisions (:mod:`am.decisions`), which :meth:`JobState.apply`
carries out (tests/unit/test_am_one_applier.py holds the rule). The master's
parts:

- :mod:`am.model`: each task's record (``Task``), its streams, its refusals;
- :mod:`am.transitions`: the moves the job's phase and a task's state may
  make; :meth:`JobState.move_to` and :meth:`JobState.mark` refuse the others;
- :mod:`am.policy`: what a failed task costs the job, a pure function
  (:func:`am.policy.decide`); :meth:`JobState.on_failure` carries it out;
- :mod:`am.gang`: gang allocation while the cluster forms; it returns a step
  that :meth:`JobState.check_gang` carries out;
- :mod:`am.attempts`: how a task's attempt ends (a new container, or a
  restart in place), decided; the state ends it and queues the next;
- :mod:`am.reconcile`: the one reconcile loop, every effect on YARN
  (launch, kill, relaunch, shutdown); :meth:`JobState.run`;
- :mod:`am.checks`: the loop's deciders (heartbeats, stalls, registration,
  a container's end, the lease, the job's end);
- :mod:`am.publish`: the ``tfyarn.status`` snapshot and YARN's progress;
- :mod:`am.notice`, :mod:`am.resize`, :mod:`am.elastic`: graceful stops, other
  worker counts (``tfyarn scale``) and ``--min_worker``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Collection, Iterable
from typing import Any

from am import policy, restart_record
from am.attempts import Attempts
from am.decisions import (
    AddStandby,
    ContainerEnded,
    ContainerSeen,
    ContainersPolled,
    Decision,
    DropStandby,
    Ended,
    Fail,
    FailureHint,
    Finish,
    GaveBack,
    InPlaceFailed,
    Launched,
    Mark,
    Note,
    NotRelaunched,
    Relaunching,
    Resize,
    RestartInPlace,
    RestartsSaving,
    Retire,
    RetireKilled,
    ServingAt,
    StallSeen,
    StopTask,
    TaskKey,
    TokenStatus,
    Warn,
)
from am.elastic import Elastic
from am.gang import Gang
from am.gpus import GpuLedger
from am.launcher import ContainerInfo, Launcher
from am.lease import Lease, LeaseView
from am.model import (
    BIG_JOB_TASKS,
    HISTORY_LIMIT,
    KILL_MARGIN,
    STDERR_TAIL_CHARS,
    Task,
    TaskRejected,
    Watcher,
    exit_reason,
    stop_event,
)
from am.notice import Notices
from am.policy import Action, Failure
from am.publish import Publisher, snapshot, yarn_progress
from am.reconcile import Reconciler
from am.resize import Resizer, resized
from am.transitions import (
    NEW_ATTEMPT,
    IllegalTransition,
    check_phase_move,
    check_task_move,
)
from tfyarn._proto import master_pb2 as pb
from tfyarn.contract import clusterspec as _clusterspec
from tfyarn.contract.failure import error_line
from tfyarn.contract.status import Phase, TaskState
from tfyarn.spec import ROLES, JobSpec, Role

__all__ = [
    "Action",
    "IllegalTransition",
    "JobState",
    "Phase",
    "Task",
    "TaskRejected",
    "TaskState",
    "Watcher",
]

log = logging.getLogger(__name__)

# A full pass (poll YARN's view of every container, check every task) costs
# ~1 ms per 50 tasks in the master, and more in skein's get_containers: big
# jobs scan less often, 5000 tasks every 2.5 s.
TASKS_PER_TICK_SECOND = 2000


class JobState:
    """The master's whole view of one job; the servicer's one entry point.

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
    publish_interval
        How often the status is refreshed when something changed (at most
        four times per interval; every five intervals regardless).
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
        # The phase changes only through move_to (am/transitions.py's table).
        self._phase = Phase.LAUNCHING
        self.generation = 0
        # Every restart (task replacements, cluster restarts, AM re-attempts)
        # with its reason; `budget_used` counts those charged to max_restarts.
        self.restarts = 0
        self.restart_reasons: list[str] = []
        self.budget_used = 0
        # Whole-cluster restarts: ClusterSpec.restart / TFYARN_RESTART.
        self.cluster_restarts = 0
        self.failures: list[str] = []
        # Containers YARN took back (policy.Failure.DISRUPTED): counted against
        # max_disruptions, not max_restarts; each task's latest one's word.
        self.disruption_reasons: list[str] = []
        self.disruption_kinds: dict[str, int] = {}
        self.disrupted: dict[Task, str] = {}
        # The script errors the job already failed with (policy.error_signature):
        # the same one again is a bug, not bad luck (restart_policy).
        self.errors_seen: set[str] = set()
        self.diagnostics = ""
        self.started = wall()
        self._stamp_second, self._stamp_text = -1, ""
        self.cluster_formed_at: float | None = None
        self.tasks: dict[tuple[Role, int], Task] = {
            key: Task(role=key[0], index=key[1]) for key in spec.task_keys()
        }
        self.lead = self.tasks[spec.lead_task()]
        # A server set's coordinator is on the gateway: a worker is replaced
        # alone, as in a ParameterServerStrategy job.
        self.ps_strategy = spec.servers or policy.uses_ps_strategy(
            chiefs=spec.count(Role.CHIEF),
            ps=spec.count(Role.PS),
            legacy_flags=spec.legacy_flags,
        )
        self.lease = Lease(spec.lease, clock())  # a server set's (am/lease.py)
        # The tasks TensorFlow's ClusterSpec lists, in every generation (a
        # task's role never changes): computed here once, asked everywhere.
        self.cluster_members: tuple[Task, ...] = tuple(
            t for t in self.tasks.values() if t.role.in_cluster_spec()
        )
        # Members not registered yet: the cluster forms when it empties.
        # A set, not a scan per registration, keeps 5000 registrations linear.
        # (A restart or a gang give-back puts every member back in.)
        self.unregistered: set[Task] = set(self.cluster_members)
        self._cluster_event: bytes | None = None
        # Each member's address in the formed cluster: a replacement must come back
        # at the same one (TensorFlow's coordinator cannot follow a moved worker).
        self._formed: dict[Task, str] = {}
        self.relaunch: set[Task] = set()  # new attempts waiting to launch
        self.progress_at: float | None = None  # any task's step last changed
        self.stopping_since: float | None = None  # `tfyarn kill` asked to stop
        self.stop_reason = ""
        self.outcome: tuple[Phase, str] | None = None
        self.finishing_since: float | None = None
        self.wakeup = asyncio.Event()
        self.containers: dict[str, ContainerInfo] = {}  # YARN's view, last poll
        self.log_each = len(self.tasks) <= BIG_JOB_TASKS
        self.tick = max(tick, len(self.tasks) / TASKS_PER_TICK_SECOND)
        # A restart not yet saved for a later master attempt.
        self.restarts_unsaved = False
        self.gang = Gang()  # gang allocation while the cluster forms (am/gang.py)
        self.gpus = GpuLedger(self)  # each task's GPUs (am/gpus.py)
        self.publisher = Publisher(self, interval=publish_interval)
        self.reconciler = Reconciler(self)
        self.attempts = Attempts(self)  # ends and begins tasks' attempts
        self.notices = Notices(self)  # graceful ends of a generation (am/notice.py)
        self.resizer = Resizer(self)  # other worker counts (am/resize.py)
        self.elastic = Elastic(self)  # --min_worker (am/elastic.py)
        # Delegation tokens (am/tokens.py): the newest fresh ones as a
        # serialized ClusterEvent for every stream, what the status says of
        # them, and a line naming an expired token in a failure's diagnostics.
        self.credentials: tuple[bytes, int] | None = None
        self.warnings: list[str] = []
        self.hdfs_tokens: dict[str, Any] | None = None
        self.failure_hint: Callable[[str], str] = lambda tail: ""

    # -- the reconcile loop and the published status (am.reconcile, am.publish) ----

    async def run(self) -> tuple[Phase, str]:
        """Launch every task, then reconcile until the job ends; return the outcome.

        The application is shut down (``launcher.shutdown``) before this returns.
        """
        await self.start()
        return await self.until_done()

    async def start(self) -> None:
        """What :meth:`run` does first: the first status, every task's container."""
        await self.reconciler.start()
        if self.phase is Phase.LAUNCHING:  # else a task already moved it on
            self.move_to(Phase.REGISTERING)

    async def reconcile_once(self) -> None:
        """One reconcile pass, exactly as the loop runs it (for tests to step it)."""
        await self.reconciler.reconcile_once()

    async def until_done(self) -> tuple[Phase, str]:
        """What :meth:`run` does after :meth:`start`: reconcile until the end."""
        phase, diagnostics = await self.reconciler.until_decided()
        self.move_to(phase)
        return await self.reconciler.finish(phase, diagnostics)

    def snapshot(self, *, keep: int | None = None) -> dict[str, Any]:
        """The ``tfyarn.status`` document (see :func:`am.publish.snapshot`)."""
        return snapshot(self, keep=keep)

    def yarn_progress(self) -> float:
        return yarn_progress(self)

    @property
    def last_status(self) -> str:
        """The latest published snapshot as JSON (other threads read only this)."""
        return self.publisher.last_status

    @property
    def phase(self) -> Phase:
        """Where the whole job is; changed only by :meth:`move_to`."""
        return self._phase

    def move_to(self, phase: Phase) -> None:
        """Move the job to ``phase``: the one way its phase changes.

        Raises
        ------
        IllegalTransition
            If am/transitions.py's table does not allow the move (a terminal
            phase is never left).
        """
        check_phase_move(self._phase, phase)
        self._phase = phase

    @property
    def members(self) -> int:
        """How many tasks the ClusterSpec lists (:attr:`cluster_members`)."""
        return len(self.cluster_members)

    @property
    def settled(self) -> bool:
        """Whether the job is ending: its outcome decided, its lead finished, or
        ``tfyarn kill`` stopping it. Failures then restart nothing."""
        return (
            self.outcome is not None
            or self.finishing_since is not None
            or self.stopping_since is not None
        )

    @property
    def formed(self) -> bool:
        """Whether the TensorFlow cluster formed (and has not restarted since)."""
        return self._cluster_event is not None

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
        if self.attempts.in_place_previous(req.task.role, req.task.index, req.attempt):
            return self.generation  # a stream's retry; the watch gets its Stop
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
        task.in_place_stop = None
        self.disrupted.pop(task, None)  # back: its latest attempt runs
        task.container_id = req.container_id or task.container_id
        task.yarn_container_id = req.yarn_container_id or task.yarn_container_id
        task.last_heartbeat = self.clock()
        self.mark(
            task,
            TaskState.REGISTERED,
            f"registered at {task.address}",
            quiet=not self.log_each,
        )
        self.unregistered.discard(task)
        formed_at = self._formed.get(task)
        moved = self.formed and formed_at not in (None, task.address)
        if moved and self.settled:
            # The job is ending and this task is being stopped: its Stop
            # follows on its stream; a cluster restart would start it again.
            self.note(
                task,
                f"came back at {task.address}, not at {formed_at}: the job is "
                "ending, so the cluster is not restarted",
            )
        elif moved:
            # A replaced worker could not keep its address: the running
            # coordinator cannot reach it there, so the whole cluster re-forms,
            # after a stop notice (the rest is intact and can save). Not
            # charged to the budget: the same failure, handled a second way.
            why = (
                f"{task.key} attempt {task.attempt} came back at {task.address}, "
                f"not at its old address {formed_at} (port taken)"
            )
            self.notices.begin(why, functools.partial(self.restart_on_purpose, why))
            self.poke()
            return self.generation
        if self.elastic.hold(task):
            self.poke()  # a standby worker: it joins at the next resize
            return self.generation
        if self._cluster_event is not None:
            # Late joiners (an evaluator, a replaced worker at its old address)
            # get the cluster that already formed.
            self.mark(task, TaskState.RUNNING, f"received cluster {self.generation}")
        else:
            self._maybe_form_cluster()
        self.poke()
        return self.generation

    def watch(
        self,
        role: str,
        index: int,
        attempt: int,
        known: int,
        *,
        known_credentials: int = 0,
    ) -> Watcher:
        """Open a WatchCluster stream for a task."""
        restarting = self.attempts.in_place_previous(role, index, attempt)
        if restarting is not None and restarting.in_place_stop is not None:
            # The attempt being restarted in place lost its stream before
            # the Stop reached it: it gets the Stop, not a refusal.
            watcher = Watcher(restarting, attempt)
            watcher.put(restarting.in_place_stop)
            watcher.close()
            return watcher
        task = self.task(role, index, attempt)
        watcher = Watcher(task, attempt)
        task.watchers.add(watcher)
        if self.credentials is not None and self.credentials[1] > known_credentials:
            # Before the ClusterSpec: the script starts with fresh tokens.
            watcher.put(self.credentials[0])
        standby = task in self.resizer.standby  # not in this cluster
        if self._cluster_event is not None and self.generation > known and not standby:
            watcher.put(self._cluster_event)
        self.notices.on_watch(task, watcher)
        if task.stop_requested_at is not None or self.phase.is_terminal():
            reason = task.stop_reason or "the job is ending"
            watcher.put(stop_event(reason, self.spec.stop_grace))
            watcher.close()
            task.stop_delivered = True
        return watcher

    def push_credentials(self, event: bytes, version: int) -> None:
        """Fresh delegation tokens (a serialized ClusterEvent) for every task."""
        self.credentials = (event, version)
        for task in self.tasks.values():
            for watcher in task.watchers:
                watcher.put(event)

    def renew_lease(self, holder: str) -> None:
        """A server set's client renewed its lease (am/lease.py)."""
        if self.lease.renewed_at is None:
            log.info("lease first renewed by %s", holder or "a client")
        self.lease.renew(self.clock(), holder)

    def unwatch(self, watcher: Watcher) -> None:
        watcher.task.watchers.discard(watcher)

    def heartbeat(
        self, role: str, index: int, attempt: int, *, heeds_notice: bool = False
    ) -> int:
        if self.attempts.in_place_previous(role, index, attempt) is not None:
            return self.generation  # its Stop is on the way
        task = self.task(role, index, attempt)
        task.last_heartbeat = self.clock()
        task.heeds_notice = heeds_notice
        return self.generation

    def progress(
        self, role: str, index: int, attempt: int, step: int, metrics: dict[str, float]
    ) -> None:
        task = self.task(role, index, attempt)
        now = self.clock()
        task.last_heartbeat = now
        if step != task.step:
            task.last_progress = self.progress_at = now
        task.step = step
        task.metrics = metrics
        self.publisher.dirty = True

    def task_end(
        self,
        role: str,
        index: int,
        attempt: int,
        code: int,
        tail: str,
        *,
        container_ending: bool = False,
    ) -> None:
        """A task's script ended with ``code``; decide what that means for the job
        (``container_ending``: YARN is ending the container; await its word)."""
        task = self.task(role, index, attempt)
        if task.state.is_terminal():
            return  # already decided (e.g. its container was seen gone first)
        if self.notices.on_end(task, code):
            task.exit_code = code
            return  # saved for a stop notice: it waits for the next generation
        task.exit_code = code
        task.stderr_tail = tail[-STDERR_TAIL_CHARS:]
        if task.stop_requested_at is not None:
            self.mark(task, TaskState.KILLED, f"stopped by the master (exit {code})")
        elif code == 0:
            self.mark(task, TaskState.SUCCEEDED, "script exited 0")
            if task is self.lead:
                self._on_lead_success()
        else:
            self.mark(task, TaskState.FAILED, f"script exited {code}")
            kind = policy.classify_exit(code, self.spec.retry_exit_codes)
            reason = self._exit_reason(task)
            # A SIGTERM may be YARN preempting the container: its verdict decides.
            held = self.reconciler.hold(
                task, code, reason, kind, container_ending=container_ending
            )
            if not held:
                self.on_failure(task, reason, kind)
        self.poke()

    def stop_job(
        self, reason: str, grace: float, *, graceful: bool = False
    ) -> tuple[float, int]:
        """``tfyarn kill``: stop every task with a grace; restart nothing.

        ``graceful`` (``--graceful``): a stop notice first (am/notice.py). The
        client kills the application once the tasks ended; should it not, the
        master ends it KILLED itself (``am.checks.STOPPED_LINGER`` later).
        Returns the longest the tasks may take and how many were told to stop.
        """
        grace = grace if grace > 0 else self.spec.stop_grace
        if self.outcome is not None:
            return grace, 0
        self.stopping_since = self.clock()
        self.stop_reason = reason
        self.move_to(Phase.STOPPING)
        count = sum(
            not t.state.is_terminal() and t.stop_requested_at is None
            for t in self.tasks.values()
        )
        if not graceful:
            self._stop_tasks(reason, grace)
            return grace, count
        stop = functools.partial(self._stop_tasks, reason, grace)
        notice = self.notices.begin(reason, stop, grace=grace, stops_job=True)
        return notice + grace, count

    def _stop_tasks(self, reason: str, grace: float) -> None:
        self.stopping_since = self.clock()  # the Stops' grace counts from now
        for task in self.tasks.values():
            if task.state is TaskState.RELAUNCHING and task.in_place_stop is None:
                self.mark(task, TaskState.KILLED, f"not relaunched: {reason}")
                continue
            self.request_stop(task, reason, grace=grace)
        self.relaunch.clear()
        self.poke()

    def request_kill(self, reason: str) -> None:
        """The application is being killed from outside (SIGTERM to the master)."""
        if self.outcome is None:
            self.outcome = (Phase.KILLED, reason)
        self.poke()

    # -- decisions --------------------------------------------------------------

    def on_failure(self, task: Task, reason: str, kind: Failure = Failure.EXIT) -> None:
        """A task failed (exit code, lost, silent, late, stalled): carry out the policy.

        ``kind`` says whose doing it was (:class:`am.policy.Failure`); a script
        error is compared with the errors the job already failed with.
        """
        if self.elastic.on_failure(task, reason):
            return  # a standby worker: dropped, asked for again later
        error, signature = "", ""
        if kind is Failure.EXIT:
            error = error_line(task.stderr_tail)
            code = task.exit_code if task.exit_code is not None else 1
            signature = policy.error_signature(task.role, error, code)
            error = error or f"{task.key} exited with code {code}"
        action = policy.decide(
            role=task.role,
            ps_strategy=self.ps_strategy,
            budget_used=self.budget_used,
            max_restarts=self.spec.max_restarts,
            failure=kind,
            repeated=signature in self.errors_seen,
            restart_policy=self.spec.restart_policy,
            outcome_decided=self.outcome is not None,
            lead_finished=self.finishing_since is not None,
            stopping=self.stopping_since is not None,
            draining=self.notices.active,
            disruptions=len(self.disruption_reasons),
            max_disruptions=self.spec.max_disruptions,
        )
        log.warning("%s failed: %s -> %s", task.key, reason, action.value)
        if action is Action.IGNORE:
            self.note(task, f"failure ignored, the job's outcome is settled: {reason}")
            return
        if kind is Failure.DISRUPTED and action is not Action.FAIL_NOT_RETRIED:
            task.failures.append(reason)
            self._on_disruption(task, reason, action)
            return
        self.failures.append(reason)
        task.failures.append(reason)
        if signature:
            self.errors_seen.add(signature)
            self.restarts_unsaved = True
        if action is Action.FAIL_REPEATED:
            message = policy.repeat_message(error, task.role, reason, self.failures)
            self.outcome = (Phase.FAILED, message)
        elif action is Action.FAIL_NOT_RETRIED:
            message = policy.policy_message(
                reason, self.failures, restart_policy=self.spec.restart_policy
            )
            self.outcome = (Phase.FAILED, message)
        elif action is Action.FAIL_JOB:
            message = policy.budget_message(
                reason,
                self.failures,
                budget_used=self.budget_used,
                max_restarts=self.spec.max_restarts,
            )
            self.outcome = (Phase.FAILED, message)
        elif action is Action.REPLACE_TASK:
            self._record_restart(f"{task.key} replaced: {reason}", charge=True)
            self.apply([self.attempts.replace(task, reason)])
        else:
            self._record_restart(f"cluster restarted: {reason}", charge=True)
            self.restart_cluster(reason)

    def _on_disruption(self, task: Task, reason: str, action: Action) -> None:
        """YARN took the task's container back: it comes back, outside the budget."""
        if action is Action.FAIL_DISRUPTED:
            message = policy.disruption_message(
                reason,
                self.disruption_reasons,
                max_disruptions=self.spec.max_disruptions,
            )
            self.outcome = (Phase.FAILED, message)
            return
        word = self.disrupted.get(task, "taken back")
        self.disruption_kinds[word] = self.disruption_kinds.get(word, 0) + 1
        self.disruption_reasons.append(reason)
        self.restarts_unsaved = True
        if action is Action.REPLACE_TASK:
            self.apply([self.attempts.replace(task, reason)])
        else:
            self.restart_cluster(reason)

    def _record_restart(self, why: str, *, charge: bool) -> None:
        if charge:
            self.budget_used += 1
        self.restarts += 1
        self.restart_reasons.append(why)
        self.restarts_unsaved = True

    def restart_record(self) -> dict[str, Any]:
        """What a later master attempt needs (am/restart_record.py)."""
        return restart_record.record_of(self)

    def resume_after_master_loss(
        self, attempt: int, record: dict[str, Any] | None
    ) -> None:
        """Go on from an earlier master attempt's record (am/restart_record.py)."""
        counts = restart_record.resume(attempt, record)
        self.budget_used = counts.budget_used
        self.failures = list(counts.failures)
        self.errors_seen = set(counts.errors_seen)
        self.restart_reasons = list(counts.restart_reasons)
        self.disruption_reasons = list(counts.disruption_reasons)
        self.disruption_kinds = dict(counts.disruption_kinds)
        self.restarts = counts.restarts
        self.cluster_restarts = counts.cluster_restarts
        self.restarts_unsaved = True

    def next_attempt(self, task: Task, why: str) -> None:
        """Forget what belonged to the task's current attempt; begin the next.

        It begins in NEW_ATTEMPT (RELAUNCHING), whatever the last one ended in:
        the only way into that state (mark refuses it).
        """
        task.attempt += 1
        task.exit_code = None
        task.stderr_tail = ""
        task.last_heartbeat = task.container_ended_at = None
        task.stop_requested_at = None
        task.stop_delivered = False
        task.stop_reason = ""
        task.heeds_notice = False
        task.last_progress = None
        task.step = None  # progress belongs to an attempt: the next one reports anew
        task.metrics = {}
        self._enter(task, NEW_ATTEMPT, why)

    def restart_on_purpose(self, why: str) -> None:
        """A restart the master decided with the cluster intact (after its notice)."""
        self._record_restart(f"cluster restarted: {why}", charge=False)
        self.restart_cluster(why)

    def restart_cluster(self, reason: str) -> None:
        """Stop every task and form the TensorFlow cluster again from scratch."""
        self.cluster_restarts += 1
        self.move_to(Phase.RESTARTING)
        self._cluster_event = None
        self._formed.clear()
        self.progress_at = None
        self.cluster_formed_at = None
        log.warning("restarting the whole cluster: %s", reason)
        attempts = self.attempts
        why = f"the cluster restarts: {reason}"
        for task in self.tasks.values():
            if attempts.can_restart_in_place(task):
                self.apply([attempts.restart_in_place(task, why)])
            elif attempts.not_started_yet(task):
                # Its runtime has not registered: it registers into the next
                # generation as it is (a standby worker joining a resize).
                self.note(task, f"keeps its new container: {reason}")
            else:
                self.apply([attempts.retire(task, why)])
        self.poke()
        self.unregistered = set(self.cluster_members)

    def check_gang(self, now: float) -> None:
        """Gang allocation's check for this reconcile pass (am/gang.py), carried out."""
        step = self.gang.check(self, now)
        if step is None:
            return
        self.move_to(step.phase)
        if step.give_back:
            self.give_back(step.give_back, step.reason, relaunch_at=step.relaunch_at)

    def give_back(
        self, keys: Iterable[TaskKey], reason: str, *, relaunch_at: float
    ) -> None:
        """Gang allocation (am/gang.py): end these forming tasks' attempts now
        (:meth:`am.attempts.Attempts.give_back`)."""
        for key in keys:
            task = self.tasks[key]
            self.apply(self.attempts.give_back(task, reason, relaunch_at=relaunch_at))
        self.unregistered = set(self.cluster_members)

    def _on_lead_success(self) -> None:
        if self.settled:
            return
        self.finishing_since = self.clock()
        self.move_to(Phase.FINISHING)
        serving = policy.serving_roles(ps_strategy=self.ps_strategy)
        log.info(
            "%s succeeded: stopping %s tasks",
            self.lead.key,
            ", ".join(sorted(r.value for r in serving)),
        )
        for task in self.tasks.values():
            if task.role in serving:
                self.request_stop(task, f"{self.lead.key} finished")

    def _exit_reason(self, task: Task) -> str:
        return exit_reason(task, self.failure_hint(task.stderr_tail))

    def _maybe_form_cluster(self) -> None:
        # An ending job forms nothing: its tasks are being stopped.
        if self.unregistered or self.settled:
            return
        members = self.cluster_members
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
        self.progress_at = self.clock()
        for task in members:
            task.last_progress = self.progress_at
        self.move_to(Phase.RUNNING)
        log.info(
            "cluster formed (generation %d, %d tasks)", self.generation, len(members)
        )
        for task in self.tasks.values():
            if task in self.resizer.standby:
                continue  # not in this cluster: it joins at the next resize
            if task.state is TaskState.REGISTERED:
                # Logged once above for all of them.
                self.mark(
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

    # -- the applier: the one place decisions change the job ---------------------------

    def apply(self, decisions: Iterable[Decision]) -> None:
        """Carry out deciders' decisions (am/decisions.py), in order.

        Task states move only through :meth:`mark` (the task table), the
        phase only through :meth:`move_to`; a failure goes through the
        restart policy (:meth:`on_failure`).

        Raises
        ------
        IllegalTransition
            If a decision asks for a move the tables do not allow.
        TypeError
            If handed something that is not a decision the job carries out.
        """
        for decision in decisions:
            self._apply_one(decision)

    def _apply_one(self, d: Decision) -> None:
        if isinstance(d, Mark):
            self.mark(self.tasks[d.task], d.status, d.reason, quiet=d.quiet)
        elif isinstance(d, Fail):
            task = self.tasks[d.task]
            if d.disruption:
                self.disrupted[task] = d.disruption
            self.on_failure(task, d.reason, d.kind)
        elif isinstance(d, Finish):
            self.outcome = (d.phase, d.diagnostics)
        elif isinstance(d, StopTask):
            self.request_stop(self.tasks[d.task], d.reason)
        elif isinstance(d, Note):
            self.note(self.tasks[d.task], d.text, quiet=d.quiet)
        elif isinstance(d, StallSeen):
            self.progress_at = None
        elif isinstance(d, InPlaceFailed):
            task = self.tasks[d.task]
            self._queue_relaunch(task, 0, d.retiring)
            if task.retiring:
                task.attempt += 1  # its late registration, before the kill, is refused
            self.note(
                task,
                f"restart in place failed ({d.why}): asking for a new container",
            )
        elif isinstance(d, Retire):
            task = self.tasks[d.task]
            task.tell_stop(stop_event(d.reason, self.spec.stop_grace))
            task.watchers.clear()
            self._queue_relaunch(task, d.grace, d.retiring)
            self.next_attempt(task, d.reason)
        elif isinstance(d, RestartInPlace):
            task = self.tasks[d.task]
            event = stop_event(
                d.reason, self.spec.stop_grace, next_attempt=task.attempt + 1
            )
            task.tell_stop(event)
            task.watchers.clear()
            task.in_place_stop = event
            task.in_place_by = d.by
            self.next_attempt(task, d.note)
        elif isinstance(d, GaveBack):
            task = self.tasks[d.task]
            task.retire_by = d.retire_by
            task.relaunch_at = d.relaunch_at
            task.waiting_since = d.waiting_since
            task.host = task.port = None
        elif isinstance(d, Resize):
            self._resize(d.num_worker, d.reason)
        elif isinstance(d, AddStandby):
            task = self._new_worker(d.index, d.reason)
            self.tasks[(Role.WORKER, d.index)] = task
            self.resizer.standby.add(task)
        elif isinstance(d, DropStandby):
            # Standing-by workers are in self.tasks until they leave.
            task = self.tasks.pop(d.task)
            self.resizer.standby.discard(task)
            self._remove_worker(task, d.reason)
        elif isinstance(d, ContainerSeen):
            task = self.tasks[d.task]
            if d.yarn_container_id is not None:
                task.yarn_container_id = d.yarn_container_id
            if d.node is not None:
                task.node = d.node
        elif isinstance(d, ContainerEnded):
            self.tasks[d.task].container_ended_at = d.at
        elif isinstance(d, ContainersPolled):
            self.containers = dict(d.containers)
        elif isinstance(d, Launched):
            task = self.tasks[d.task]
            task.container_id = d.container_id
            if d.requested_at is not None:
                task.requested_at = d.requested_at
            self.note(task, d.note, quiet=d.quiet)
        elif isinstance(d, Relaunching):
            task = self.tasks[d.task]
            task.retiring = None
            self.relaunch.discard(task)
            self.mark(task, TaskState.REQUESTED, f"attempt {task.attempt}")
            # A gang give-back's new request still counts from the formation's start.
            since, task.waiting_since = task.waiting_since, None
            task.requested_at = d.now if since is None else since
        elif isinstance(d, NotRelaunched):
            task = self.tasks[d.task]
            self.relaunch.discard(task)
            self.mark(task, TaskState.KILLED, d.reason)
        elif isinstance(d, RetireKilled):
            task = self.tasks[d.task]
            task.retire_killed = True
            task.retire_by = d.by
        elif isinstance(d, RestartsSaving):
            self.restarts_unsaved = False
        elif isinstance(d, Ended):
            self.diagnostics = d.diagnostics
        elif isinstance(d, ServingAt):
            self.master_address = d.address
        elif isinstance(d, Warn):
            self.warnings.append(d.text)
        elif isinstance(d, TokenStatus):
            self.hdfs_tokens = dict(d.status)
            self.publisher.dirty = True
        elif isinstance(d, FailureHint):
            self.failure_hint = d.hint
        else:
            raise TypeError(f"not a decision the job carries out: {d!r}")

    def _queue_relaunch(self, task: Task, grace: float, retiring: str | None) -> None:
        """Leave the task's container behind: the reconcile loop kills it if
        still alive after ``grace`` seconds, then asks YARN for a new one."""
        task.retiring = retiring
        task.retire_by = self.clock() + grace
        task.retire_killed = False
        task.in_place_stop = None
        task.container_id = task.yarn_container_id = task.node = None
        self.relaunch.add(task)
        self.poke()

    def _resize(self, num_worker: int, reason: str) -> None:
        """The next generation with ``num_worker`` workers (am/resize.py)."""
        if self.settled:
            return  # a stop or the lead's end came meanwhile
        before = self.spec.count(Role.WORKER)
        if num_worker == before:
            return
        resizer = self.resizer
        resizer.resized(reason)
        self.restarts_unsaved = True
        spec = resized(self.spec, num_worker)
        self.spec = spec
        for index in range(num_worker, before):
            self._remove_worker(self.tasks.pop((Role.WORKER, index)), reason)
        # Workers standing by for these indexes join with their containers.
        resizer.standby -= {t for t in resizer.standby if t.index < num_worker}
        self.restart_cluster(reason)
        added = {}
        for index in range(before, num_worker):
            if (Role.WORKER, index) not in self.tasks:
                added[(Role.WORKER, index)] = self._new_worker(index, reason)
        # In launch order: TensorFlow's worker i is the i-th of the list.
        tasks = {k: self.tasks.get(k) or added[k] for k in spec.task_keys()}
        tasks.update({(t.role, t.index): t for t in resizer.standby})
        self.tasks = tasks
        self.cluster_members = tuple(
            t for t in self.tasks.values() if t.role.in_cluster_spec()
        )
        self.unregistered = set(self.cluster_members)
        self.poke()

    def _remove_worker(self, task: Task, reason: str) -> None:
        """A worker beyond the new size: its runtime ends for good."""
        grace = self.spec.stop_grace
        event = stop_event(f"{task.key} removed: {reason}", grace)
        task.tell_stop(event)
        task.watchers.clear()
        # Its calls are answered with this final Stop (am/attempts.py), not
        # refused, until its container ends; a later attempt number keeps a
        # late registration out.
        task.attempt += 1
        task.in_place_stop = event
        self.relaunch.discard(task)
        self.note(task, f"removed: {reason}")
        kill_by = self.clock() + (0 if task.retiring else grace + KILL_MARGIN)
        self.resizer.leave(task, kill_by)

    def _new_worker(self, index: int, reason: str) -> Task:
        """A worker a resize adds: a new container, its attempt after any
        earlier worker of that index (whose late calls are then refused)."""
        earlier = self.resizer.earlier_attempt(index)
        attempt = earlier + 1 if earlier is not None else 0
        # A new record, not a move: it begins where every later attempt does.
        task = Task(role=Role.WORKER, index=index, attempt=attempt, state=NEW_ATTEMPT)
        self.note(task, f"{NEW_ATTEMPT.value}: added: {reason}")
        self.relaunch.add(task)
        return task

    # -- what deciders read besides the state's own fields (am/view.py) ---------------

    @property
    def draining(self) -> bool:
        return self.notices.active

    @property
    def standby(self) -> Collection[Task]:
        return self.resizer.standby

    @property
    def gang_gave_back(self) -> int:
        return self.gang.gave_back

    def gpu_trouble(self) -> str:
        return self.gpus.trouble()

    def lease_view(self, now: float) -> LeaseView:
        return self.lease.view(now, settled=self.settled)

    # -- what the reconcile loop calls too ---------------------------------------------

    def request_stop(
        self, task: Task, reason: str, *, grace: float | None = None
    ) -> None:
        """Tell a task to stop (Stop on its streams); the loop kills it if it does not."""
        if task.state.is_terminal() or task.stop_requested_at is not None:
            return
        task.stop_requested_at = self.clock()
        task.stop_grace = self.spec.stop_grace if grace is None else grace
        task.stop_reason = reason
        self.note(task, f"stop requested: {reason}")
        if task.tell_stop(stop_event(reason, task.stop_grace)):
            task.stop_delivered = True
        self.poke()

    def mark(
        self, task: Task, state: TaskState, note: str, *, quiet: bool = False
    ) -> None:
        """Put a task in ``state``, noting why in its history.

        Raises
        ------
        IllegalTransition
            If am/transitions.py's table does not allow the move within the
            task's attempt (an ended attempt's state is never left).
        """
        check_task_move(task.key, task.state, state)
        self._enter(task, state, note, quiet=quiet)

    def _enter(
        self, task: Task, state: TaskState, note: str, *, quiet: bool = False
    ) -> None:
        task.state = state
        self.note(task, f"{state.value}: {note}", quiet=quiet)

    def note(self, task: Task, text: str, *, quiet: bool = False) -> None:
        """Add to the task's history; also log it unless a summary line says it."""
        task.history.append(f"{self._stamp()} {text}")
        self.publisher.dirty = True
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

    def poke(self) -> None:
        """Wake the reconcile loop: something it acts on changed."""
        self.wakeup.set()
