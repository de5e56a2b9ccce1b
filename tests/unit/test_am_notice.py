"""Graceful stops in the master: a stop notice first, the Stops once scripts saved."""

from __future__ import annotations

import functools

from _am_support import job
from _state_support import PS_JOB, Clock, form, reregister, run, tick

from am.launcher import FakeLauncher
from am.model import Watcher
from am.state import JobState
from tfyarn._proto import master_pb2 as pb
from tfyarn.contract.notice import RESTART_CODE
from tfyarn.contract.status import Phase, TaskState
from tfyarn.spec import Role


def queued(watcher: Watcher) -> list[pb.ClusterEvent]:
    """The events waiting on a stream (without waiting for more)."""
    events = []
    queue = watcher._queue
    while not queue.empty():
        raw = queue.get_nowait()
        if raw is not None:
            events.append(pb.ClusterEvent.FromString(raw))
    return events


def kinds(events: list[pb.ClusterEvent]) -> list[str | None]:
    return [e.WhichOneof("event") for e in events]


def test_graceful_kill_waits_for_the_scripts_that_heed_notices() -> None:
    spec = job(tasks=PS_JOB, max_restarts=3, stop_grace=4)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        streams = {key: state.watch(key, 0, 0, known=0) for key in ("chief", "ps")}
        state.heartbeat("chief", 0, 0, heeds_notice=True)  # the coordinator asks
        grace, count = state.stop_job("stopped by tfyarn kill", 0, graceful=True)
        assert (grace, count) == (8, 4)  # the notice's grace, then the Stop's
        assert state.phase is Phase.STOPPING and state.notices.active
        # Everyone hears the notice, nobody a Stop yet: the ps must keep the
        # variables until the chief saved them.
        for watcher in streams.values():
            events = queued(watcher)
            assert kinds(events) == ["cluster_spec", "stop_notice"]
            notice = events[-1].stop_notice
            assert notice.reason == "stopped by tfyarn kill"
            assert notice.grace_seconds == 4 and notice.deadline > 0
        await tick(state, clock)
        assert state.notices.active  # the chief has not saved yet
        assert all(t.stop_requested_at is None for t in state.tasks.values())
        state.task_end("chief", 0, 0, RESTART_CODE, "")  # saved
        chief = state.tasks[(Role.CHIEF, 0)]
        assert chief.state is TaskState.RUNNING  # not a failure: it waits
        await tick(state, clock)
        assert not state.notices.active
        ps = queued(streams["ps"])
        assert kinds(ps) == ["stop"] and ps[0].stop.next_attempt == 0
        assert all(t.stop_requested_at is not None for t in state.tasks.values())
        state.task_end("chief", 0, 0, RESTART_CODE, "")  # its final report
        assert chief.state is TaskState.KILLED
        state.request_kill("test over")

    state, _ = run(spec, scenario)
    assert state.phase is Phase.KILLED
    assert state.restarts == 0 and state.budget_used == 0 and state.failures == []


def test_without_a_script_that_heeds_notices_the_stops_follow_at_once() -> None:
    spec = job(tasks={"worker": 2}, stop_grace=4)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        stream = state.watch("worker", 1, 0, known=0)
        state.stop_job("stopped by tfyarn kill", 0, graceful=True)
        assert not state.notices.active
        assert kinds(queued(stream)) == ["cluster_spec", "stop_notice", "stop"]
        state.request_kill("test over")

    run(spec, scenario)


def test_a_script_still_saving_at_the_deadline_is_stopped() -> None:
    # A grace longer than the master's wait for the client's kill after the
    # Stops (am.checks.STOPPED_LINGER): the notice's wait is not part of it.
    spec = job(tasks={"worker": 2}, stop_grace=60)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        stream = state.watch("worker", 0, 0, known=0)
        state.heartbeat("worker", 0, 0, heeds_notice=True)
        state.stop_job("stopped by tfyarn kill", 0, graceful=True)
        for _ in range(59):
            state.heartbeat("worker", 0, 0, heeds_notice=True)
            state.heartbeat("worker", 1, 0)
            await tick(state, clock)
        assert state.notices.active and "0 of 2" in state.notices.describe()
        assert state.outcome is None  # still waiting for the save
        await tick(state, clock)  # 60 s: the deadline
        assert not state.notices.active
        assert kinds(queued(stream))[-1] == "stop"
        assert all(t.stop_requested_at is not None for t in state.tasks.values())
        state.request_kill("test over")

    run(spec, scenario)


def test_a_restart_on_purpose_waits_for_the_save_and_restarts_in_place() -> None:
    spec = job(tasks={"worker": 2}, max_restarts=0, stop_grace=5)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        streams = [state.watch("worker", i, 0, known=0) for i in (0, 1)]
        for i in (0, 1):
            state.heartbeat("worker", i, 0, heeds_notice=True)
        why = "rebalancing"
        state.notices.begin(why, functools.partial(state.restart_on_purpose, why))
        state.task_end("worker", 0, 0, RESTART_CODE, "")
        await tick(state, clock)
        assert state.notices.active and state.phase is Phase.RUNNING
        # A stream opened again meanwhile hears the notice again.
        again = state.watch("worker", 1, 0, known=1)
        assert kinds(queued(again)) == ["stop_notice"]
        state.task_end("worker", 1, 0, 0, "")  # a custom loop that returned
        assert state.phase is Phase.RUNNING  # not the lead's success
        await tick(state, clock)
        assert state.phase is Phase.RESTARTING and state.cluster_restarts == 1
        for watcher in streams:
            events = queued(watcher)
            assert kinds(events) == ["cluster_spec", "stop_notice", "stop"]
            assert events[-1].stop.next_attempt == 1  # in place
        assert launcher.started == []
        for i in (0, 1):
            reregister(state, "worker", i, 1, ports[f"worker:{i}"])
        assert state.phase is Phase.RUNNING and state.generation == 2
        state.task_end("worker", 0, 1, 0, "")
        clock.now += 60
        await state.reconcile_once()

    state, _ = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED, state.diagnostics
    assert state.budget_used == 0 and state.failures == []  # max_restarts=0 held
    assert state.restart_reasons == ["cluster restarted: rebalancing"]


def test_a_failure_while_draining_is_not_charged() -> None:
    spec = job(tasks={"worker": 2}, max_restarts=0, stop_grace=5)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.heartbeat("worker", 0, 0, heeds_notice=True)
        why = "rebalancing"
        state.notices.begin(why, functools.partial(state.restart_on_purpose, why))
        state.task_end("worker", 1, 0, 1, "Traceback\nRuntimeError: peer gone")
        assert state.tasks[(Role.WORKER, 1)].state is TaskState.FAILED
        assert state.outcome is None  # max_restarts=0, yet not failed
        state.task_end("worker", 0, 0, RESTART_CODE, "")
        await tick(state, clock)
        assert state.phase is Phase.RESTARTING
        state.request_kill("test over")

    state, _ = run(spec, scenario)
    assert state.budget_used == 0 and state.failures == []


def test_the_restart_code_without_a_notice_is_an_ordinary_failure() -> None:
    spec = job(tasks={"worker": 2}, max_restarts=0)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.task_end("worker", 1, 0, RESTART_CODE, "")
        await tick(state, clock)

    state, _ = run(spec, scenario)
    assert state.phase is Phase.FAILED
    assert "exited with code 42" in state.diagnostics
