"""Resizing a job in the master: a stop notice, then a generation of the new size."""

from __future__ import annotations

import pytest
from _am_support import job
from _state_support import PS_JOB, Clock, form, register, reregister, run, tick
from test_am_notice import kinds, queued

from am.launcher import FakeLauncher
from am.model import KILL_MARGIN, TaskRejected
from am.state import JobState
from tfyarn.contract.notice import RESTART_CODE
from tfyarn.contract.status import Phase, TaskState
from tfyarn.spec import Role


def started_env(launcher: FakeLauncher, container_id: str) -> dict[str, str]:
    return next(env for cid, env in launcher.started if cid == container_id)


def heed_all(state: JobState) -> None:
    """Every running script has asked tfyarn.should_stop() (its heartbeat says)."""
    for task in state.tasks.values():
        if task.state is TaskState.RUNNING:
            state.heartbeat(
                task.role.value, task.index, task.attempt, heeds_notice=True
            )


async def save_all(state: JobState, clock: Clock) -> None:
    """Every running script saves on the notice and exits with the restart code."""
    for task in list(state.tasks.values()):
        if task.state is TaskState.RUNNING and task.role is not Role.PS:
            state.task_end(task.role.value, task.index, task.attempt, RESTART_CODE, "")
    await tick(state, clock)


def test_scaling_up_starts_the_new_worker_first_then_saves_and_forms_a_bigger_generation() -> (
    None
):
    spec = job(tasks={"worker": 2}, max_restarts=0, stop_grace=5)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        streams = [state.watch("worker", i, 0, known=0) for i in (0, 1)]
        heed_all(state)
        state.wakeup.clear()
        before, message = state.resizer.request(3, "tfyarn scale")
        assert before == 2 and "3 worker(s)" in message and "stand by" in message
        assert state.wakeup.is_set()  # the container is asked for at once
        # No notice yet: the new worker's container comes first, the job trains on.
        assert state.phase is Phase.RUNNING and not state.notices.active
        await tick(state, clock)
        assert [cid for cid, _ in launcher.started] == ["worker_2"]
        env = started_env(launcher, "worker_2")
        assert env["TFYARN_TASK_INDEX"] == "2" and env["TFYARN_ATTEMPT"] == "0"
        launcher.grant("worker_2")
        register(state, "worker", 2, 3000)
        assert state.phase is Phase.RUNNING and not state.notices.active
        await tick(state, clock)  # it stands by: now the notice
        assert state.notices.active
        with pytest.raises(TaskRejected, match="already ending"):
            state.resizer.request(4, "tfyarn scale")  # one at a time
        await save_all(state, clock)
        assert state.phase is Phase.RESTARTING
        for watcher in streams:
            events = queued(watcher)
            assert kinds(events) == ["cluster_spec", "stop_notice", "stop"]
            assert "resized from 2 to 3" in events[1].stop_notice.reason
            assert events[-1].stop.next_attempt == 1  # in place
        assert state.spec.count(Role.WORKER) == 3
        assert [t.key for t in state.tasks.values()] == [
            "worker:0",
            "worker:1",
            "worker:2",
        ]
        await tick(state, clock)
        assert len(launcher.started) == 1  # nothing more asked of YARN
        for i in (0, 1):
            reregister(state, "worker", i, 1, ports[f"worker:{i}"])
        assert state.phase is Phase.RESTARTING  # the standby joins too
        joined = state.tasks[(Role.WORKER, 2)]
        assert joined.attempt == 1  # restarted in place, as a member
        reregister(state, "worker", 2, joined.attempt, 3000)
        assert state.phase is Phase.RUNNING and state.generation == 2
        assert state.cluster() == {
            "worker": [f"h:{ports['worker:0']}", f"h:{ports['worker:1']}", "h:3000"]
        }
        state.task_end("worker", 0, 1, 0, "")
        clock.now += 60
        await state.reconcile_once()

    state, _ = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED, state.diagnostics
    assert state.resizer.resizes == 1 and state.budget_used == 0
    assert state.restarts == 0 and state.cluster_restarts == 1
    snap = state.snapshot()
    assert snap["resizes"] == 1
    assert snap["resize_reasons"][0].startswith("resized from 2 to 3 worker(s)")


def test_a_standby_whose_container_runs_joins_before_its_runtime_registered() -> None:
    spec = job(tasks={"worker": 2}, max_restarts=0, stop_grace=5)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        heed_all(state)
        state.resizer.request(3, "tfyarn scale")
        await tick(state, clock)
        launcher.grant("worker_2")
        await tick(state, clock)
        # Its container runs: the others save while its runtime starts.
        assert state.tasks[(Role.WORKER, 2)].state is TaskState.ALLOCATED
        assert state.notices.active
        await save_all(state, clock)
        assert state.phase is Phase.RESTARTING and state.spec.count(Role.WORKER) == 3
        await tick(state, clock)
        assert launcher.killed == [] and len(launcher.started) == 1  # kept, not redone
        for i in (0, 1):
            reregister(state, "worker", i, 1, ports[f"worker:{i}"])
        assert state.phase is Phase.RESTARTING
        register(state, "worker", 2, 3000)  # its first registration, as a member
        assert state.phase is Phase.RUNNING and len(state.cluster()["worker"]) == 3
        state.request_kill("test over")

    state, _ = run(spec, scenario)
    assert state.resizer.resizes == 1 and state.budget_used == 0


