"""Gang allocation (am/gang.py): a forming cluster short of containers gives them back.

The decision as a table, the pause's bounds, and the master with YARN faked:
what it kills, when it asks again, what it publishes, and where it does not
apply (a single task's replacement, nothing held, too late, switched off).
"""

from __future__ import annotations

import json
import random

import pytest
from _am_support import job
from _state_support import Clock, register, run

from am.gang import MAX_PAUSE, MIN_PAUSE, Decision, decide, pause, pause_ceiling
from am.launcher import FakeLauncher
from am.state import JobState
from tfyarn._proto import master_pb2 as pb
from tfyarn.contract.status import STATUS_KEY, JobStatus, Phase, TaskState
from tfyarn.spec import Role

WAIT, GIVE_BACK, HOLD = Decision.WAIT, Decision.GIVE_BACK, Decision.HOLD

# waited, allocation_timeout, waiting, holding, time_left, rounds, expected
CASES = [
    (5, 10, 1, 2, 280, 0, WAIT),  # within the bound
    (10, 10, 1, 2, 280, 0, GIVE_BACK),  # at the bound, part held
    (11, 10, 3, 0, 280, 0, WAIT),  # nothing held: no one waits on us
    (11, 10, 0, 3, 280, 0, WAIT),  # everything granted
    (500, 0, 1, 2, 280, 0, WAIT),  # switched off
    (11, 10, 1, 2, 19, 0, HOLD),  # pause (<= 10) + a round (10) do not fit
    (11, 10, 1, 2, 20, 0, GIVE_BACK),  # they just fit
    (11, 10, 1, 2, 49, 2, HOLD),  # third round: pause up to 40 s + 10
    (11, 10, 1, 2, 50, 1, GIVE_BACK),  # second round: pause up to 20 s + 10
]


@pytest.mark.parametrize(
    ("waited", "bound", "waiting", "holding", "left", "rounds", "expected"), CASES
)
def test_each_situation_gets_its_decision(
    waited: float,
    bound: float,
    waiting: int,
    holding: int,
    left: float,
    rounds: int,
    expected: Decision,
) -> None:
    got = decide(
        waited=waited,
        allocation_timeout=bound,
        waiting=waiting,
        holding=holding,
        time_left=left,
        rounds=rounds,
    )
    assert got is expected


def test_the_pause_grows_is_jittered_and_bounded() -> None:
    assert [pause_ceiling(n, 10) for n in range(4)] == [10, 20, 40, 80]
    assert pause_ceiling(20, 10) == MAX_PAUSE
    assert pause_ceiling(0, 0.1) == MIN_PAUSE
    rng = random.Random(7)
    for rounds in range(6):
        pauses = [pause(rounds, 10, rng) for _ in range(200)]
        assert all(MIN_PAUSE <= p <= pause_ceiling(rounds, 10) for p in pauses)
        assert len({round(p, 3) for p in pauses}) > 150  # jittered, not fixed
    # Two jobs with the same history pause differently.
    assert pause(0, 10, random.Random(1)) != pause(0, 10, random.Random(2))


def phase(state: JobState) -> Phase:
    # Read through a call: mypy would narrow state.phase after one assert.
    return state.phase


def register_attempt(
    state: JobState, role: str, index: int, *, attempt: int, port: int
) -> None:
    key = pb.TaskKey(role=role, index=index)
    state.register(
        pb.RegisterTaskRequest(task=key, attempt=attempt, host="h", port=port)
    )


async def step(state: JobState, clock: Clock, seconds: float) -> None:
    clock.now += seconds
    await state.reconcile_once()


