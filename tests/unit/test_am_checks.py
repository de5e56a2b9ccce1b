"""The reconcile loop's deciders (am/checks.py) as tables: a view and a time in,
decisions out; and the applier (``JobState.apply``) once, kind by kind."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from am import checks
from am.attempts import Attempts
from am.checks import Account, Held
from am.decisions import (
    AddStandby,
    AskAccount,
    ContainerEnded,
    ContainerSeen,
    ContainersPolled,
    Decision,
    DropStandby,
    Ended,
    Fail,
    Finish,
    GaveBack,
    InPlaceFailed,
    Launched,
    Mark,
    Note,
    NotRelaunched,
    Relaunching,
    RestartInPlace,
    RestartsSaving,
    Retire,
    RetireKilled,
    StallSeen,
    StopTask,
)
from am.launcher import ContainerInfo, FakeLauncher
from am.lease import LeaseView
from am.model import Task
from am.policy import Failure
from am.state import JobState
from am.transitions import IllegalTransition
from tfyarn.contract.status import Phase, TaskState
from tfyarn.spec import JobSpec, Role

NO_LEASE = LeaseView(bound=0, since_start=0, since_renewal=None)
W0 = (Role.WORKER, 0)
W1 = (Role.WORKER, 1)
NOW = 1000.0
SPEC = JobSpec(
    script="t.py",
    tasks={"worker": {"count": 2, "memory_mib": 4096, "gpus": 2}},
    registration_timeout=120,
    heartbeat_interval=5,
    heartbeat_timeout=60,
    stall_timeout=600,
    worker_grace=30,
    stop_grace=10,
)


@dataclass
class View:
    """A job as deciders see it (am/view.py's JobView), made by hand."""

    tasks: dict[tuple[Role, int], Task]
    spec: JobSpec = SPEC
    phase: Phase = Phase.RUNNING
    containers: dict[str, ContainerInfo] = field(default_factory=dict)
    log_each: bool = True
    settled: bool = False
    progress_at: float | None = None
    finishing_since: float | None = None
    stopping_since: float | None = None
    stop_reason: str = ""
    restart_reasons: list[str] = field(default_factory=list)
    draining: bool = False
    standby: set[Task] = field(default_factory=set)
    gang_gave_back: int = 0
    trouble: str = ""
    lease: LeaseView = field(default_factory=lambda: NO_LEASE)

    @property
    def lead(self) -> Task:
        return self.tasks[W0]

    def gpu_trouble(self) -> str:
        return self.trouble

    def lease_view(self, now: float) -> LeaseView:
        return self.lease


def task(index: int = 0, **fields: Any) -> Task:
    return Task(role=Role.WORKER, index=index, container_id=f"worker_{index}", **fields)


def view(*tasks: Task, **fields: Any) -> View:
    return View(tasks={(t.role, t.index): t for t in tasks}, **fields)


def running(index: int = 0, **fields: Any) -> Task:
    return task(
        index, **{"state": TaskState.RUNNING, "last_heartbeat": NOW - 1, **fields}
    )


# -- silent: a registered task without heartbeats ----------------------------------

SILENT_MESSAGE = (
    "worker:0 (attempt 0) sent no heartbeat for 61 s (limit 60 s): its process "
    "is wedged or its node or network is gone"
)


@pytest.mark.parametrize(
    ("the_task", "expected"),
    [
        (running(), []),
        (running(last_heartbeat=NOW - 60), []),
        (
            running(last_heartbeat=NOW - 61),
            [
                Mark(W0, TaskState.LOST, "no heartbeat for 61 s"),
                Fail(W0, SILENT_MESSAGE, Failure.SILENT),
            ],
        ),
        (running(last_heartbeat=NOW - 61, stop_requested_at=NOW - 70), []),
        (task(state=TaskState.ALLOCATED, last_heartbeat=NOW - 61), []),
        (running(last_heartbeat=None), []),
    ],
    ids=[
        "beating",
        "at the limit",
        "silent",
        "told to stop",
        "not registered",
        "never",
    ],
)
def test_silent(the_task: Task, expected: list[Decision]) -> None:
    v = view(the_task)
    assert checks.silence_limit(v) == 60
    assert checks.silent(v, the_task, NOW, 60) == expected


# -- registration ---------------------------------------------------------------


def test_registration_names_what_the_late_tasks_wait_for() -> None:
    late = task(0, state=TaskState.REQUESTED, requested_at=NOW - 121)
    got = task(1, state=TaskState.ALLOCATED, requested_at=NOW - 121)
    containers = {
        "worker_1": ContainerInfo("worker_1", "RUNNING", "container_01", "n1:8042")
    }
    v = view(late, got, containers=containers, gang_gave_back=2, trouble="n2: boom")
    waiting = (
        "worker:0 waiting for a container of 4096 MiB, 1 vcores, 2 GPUs; not "
        "granted after 121 s (the cluster may not have these resources free, or "
        "at all; GPUs fail on n2: boom)"
    )
    registered_not = (
        "worker:1 got container container_01 on n1 but did not register after "
        "121 s (see that container's log: did the tfyarn runtime start?)"
    )
    assert checks.registration(v, NOW) == [
        Mark(W0, TaskState.LOST, "not registered after 120 s"),
        Mark(W1, TaskState.LOST, "not registered after 120 s"),
        Fail(
            W0,
            "2 task(s) did not register within the registration timeout of 120 s: "
            f"{waiting}; {registered_not} (gang allocation gave back the cluster's "
            "containers 2 time(s) meanwhile, waiting for resources)",
            Failure.UNREGISTERED,
        ),
    ]


@pytest.mark.parametrize(
    "fields",
    [
        {"requested_at": NOW - 120},  # within the timeout
        {"requested_at": NOW - 121, "stop_requested_at": NOW},  # being stopped
        {"requested_at": NOW - 121, "state": TaskState.RELAUNCHING},
    ],
)
def test_registration_leaves_be(fields: dict[str, Any]) -> None:
    the_task = task(**{"state": TaskState.REQUESTED, **fields})
    assert checks.registration(view(the_task), NOW) == []


def test_a_standby_worker_waits_as_long_as_it_takes() -> None:
    standby = task(state=TaskState.REQUESTED, requested_at=0.0)
    assert checks.registration(view(standby, standby={standby}), NOW) == []


# -- stall ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "stalls"),
    [
        ({"progress_at": NOW - 601}, True),
        ({"progress_at": NOW - 600}, False),
        ({"progress_at": None}, False),
        ({"progress_at": NOW - 601, "phase": Phase.RESTARTING}, False),
        ({"progress_at": NOW - 601, "draining": True}, False),
        ({"progress_at": NOW - 601, "spec": replace(SPEC, stall_timeout=0)}, False),
    ],
)
def test_stall(fields: dict[str, Any], stalls: bool) -> None:
    lead = running(0, step=7, last_progress=NOW - 700)
    other = running(1)
    expected = [
        StallSeen(),
        Fail(
            W0,
            "the job stalled: no task reported training progress for 601 s "
            "(stall_timeout 600 s): worker:0 at step 7 for 700 s; worker:1 never "
            "reported progress",
            Failure.STALL,
        ),
    ]
    assert checks.stall(view(lead, other, **fields), NOW) == (
        expected if stalls else []
    )