def test_scaling_up_with_no_room_keeps_training_and_scaling_back_drops_the_standby() -> (
    None
):
    spec = job(tasks={"worker": 2}, stop_grace=5)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.resizer.request(3, "tfyarn scale")
        for _ in range(30):  # YARN grants nothing for a long while
            await tick(state, clock)
        assert state.phase is Phase.RUNNING and not state.notices.active
        assert state.generation == 1 and state.resizer.resizes == 0
        before, message = state.resizer.request(2, "tfyarn scale")
        assert before == 2 and "nothing to do" in message
        assert (Role.WORKER, 2) not in state.tasks and not state.resizer.standby
        await tick(state, clock)
        assert not state.notices.active and state.resizer.resizes == 0
        state.request_kill("test over")

    run(spec, scenario)


def test_scaling_down_stops_the_highest_workers_for_good() -> None:
    spec = job(tasks=PS_JOB | {"worker": 3}, max_restarts=0, stop_grace=5)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        gone = state.watch("worker", 2, 0, known=0)
        state.heartbeat("chief", 0, 0, heeds_notice=True)  # the coordinator saves
        state.resizer.request(2, "tfyarn scale")
        await tick(state, clock)
        assert state.notices.active  # ps and workers serve until the chief saved
        assert kinds(queued(gone)) == ["cluster_spec", "stop_notice"]
        state.task_end("chief", 0, 0, RESTART_CODE, "")
        await tick(state, clock)
        assert state.phase is Phase.RESTARTING
        # worker:2 hears a final Stop and leaves the job ...
        events = queued(gone)
        assert kinds(events) == ["stop"] and events[0].stop.next_attempt == 0
        assert (Role.WORKER, 2) not in state.tasks
        assert state.spec.count(Role.WORKER) == 2
        # ... but its runtime's calls meanwhile are answered, not refused
        # (a refusal would SIGKILL its script at once).
        state.heartbeat("worker", 2, 0)
        again = state.watch("worker", 2, 0, known=1)
        assert kinds(queued(again)) == ["stop"]
        # Its container is killed once it outlives the Stop's grace.
        for _ in range(int(5 + KILL_MARGIN) + 1):
            await tick(state, clock)
        assert "worker_2" in launcher.killed
        launcher.end("worker_2", "KILLED")
        await tick(state, clock)
        assert not state.resizer.leaving
        with pytest.raises(TaskRejected, match="no task worker:2"):
            state.heartbeat("worker", 2, 0)
        for key in ("chief:0", "ps:0", "worker:0", "worker:1"):
            role, index = key.split(":")
            reregister(state, role, int(index), 1, ports[key])
        assert state.phase is Phase.RUNNING
        assert len(state.cluster()["worker"]) == 2
        assert launcher.started == []  # nothing new asked of YARN
        state.task_end("chief", 0, 1, 0, "")
        clock.now += 60
        await state.reconcile_once()

    state, _ = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED, state.diagnostics
    assert state.resizer.resizes == 1 and state.budget_used == 0


def test_a_worker_added_again_after_a_shrink_is_a_later_attempt() -> None:
    spec = job(tasks={"worker": 3}, stop_grace=1)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        state.resizer.request(2, "smaller")  # nobody heeds: no wait
        await tick(state, clock)
        for i in (0, 1):
            reregister(state, "worker", i, 1, ports[f"worker:{i}"])
        assert state.phase is Phase.RUNNING
        state.resizer.request(3, "bigger again")  # worker_2 still running
        await tick(state, clock)
        added = state.tasks[(Role.WORKER, 2)]
        assert added in state.resizer.standby  # its container first
        assert added.attempt == 2  # its removed predecessor was attempt 0 (then 1)
        with pytest.raises(TaskRejected, match="replaced"):
            state.heartbeat("worker", 2, 0)  # the old runtime is not taken for it
        assert state.resizer.resizes == 1
        state.request_kill("test over")

    run(spec, scenario)


@pytest.mark.parametrize(
    ("tasks", "count", "min_worker", "words"),
    [
        ({"worker": 2}, 0, 0, "at least 1"),
        ({"worker": 2}, -1, 0, "at least 1"),
        ({"worker": 3}, 1, 2, "below the job's min_worker=2"),
        ({"chief": 1}, 2, 0, "no workers to scale"),
    ],
)
def test_resizes_the_job_cannot_take_are_refused_with_the_reason(
    tasks: dict[str, int], count: int, min_worker: int, words: str
) -> None:
    spec = job(tasks=tasks, min_worker=min_worker)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        with pytest.raises(TaskRejected, match=words) as refused:
            state.resizer.request(count, "tfyarn scale")
        code = "FAILED_PRECONDITION" if "no workers" in words else "INVALID_ARGUMENT"
        assert refused.value.code == code
        assert not state.notices.active and state.resizer.resizes == 0
        state.request_kill("test over")

    run(spec, scenario)


def test_an_ending_job_is_not_resized_and_the_same_size_is_a_no_op() -> None:
    spec = job(tasks={"worker": 2}, worker_grace=30)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        before, message = state.resizer.request(2, "tfyarn scale")
        assert before == 2 and "already has 2 worker(s)" in message
        assert not state.notices.active
        state.task_end("worker", 0, 0, 0, "")  # the lead finished
        with pytest.raises(TaskRejected, match="FINISHING") as refused:
            state.resizer.request(3, "tfyarn scale")
        assert refused.value.code == "FAILED_PRECONDITION"
        state.request_kill("test over")

    run(spec, scenario)


def test_a_stop_during_the_resize_notice_wins() -> None:
    spec = job(tasks={"worker": 2}, stop_grace=5)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        heed_all(state)
        state.resizer.request(3, "tfyarn scale")
        state.stop_job("stopped by tfyarn kill --graceful", 0, graceful=True)
        await save_all(state, clock)
        assert state.phase is Phase.STOPPING
        assert state.spec.count(Role.WORKER) == 2 and state.resizer.resizes == 0
        assert all(t.stop_requested_at is not None for t in state.tasks.values())
        state.request_kill("test over")

    run(spec, scenario)
