"""The job's phase and a task's state move only as am/transitions.py's tables allow.

The expected moves are written out here, apart from the tables, so a changed
table fails a test until this list is changed too. Every pair of phases (and
of task states) is tried through the job itself: allowed moves are made,
every other one is refused and leaves nothing changed, and a terminal phase
or state is never left. Then gang allocation and the reconcile loop: they
return what the job should do, and the job moves its own phase.
"""

from __future__ import annotations

import asyncio
import itertools

import pytest
from _am_support import job
from _state_support import Clock

from am.gang import MIN_PAUSE, Step
from am.launcher import FakeLauncher
from am.state import IllegalTransition, JobState
from am.transitions import NEW_ATTEMPT, PHASE_MOVES, TASK_MOVES
from tfyarn.contract.status import Phase, TaskState
from tfyarn.spec import JobSpec, Role

TERMINAL = "SUCCEEDED FAILED KILLED"

EXPECTED_PHASE_MOVES = {
    "LAUNCHING": "REGISTERING RUNNING RESTARTING STOPPING FAILED KILLED",
    "REGISTERING": "RUNNING RESTARTING WAITING_FOR_RESOURCES STOPPING FAILED KILLED",
    "WAITING_FOR_RESOURCES": "REGISTERING RESTARTING RUNNING STOPPING FAILED KILLED",
    "RUNNING": "FINISHING RESTARTING STOPPING FAILED KILLED",
    "RESTARTING": "RESTARTING RUNNING WAITING_FOR_RESOURCES STOPPING FAILED KILLED",
    "FINISHING": "SUCCEEDED STOPPING FAILED KILLED",
    "STOPPING": "STOPPING SUCCEEDED FAILED KILLED",
    "SUCCEEDED": "",
    "FAILED": "",
    "KILLED": "",
}

EXPECTED_TASK_MOVES = {
    "REQUESTED": "ALLOCATED REGISTERED SUCCEEDED FAILED KILLED LOST",
    "ALLOCATED": "REGISTERED SUCCEEDED FAILED KILLED LOST",
    "REGISTERED": "RUNNING SUCCEEDED FAILED KILLED LOST",
    "RUNNING": "SUCCEEDED FAILED KILLED LOST",
    "RELAUNCHING": "REQUESTED REGISTERED SUCCEEDED FAILED KILLED",
    "SUCCEEDED": "",
    "FAILED": "",
    "KILLED": "",
    "LOST": "",
}


def new_state(spec: JobSpec | None = None) -> JobState:
    return JobState(spec or job(tasks={"worker": 2}), FakeLauncher(), clock=Clock())


def put(state: JobState, phase: Phase) -> None:
    """Place the job in ``phase`` without a move (only tests do this)."""
    state._phase = phase


def test_the_tables_are_the_expected_ones_and_cover_everything() -> None:
    assert {p.value: {t.value for t in moves} for p, moves in PHASE_MOVES.items()} == {
        p: set(moves.split()) for p, moves in EXPECTED_PHASE_MOVES.items()
    }
    assert {s.value: {t.value for t in moves} for s, moves in TASK_MOVES.items()} == {
        s: set(moves.split()) for s, moves in EXPECTED_TASK_MOVES.items()
    }
    assert set(PHASE_MOVES) == set(Phase) and set(TASK_MOVES) == set(TaskState)


@pytest.mark.parametrize(
    ("current", "target"), list(itertools.product(Phase, Phase)), ids=str
)
def test_each_phase_move_is_made_or_refused_as_listed(
    current: Phase, target: Phase
) -> None:
    state = new_state()
    put(state, current)
    if target.value in EXPECTED_PHASE_MOVES[current.value].split():
        state.move_to(target)
        assert state.phase is target
        return
    with pytest.raises(IllegalTransition) as refused:
        state.move_to(target)
    assert state.phase is current  # nothing moved
    assert (refused.value.current, refused.value.target) == (current, target)
    assert f"from {current.value} to {target.value}" in str(refused.value)


@pytest.mark.parametrize("terminal", [Phase(p) for p in TERMINAL.split()], ids=str)
def test_a_terminal_phase_is_never_left(terminal: Phase) -> None:
    assert terminal.is_terminal()
    state = new_state()
    put(state, terminal)
    for target in Phase:
        with pytest.raises(IllegalTransition, match="none, it is terminal"):
            state.move_to(target)
    assert state.phase is terminal


def test_the_phase_is_not_assigned_but_moved() -> None:
    state = new_state()
    with pytest.raises(AttributeError):
        setattr(state, "phase", Phase.RUNNING)  # noqa: B010 (typed code cannot say it)
    assert state.phase is Phase.LAUNCHING


@pytest.mark.parametrize(
    ("current", "target"), list(itertools.product(TaskState, TaskState)), ids=str
)
def test_each_task_state_move_is_made_or_refused_as_listed(
    current: TaskState, target: TaskState
) -> None:
    state = new_state()
    task = state.tasks[(Role.WORKER, 0)]
    task.state = current
    history = list(task.history)
    if target.value in EXPECTED_TASK_MOVES[current.value].split():
        state.mark(task, target, "test")
        assert task.state is target
        assert task.history[-1].endswith(f"{target.value}: test")
        return
    with pytest.raises(IllegalTransition) as refused:
        state.mark(task, target, "test")
    assert task.state is current and task.history == history  # nothing moved
    assert refused.value.subject == "task worker:0"
    assert f"from {current.value} to {target.value}" in str(refused.value)