# -- a task's container ------------------------------------------------------------


def info(state: str, message: str = "") -> dict[str, ContainerInfo]:
    return {"worker_0": ContainerInfo("worker_0", state, "c_0", "n1:8042", message)}


LOST = (
    "worker:0 (attempt 0, c_0, on n1) was lost: its container ended FAILED "
    "without the task reporting an exit code (YARN: {})"
)


@pytest.mark.parametrize(
    ("fields", "containers", "account", "expected"),
    [
        # Granted: its YARN id and node are known, and it is allocated.
        (
            {"state": TaskState.REQUESTED},
            info("RUNNING"),
            None,
            [Mark(W0, TaskState.ALLOCATED, "got c_0 on n1:8042")],
        ),
        # Ended: noted, its NodeManager asked (the runtime may still report).
        (
            {"state": TaskState.RUNNING, "yarn_container_id": "c_0"},
            info("FAILED"),
            None,
            [
                ContainerEnded(W0, NOW),
                AskAccount(info("FAILED")["worker_0"]),
            ],
        ),
        # Ended and told to stop: killed.
        (
            {
                "state": TaskState.RUNNING,
                "yarn_container_id": "c_0",
                "container_ended_at": NOW - 4,
                "stop_requested_at": NOW - 9,
            },
            info("FAILED"),
            None,
            [
                Mark(W0, TaskState.KILLED, "container FAILED"),
            ],
        ),
        # Ended unreported, its account pending: wait for it.
        (
            {
                "state": TaskState.RUNNING,
                "yarn_container_id": "c_0",
                "container_ended_at": NOW - 4,
            },
            info("FAILED", "Exit code: 1"),
            Account(done=False),
            [],
        ),
        # ... and with it: lost, with the NodeManager's words.
        (
            {
                "state": TaskState.RUNNING,
                "yarn_container_id": "c_0",
                "container_ended_at": NOW - 4,
            },
            info("FAILED", "Exit code: 1"),
            Account(done=True, words="oom\nstderr: x"),
            [
                Mark(
                    W0,
                    TaskState.LOST,
                    "container FAILED: Exit code: 1; the NodeManager: oom | stderr: x",
                ),
                Fail(
                    W0,
                    LOST.format("Exit code: 1; the NodeManager: oom | stderr: x"),
                    Failure.LOST,
                ),
            ],
        ),
        # Restarting in place and its container ended: a new container.
        (
            {"state": TaskState.RELAUNCHING, "in_place_stop": b"stop"},
            info("KILLED"),
            None,
            [InPlaceFailed(W0, "its container ended KILLED", None)],
        ),
        (
            {"state": TaskState.RELAUNCHING, "in_place_stop": b"s", "in_place_by": 1},
            info("RUNNING"),
            None,
            [InPlaceFailed(W0, "it did not register again in time", "worker_0")],
        ),
        ({"state": TaskState.SUCCEEDED}, info("FAILED"), None, []),
    ],
    ids=[
        "granted",
        "ended",
        "stopped",
        "account pending",
        "lost",
        "in place ended",
        "in place late",
        "terminal",
    ],
)
def test_watch_container(
    fields: dict[str, Any],
    containers: dict[str, ContainerInfo],
    account: Account | None,
    expected: list[Decision],
) -> None:
    the_task = task(**{"node": "n1:8042", **fields})
    v = view(the_task, containers=containers)
    assert checks.watch_container(v, the_task, NOW, account) == expected


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, [ContainerSeen(W0, "c_0", "n1:8042")]),
        ({"yarn_container_id": "c_0"}, [ContainerSeen(W0, None, "n1:8042")]),
        ({"in_place_stop": b"stop"}, []),
        ({"state": TaskState.FAILED}, []),
    ],
)
def test_container_seen(fields: dict[str, Any], expected: list[Decision]) -> None:
    the_task = running(**fields)
    v = view(the_task, containers=info("RUNNING"))
    assert checks.container_seen(v, the_task) == expected