def test_a_cluster_short_of_containers_gives_them_back_and_asks_again() -> None:
    spec = job(tasks={"worker": 3}, allocation_timeout=10, registration_timeout=300)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        state.gang.rng = random.Random(3)
        started = clock.now
        launcher.grant("worker_0")
        launcher.grant("worker_1")
        await step(state, clock, 1)
        register(state, "worker", 0, 2000)  # one even registered
        await step(state, clock, 5)
        assert launcher.killed == [] and phase(state) is Phase.REGISTERING
        await step(state, clock, 5)  # 11 s: the bound passed
        assert phase(state) is Phase.WAITING_FOR_RESOURCES
        # Every container held is released and the pending request cancelled.
        assert sorted(launcher.killed) == ["worker_0", "worker_1", "worker_2"]
        for task in state.tasks.values():
            assert task.state is TaskState.RELAUNCHING and task.attempt == 1
            assert "gang allocation: YARN granted 2 of 3" in task.history[-2]
        published = JobStatus.from_json(launcher.kv[STATUS_KEY])
        assert published.phase is Phase.WAITING_FOR_RESOURCES
        relaunch_at = state.tasks[(Role.WORKER, 0)].relaunch_at
        assert clock.now + MIN_PAUSE <= relaunch_at <= clock.now + 10
        await step(state, clock, relaunch_at - clock.now - 0.5)
        assert len(launcher.launched) == 3  # not yet: the pause runs
        await step(state, clock, 1)
        new = launcher.started  # the declared three are not among them
        assert [cid for cid, _ in new] == ["worker_3", "worker_4", "worker_5"]
        assert all(env["TFYARN_ATTEMPT"] == "1" for _, env in new)
        assert all("TFYARN_PORT" not in env for _, env in new)  # nothing to keep
        # The registration timeout still counts from the first request.
        assert {t.requested_at for t in state.tasks.values()} == {started}
        await step(state, clock, 1)
        assert phase(state) is Phase.REGISTERING
        for cid in ("worker_3", "worker_4", "worker_5"):
            launcher.grant(cid)
        for n in range(3):
            register_attempt(state, "worker", n, attempt=1, port=3000 + n)
        assert state.formed and phase(state) is Phase.RUNNING
        await step(state, clock, 1)
        assert state.gang.rounds == 0  # a later formation starts from a short pause
        state.task_end("worker", 0, 1, 0, "")
        state.task_end("worker", 1, 1, 0, "")
        state.task_end("worker", 2, 1, 0, "")

    state, launcher = run(spec, scenario)
    assert phase(state) is Phase.SUCCEEDED
    assert launcher.final is not None
    assert "gave back its containers 1 time(s)" in launcher.final[1]
    assert json.loads(launcher.kv[STATUS_KEY])["phase"] == "SUCCEEDED"


@pytest.mark.parametrize(
    ("granted", "options", "why"),
    [
        (0, {"allocation_timeout": 10}, "nothing held"),
        (2, {"allocation_timeout": 0}, "switched off"),
        # A second round would not end before the registration timeout.
        (2, {"allocation_timeout": 10, "registration_timeout": 25}, "too late"),
    ],
)
def test_a_cluster_keeps_what_it_holds(
    granted: int, options: dict[str, float], why: str
) -> None:
    spec = job(tasks={"worker": 3}, **options)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        for n in range(granted):
            launcher.grant(f"worker_{n}")
        for _ in range(5):
            await step(state, clock, 4)  # 20 s, twice the bound
        assert launcher.killed == [], why
        assert phase(state) is Phase.REGISTERING, why
        assert state.gang.gave_back == 0, why
        state.request_kill("test over")

    run(spec, scenario)


def test_a_single_task_replacement_is_not_a_gang() -> None:
    # A worker of a ParameterServerStrategy job is replaced alone; its new
    # container may wait for YARN as long as the registration timeout allows.
    spec = job(
        tasks={"chief": 1, "ps": 1, "worker": 2},
        allocation_timeout=10,
        registration_timeout=300,
        max_restarts=3,
        stop_grace=1,
    )

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        for cid in list(launcher.containers):
            launcher.grant(cid)
        for n, (role, index) in enumerate(state.spec.task_keys()):
            register(state, role.value, index, 2000 + n)
        assert state.formed
        launcher.end("worker_1", "FAILED")  # lost: a new container
        for _ in range(5):  # 20 s, past the bound (and within heartbeats' 30 s)
            await step(state, clock, 4)
        worker = state.tasks[(Role.WORKER, 1)]
        assert worker.state is TaskState.REQUESTED and worker.attempt == 1
        assert launcher.killed == []
        assert phase(state) is Phase.RUNNING and state.gang.gave_back == 0
        state.request_kill("test over")

    run(spec, scenario)


def test_a_cluster_restart_is_a_formation_too() -> None:
    spec = job(
        tasks={"worker": 2},
        allocation_timeout=10,
        registration_timeout=300,
        max_restarts=3,
        stop_grace=1,
    )

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        for cid in list(launcher.containers):
            launcher.grant(cid)
        register(state, "worker", 0, 2000)
        register(state, "worker", 1, 2001)
        assert state.formed
        # An all-reduce worker fails: the whole cluster restarts.
        state.task_end("worker", 1, 0, 1, "boom")
        launcher.end("worker_1", "FAILED")
        while len(launcher.launched) < 4:
            await step(state, clock, 1)
        assert phase(state) is Phase.RESTARTING
        launcher.grant("worker_2")  # worker:0's new container; worker:1 waits
        killed = len(launcher.killed)
        for _ in range(12):
            await step(state, clock, 1)
        assert phase(state) is Phase.WAITING_FOR_RESOURCES
        assert set(launcher.killed[killed:]) == {"worker_2", "worker_3"}
        assert state.gang.gave_back == 1
        for _ in range(25):  # the pause (<= 10 s), then a new round
            await step(state, clock, 1)
        assert phase(state) is Phase.RESTARTING  # back to forming, not RUNNING
        assert len(launcher.launched) == 6
        state.request_kill("test over")

    run(spec, scenario)