@pytest.mark.parametrize("ended", [s for s in TaskState if s.is_terminal()], ids=str)
def test_an_ended_attempt_never_leaves_its_state(ended: TaskState) -> None:
    state = new_state()
    task = state.tasks[(Role.WORKER, 1)]
    task.state = ended
    for target in TaskState:
        with pytest.raises(IllegalTransition):
            state.mark(task, target, "test")
    assert task.state is ended


@pytest.mark.parametrize("last", list(TaskState), ids=str)
def test_only_a_new_attempt_enters_relaunching_whatever_the_last_one_did(
    last: TaskState,
) -> None:
    state = new_state()
    task = state.tasks[(Role.WORKER, 0)]
    task.state = last
    with pytest.raises(IllegalTransition):
        state.mark(task, NEW_ATTEMPT, "no new attempt")
    state.next_attempt(task, "replaced")
    assert task.state is TaskState.RELAUNCHING and task.attempt == 1
    assert task.history[-1].endswith("RELAUNCHING: replaced")


# -- gang allocation returns a step; the job moves ------------------------------


def forming_state(**options: float) -> tuple[JobState, Clock]:
    """Three workers asked for, two of them granted; the job REGISTERING."""
    clock = Clock()
    spec = job(tasks={"worker": 3}, **options)
    state = JobState(spec, FakeLauncher(), clock=clock)
    asyncio.run(state.start())
    assert state.phase is Phase.REGISTERING
    for index in (0, 1):
        state.mark(state.tasks[(Role.WORKER, index)], TaskState.ALLOCATED, "granted")
    return state, clock


def test_gang_returns_a_give_back_and_the_resumed_phase_moving_nothing() -> None:
    state, clock = forming_state(allocation_timeout=10, registration_timeout=300)
    start = clock.now
    assert state.gang.check(state, start) is None  # the round starts
    assert state.gang.check(state, start + 5) is None  # within the bound
    step = state.gang.check(state, start + 11)
    assert step is not None
    assert step.phase is Phase.WAITING_FOR_RESOURCES
    assert step.give_back == tuple((t.role, t.index) for t in state.cluster_members)
    assert "YARN granted 2 of 3 containers" in step.reason
    assert start + 11 + MIN_PAUSE <= step.relaunch_at <= start + 11 + 10
    # Nothing applied by the gang itself.
    assert state.phase is Phase.REGISTERING
    assert all(t.attempt == 0 for t in state.tasks.values())

    state.move_to(step.phase)
    state.give_back(step.give_back, step.reason, relaunch_at=step.relaunch_at)
    # The pause runs (members relaunching): nothing to do.
    assert state.gang.check(state, start + 12) is None
    for task in state.cluster_members:
        state.mark(task, TaskState.REQUESTED, "asked again")
    assert state.gang.check(state, start + 30) == Step(phase=Phase.REGISTERING)
    assert state.phase is Phase.WAITING_FOR_RESOURCES


def test_check_gang_applies_the_step_through_the_table() -> None:
    state, clock = forming_state(allocation_timeout=10, registration_timeout=300)
    state.check_gang(clock.now)
    state.check_gang(clock.now + 11)
    assert state.phase is Phase.WAITING_FOR_RESOURCES
    assert {t.state for t in state.cluster_members} == {TaskState.RELAUNCHING}


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"allocation_timeout": 0}, "switched off"),
        ({"allocation_timeout": 10, "registration_timeout": 25}, "too late: hold"),
    ],
)
def test_gang_returns_nothing_when_it_keeps_what_it_holds(
    options: dict[str, float], why: str
) -> None:
    state, clock = forming_state(**options)
    for seconds in (0, 11, 20):
        assert state.gang.check(state, clock.now + seconds) is None, why


def test_gang_returns_nothing_once_the_job_is_ending() -> None:
    state, clock = forming_state(allocation_timeout=10, registration_timeout=300)
    state.gang.check(state, clock.now)
    state.stop_job("tfyarn kill", 1)
    assert state.gang.check(state, clock.now + 11) is None
    assert state.phase is Phase.STOPPING


# -- the reconcile loop returns the outcome; the job moves ----------------------


def test_the_reconcile_loop_leaves_the_phase_to_the_job() -> None:
    async def main() -> None:
        state = new_state()
        await state.reconciler.start()
        assert state.phase is Phase.LAUNCHING  # asked for, not moved
        state.request_kill("the application master received SIGTERM")
        outcome = await state.reconciler.until_decided()
        assert outcome == (Phase.KILLED, "the application master received SIGTERM")
        assert state.phase is Phase.LAUNCHING  # decided, not moved

    asyncio.run(main())


def test_the_job_enters_the_phase_the_loop_decided() -> None:
    async def main() -> None:
        state = new_state()
        await state.start()
        assert state.phase is Phase.REGISTERING
        state.request_kill("test over")
        phase, _ = await asyncio.wait_for(state.until_done(), 5)
        assert phase is Phase.KILLED and state.phase is Phase.KILLED

    asyncio.run(main())