def test_a_preempted_container_is_a_disruption() -> None:
    the_task = running(yarn_container_id="c_0", container_ended_at=NOW - 4)
    message = "Container preempted by scheduler"
    v = view(the_task, containers=info("KILLED", message))
    decisions = checks.watch_container(v, the_task, NOW)
    assert decisions == [
        Mark(W0, TaskState.LOST, "preempted: container KILLED"),
        checks.disrupted(v, the_task, "preempted", message),
    ]
    fail = decisions[-1]
    assert isinstance(fail, Fail)
    assert (fail.kind, fail.disruption) == (Failure.DISRUPTED, "preempted")


# -- a held SIGTERM failure ----------------------------------------------------------


@pytest.mark.parametrize(
    ("containers", "held", "expected"),
    [
        ({}, Held(0, "exit -15", Failure.SIGNAL, NOW + 1), None),
        (
            {},
            Held(0, "exit -15", Failure.SIGNAL, NOW),
            [Fail(W0, "exit -15", Failure.SIGNAL)],
        ),
        (info("RUNNING"), Held(1, "exit -15", Failure.SIGNAL, NOW + 1), []),
        (
            info("FAILED"),
            Held(0, "exit -15", Failure.SIGNAL, NOW + 1),
            [Fail(W0, "exit -15", Failure.SIGNAL)],
        ),
    ],
    ids=["waiting", "bound passed", "a later attempt", "ended, no word"],
)
def test_judge_held(
    containers: dict[str, ContainerInfo], held: Held, expected: list[Decision] | None
) -> None:
    the_task = running()
    v = view(the_task, containers=containers)
    assert checks.judge_held(v, the_task, held, NOW) == expected


# -- the end ------------------------------------------------------------------------


def test_finishing_stops_the_rest_after_the_grace_then_succeeds() -> None:
    lead = task(0, state=TaskState.SUCCEEDED)
    other = running(1)
    v = view(lead, other, finishing_since=NOW - 31, restart_reasons=["x\ny"])
    why = "worker:0 finished 30 s ago (worker_grace)"
    assert checks.finishing(v, NOW) == [StopTask(W1, why)]
    assert checks.finishing(replace(v, finishing_since=NOW - 30), NOW) == []
    other.state = TaskState.KILLED
    message = (
        "tfyarn: worker:0 finished successfully (1 killed, 1 succeeded); after 1 "
        "restart(s): 1. x"
    )
    assert checks.finishing(v, NOW) == [Finish(Phase.SUCCEEDED, message)]


