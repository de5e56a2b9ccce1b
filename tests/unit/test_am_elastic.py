"""--min_worker in the master: fewer workers while YARN cannot give them, back after."""

from __future__ import annotations

from _am_support import job
from _state_support import Clock, form, register, reregister, run, tick
from test_am_notice import kinds, queued

from am.elastic import DEFAULT_SHRINK_AFTER, shrink_bound
from am.launcher import FakeLauncher
from am.state import JobState
from tfyarn.client.narrator import describe_task
from tfyarn.contract.status import JobStatus, Phase, TaskState
from tfyarn.spec import Role


def started(launcher: FakeLauncher) -> list[str]:
    return [cid for cid, _ in launcher.started]


async def lose(state: JobState, launcher: FakeLauncher, clock: Clock, cid: str) -> None:
    """The container ends without a report: lost, after END_REPORT_GRACE."""
    launcher.end(cid, "FAILED", "node lost")
    for _ in range(5):
        await tick(state, clock)


def test_the_bound_is_the_allocation_timeout_or_a_minute() -> None:
    assert shrink_bound(20.0) == 20.0
    assert shrink_bound(0.0) == DEFAULT_SHRINK_AFTER == 60.0


def test_a_lost_worker_yarn_cannot_give_back_shrinks_the_job_then_it_grows_back() -> (
    None
):
    spec = job(
        tasks={"worker": 3},
        min_worker=2,
        max_restarts=1,
        allocation_timeout=20,
        stop_grace=2,
    )

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        await lose(state, launcher, clock, "worker_1")
        assert state.cluster_restarts == 1 and state.budget_used == 1
        for i in (0, 2):  # the survivors, in place
            reregister(state, "worker", i, 1, ports[f"worker:{i}"])
        assert started(launcher) == ["worker_3"]  # worker:1's new container ...
        for _ in range(21):  # ... which YARN does not grant
            await tick(state, clock)
        # Shrunk to 2: worker:2 leaves (its container frees room), worker:1
        # keeps its index and asks again.
        assert state.resizer.resizes == 1
        assert "worker:1 got no container within 20 s" in state.resizer.reasons[0]
        assert (
            "going on with 2 of 3 worker(s) (min_worker=2)" in state.resizer.reasons[0]
        )
        assert state.spec.count(Role.WORKER) == 2
        assert (Role.WORKER, 2) not in state.tasks
        assert state.budget_used == 1  # the resize is not charged
        await tick(state, clock)
        assert "worker_3" in launcher.killed  # the old request, cancelled
        assert started(launcher)[-1] == "worker_4"
        launcher.grant("worker_4")
        worker_1 = state.tasks[(Role.WORKER, 1)]
        reregister(state, "worker", 0, 2, ports["worker:0"])
        register(state, "worker", 1, 4001, attempt=worker_1.attempt)
        assert state.phase is Phase.RUNNING
        assert len(state.cluster()["worker"]) == 2
        # Running smaller: worker:2 is asked for again, standing by.
        await tick(state, clock)
        standby = state.tasks[(Role.WORKER, 2)]
        assert standby in state.resizer.standby
        assert standby not in state.cluster_members
        shown = JobStatus.from_dict(state.snapshot()).task("worker:2")
        assert shown is not None and shown.standby
        assert shown.shown_state() == "REQUESTED (standby)"
        assert describe_task(shown).startswith("worker:2 REQUESTED (standby)")
        assert started(launcher)[-1] == "worker_5"
        launcher.grant("worker_5")
        register(state, "worker", 2, 4002, attempt=standby.attempt)
        stream = state.watch("worker", 2, standby.attempt, known=0)
        assert queued(stream) == []  # it gets no cluster it is not in
        assert standby.state is TaskState.REGISTERED
        await tick(state, clock)
        # Back to 3 workers: nobody heeds notices, so no wait.
        assert state.resizer.resizes == 2
        assert "back to 3 of 3 worker(s)" in state.resizer.reasons[1]
        assert standby not in state.resizer.standby
        assert kinds(queued(stream))[-1] == "stop"  # it restarts in place, as a member
        assert state.phase is Phase.RESTARTING
        reregister(state, "worker", 0, 3, ports["worker:0"])
        reregister(state, "worker", 1, worker_1.attempt, 4001)
        reregister(state, "worker", 2, standby.attempt, 4002)
        assert state.phase is Phase.RUNNING and len(state.cluster()["worker"]) == 3
        state.task_end("worker", 0, 3, 0, "")
        clock.now += 60
        await state.reconcile_once()

    state, _ = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED, state.diagnostics
    assert state.budget_used == 1 and state.resizer.resizes == 2


def test_the_job_never_shrinks_below_min_worker() -> None:
    spec = job(tasks={"worker": 2}, min_worker=2, max_restarts=1, allocation_timeout=0)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        await lose(state, launcher, clock, "worker_1")
        reregister(state, "worker", 0, 1, ports["worker:0"])
        for _ in range(65):  # past the 60 s bound (allocation_timeout 0)
            await tick(state, clock)
        assert state.resizer.resizes == 0 and state.spec.count(Role.WORKER) == 2
        assert state.phase is Phase.RESTARTING  # still waiting for worker:1
        state.request_kill("test over")

    run(spec, scenario)


def test_a_missing_highest_worker_is_simply_dropped() -> None:
    spec = job(tasks={"worker": 3}, min_worker=1, max_restarts=1, allocation_timeout=10)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        await lose(state, launcher, clock, "worker_2")
        for i in (0, 1):
            reregister(state, "worker", i, 1, ports[f"worker:{i}"])
        for _ in range(11):
            await tick(state, clock)
        assert state.spec.count(Role.WORKER) == 2
        await tick(state, clock)
        assert "worker_3" in launcher.killed  # its request, cancelled
        for i in (0, 1):
            reregister(state, "worker", i, 2, ports[f"worker:{i}"])
        assert state.phase is Phase.RUNNING
        state.request_kill("test over")

    run(spec, scenario)


def test_a_standby_that_fails_is_dropped_uncharged_and_asked_for_again() -> None:
    spec = job(
        tasks={"worker": 2},
        min_worker=1,
        max_restarts=1,
        allocation_timeout=10,
        registration_timeout=30,
    )

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        await lose(state, launcher, clock, "worker_1")
        reregister(state, "worker", 0, 1, ports["worker:0"])
        for _ in range(11):
            await tick(state, clock)
        reregister(state, "worker", 0, 2, ports["worker:0"])
        assert state.phase is Phase.RUNNING and state.spec.count(Role.WORKER) == 1
        await tick(state, clock)
        standby = state.tasks[(Role.WORKER, 1)]
        assert standby in state.resizer.standby
        cid = started(launcher)[-1]
        # Waiting longer than the registration timeout does not fail the job.
        for _ in range(35):
            state.heartbeat("worker", 0, 2)
            await tick(state, clock)
        assert state.outcome is None
        launcher.grant(cid)
        await lose(state, launcher, clock, cid)
        assert state.budget_used == 1 and state.outcome is None
        assert state.phase is Phase.RUNNING and state.generation == 2  # undisturbed
        again = state.tasks[(Role.WORKER, 1)]
        assert again is not standby and again in state.resizer.standby
        state.request_kill("test over")

    run(spec, scenario)