@pytest.mark.parametrize(
    ("since", "draining", "expected"),
    [
        (NOW - 50, False, []),  # its grace, two kill margins, STOPPED_LINGER
        (NOW - 51, False, [Finish(Phase.KILLED, "bye", end_app=True)]),
        (NOW - 100, True, []),
    ],
)
def test_stopping(since: float, draining: bool, expected: list[Decision]) -> None:
    stopped = running(stop_grace=10.0)
    v = view(stopped, stopping_since=since, stop_reason="bye", draining=draining)
    assert checks.stopping(v, NOW) == expected


def test_an_expired_lease_ends_the_job_killed() -> None:
    lease = LeaseView(bound=60, since_start=500, since_renewal=61)
    [finish] = checks.lease_expiry(view(running(), lease=lease), NOW)
    assert isinstance(finish, Finish)
    assert (finish.phase, finish.end_app) == (Phase.KILLED, True)
    assert "no renewal from its client for 61 s" in finish.diagnostics
    fresh = LeaseView(bound=60, since_start=500, since_renewal=5)
    assert checks.lease_expiry(view(running(), lease=fresh), NOW) == []


# -- the applier, once per kind -------------------------------------------------------


def _state() -> JobState:
    return JobState(SPEC, FakeLauncher(), clock=lambda: NOW, wall=lambda: NOW)


def _applied(
    decisions: list[Decision], prepare: Callable[[JobState], None] = lambda s: None
) -> JobState:
    async def main() -> JobState:
        state = _state()
        prepare(state)
        state.apply(decisions)
        return state

    return asyncio.run(main())


def test_apply_marks_notes_and_records_facts() -> None:
    ended = ContainerInfo("worker_0", "FAILED")
    state = _applied(
        [
            ContainersPolled({"worker_0": ended}),
            Launched(W0, "worker_0", "requested", requested_at=NOW - 5),
            ContainerSeen(W0, "c_0", "n1:8042"),
            Mark(W0, TaskState.ALLOCATED, "got it"),
            ContainerEnded(W0, NOW),
            Note(W0, "hello"),
            StopTask(W1, "enough"),
            RestartsSaving(),
            Ended("over"),
        ]
    )
    w0, w1 = state.tasks[W0], state.tasks[W1]
    assert state.containers == {"worker_0": ended}
    assert (w0.container_id, w0.requested_at) == ("worker_0", NOW - 5)
    assert (w0.yarn_container_id, w0.node) == ("c_0", "n1:8042")
    assert w0.state is TaskState.ALLOCATED
    assert w0.container_ended_at == NOW
    assert [h.split(" ", 1)[1] for h in w0.history] == [
        "requested",
        "ALLOCATED: got it",
        "hello",
    ]
    assert (w1.stop_requested_at, w1.stop_reason) == (NOW, "enough")
    assert (state.restarts_unsaved, state.diagnostics) == (False, "over")


def test_apply_fails_through_the_policy_and_finishes() -> None:
    state = _applied(
        [
            Mark(W0, TaskState.LOST, "gone"),
            Fail(
                W0, "worker:0 was preempted", Failure.DISRUPTED, disruption="preempted"
            ),
            StallSeen(),
            Finish(Phase.KILLED, "done"),
        ],
        prepare=lambda s: setattr(s, "progress_at", NOW),
    )
    assert state.disruption_reasons == ["worker:0 was preempted"]
    assert state.disruption_kinds == {"preempted": 1}
    assert state.progress_at is None
    assert state.outcome == (Phase.KILLED, "done")


def test_apply_relaunches() -> None:
    def prepare(state: JobState) -> None:
        state.next_attempt(state.tasks[W0], "again")
        state.relaunch.add(state.tasks[W0])
        state.relaunch.add(state.tasks[W1])

    state = _applied(
        [
            RetireKilled(W0, NOW + 5),
            Relaunching(W0, NOW),
            NotRelaunched(W1, "not relaunched: the job finished"),
        ],
        prepare,
    )
    w0, w1 = state.tasks[W0], state.tasks[W1]
    assert (w0.retire_killed, w0.retire_by, w0.retiring) == (True, NOW + 5, None)
    assert (w0.state, w0.requested_at) == (TaskState.REQUESTED, NOW)
    assert w1.state is TaskState.KILLED
    assert not state.relaunch


def test_apply_refuses_an_illegal_move_and_what_is_not_its_own() -> None:
    state = _state()
    with pytest.raises(IllegalTransition):
        state.apply([Mark(W0, TaskState.RUNNING, "not registered yet")])
    assert state.tasks[W0].state is TaskState.REQUESTED
    with pytest.raises(TypeError):
        state.apply([AskAccount(ContainerInfo("worker_0", "FAILED"))])


def test_apply_ends_and_begins_attempts() -> None:
    def prepare(state: JobState) -> None:
        state.tasks[W0].container_id = "worker_0"
        state.tasks[W1].container_id = "worker_1"

    state = _applied(
        [
            RestartInPlace(W0, "again", NOW + 45, "restarting in place in worker_0"),
            Retire(W1, "replaced", 15.0, "worker_1"),
            GaveBack(W1, NOW, NOW + 9, NOW - 3),
        ],
        prepare,
    )
    w0, w1 = state.tasks[W0], state.tasks[W1]
    assert (w0.attempt, w0.state) == (1, TaskState.RELAUNCHING)
    assert w0.in_place_stop is not None and w0.in_place_by == NOW + 45
    assert w0.container_id == "worker_0"  # it stays in its container
    assert (w1.attempt, w1.state, w1.container_id) == (1, TaskState.RELAUNCHING, None)
    assert (w1.retiring, w1.retire_by, w1.relaunch_at) == ("worker_1", NOW, NOW + 9)
    assert (w1.waiting_since, w1.host) == (NOW - 3, None)
    assert state.relaunch == {w1}
    state.apply([InPlaceFailed(W0, "late", "worker_0")])
    # Its late registration from the old attempt is refused: one more attempt.
    assert (w0.attempt, w0.retiring, w0.in_place_stop) == (2, "worker_0", None)
    assert state.relaunch == {w0, w1}


@dataclass
class AttemptsView:
    """What am/attempts.py reads of the job."""

    containers: dict[str, ContainerInfo] = field(default_factory=dict)
    spec: JobSpec = SPEC
    clock: Callable[[], float] = lambda: NOW
    resizer: Any = None

    def task(self, role: str, index: int, attempt: int | None = None) -> Task:
        raise AssertionError("not asked here")


@pytest.mark.parametrize(
    ("fields", "alive", "expected"),
    [
        # Registered in a live container: in place, within its grace.
        (
            {"state": TaskState.RUNNING, "last_heartbeat": NOW},
            True,
            RestartInPlace(
                W0,
                "worker:0 restarts: boom",
                NOW + 10 + 5 + 30,
                "restarting in place in worker_0: worker:0 restarts: boom",
            ),
        ),
        # Its container ended: a new one, the old one not waited for.
        (
            {"state": TaskState.RUNNING, "last_heartbeat": NOW},
            False,
            Retire(W0, "worker:0 is replaced: boom", 15.0, None),
        ),
        # Silent: no grace, its container killed at once.
        (
            {"state": TaskState.LOST, "last_heartbeat": NOW - 99},
            True,
            Retire(W0, "worker:0 is replaced: boom", 0, "worker_0"),
        ),
        # Its script failed and the runtime waits for the answer: in place.
        (
            {"state": TaskState.FAILED, "exit_code": 1, "last_heartbeat": NOW},
            True,
            RestartInPlace(
                W0,
                "worker:0 restarts: boom",
                NOW + 45,
                "restarting in place in worker_0: worker:0 restarts: boom",
            ),
        ),
    ],
    ids=["in place", "container gone", "silent", "script failed"],
)
def test_attempts_replace(
    fields: dict[str, Any], alive: bool, expected: Decision
) -> None:
    state = "RUNNING" if alive else "KILLED"
    containers = {"worker_0": ContainerInfo("worker_0", state)}
    attempts = Attempts(AttemptsView(containers))
    assert attempts.replace(task(**fields), "boom") == expected


def test_apply_adds_and_drops_a_standby_worker() -> None:
    w2 = (Role.WORKER, 2)
    state = _applied([AddStandby(2, "grow")])
    added = state.tasks[w2]
    assert (added.state, added.attempt) == (TaskState.RELAUNCHING, 0)
    assert added in state.resizer.standby and added in state.relaunch
    state.apply([DropStandby(w2, "not wanted")])
    assert w2 not in state.tasks and not state.resizer.standby
    assert added not in state.relaunch
    # Its late calls get a final Stop, not a refusal, until its container ends.
    assert (added.attempt, state.resizer.leaving_task("worker", 2)) == (1, added)
