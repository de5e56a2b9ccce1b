"""The recovery policy in the master's state, with YARN faked and time controlled."""

from __future__ import annotations

import pytest
from _am_support import job
from _state_support import PS_JOB, Clock, form, register, reregister, run, tick

from am.launcher import FakeLauncher
from am.model import TaskRejected
from am.state import JobState
from tfyarn._proto import master_pb2 as pb
from tfyarn.contract import clusterspec as _clusterspec
from tfyarn.contract.status import Phase, TaskState
from tfyarn.spec import Role


def started_env(launcher: FakeLauncher, container_id: str) -> dict[str, str]:
    return next(env for cid, env in launcher.started if cid == container_id)


def test_lost_ps_strategy_worker_is_replaced_alone_at_its_old_port() -> None:
    spec = job(tasks=PS_JOB, max_restarts=2, stop_grace=2)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        assert state.generation == 1
        launcher.end("worker_1", "KILLED", "Container killed")
        clock.now += 1  # the loop polls YARN once per tick
        await state.reconcile_once()
        clock.now += 4  # past END_REPORT_GRACE: lost
        await state.reconcile_once()
        clock.now += 1
        await state.reconcile_once()
        worker = state.tasks[(Role.WORKER, 1)]
        assert worker.attempt == 1
        assert "worker_2" in launcher.containers  # the replacement's container
        env = started_env(launcher, "worker_2")
        assert env["TFYARN_ATTEMPT"] == "1"
        assert env["TFYARN_PORT"] == str(ports["worker:1"])
        assert env["TFYARN_RESTART"] == "0"  # not a cluster restart
        # Nobody else was stopped or relaunched.
        assert launcher.killed == []
        assert len(launcher.launched) == 5
        for key in ("chief", "ps"):
            assert state.tasks[(Role(key), 0)].state is TaskState.RUNNING
        launcher.grant("worker_2")
        reregister(state, "worker", 1, 1, ports["worker:1"])
        assert worker.state is TaskState.RUNNING
        assert state.generation == 1  # same addresses: same cluster
        watcher = state.watch("worker", 1, 1, known=0)
        event = pb.ClusterEvent.FromString(await anext(watcher.events()))
        worker_1 = _clusterspec.decode(event.cluster_spec)["worker"][1]
        assert worker_1 == f"h:{ports['worker:1']}"
        # The old attempt is refused.
        try:
            state.heartbeat("worker", 1, 0)
        except TaskRejected as exc:
            assert "replaced" in str(exc)
        else:
            raise AssertionError("old attempt accepted")
        state.task_end("chief", 0, 0, 0, "")
        clock.now += 60
        await state.reconcile_once()

    state, _ = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED, state.diagnostics
    assert state.restarts == 1 and state.budget_used == 1
    assert state.restart_reasons[0].startswith("worker:1 replaced: worker:1")
    snap = state.snapshot()
    worker = next(t for t in snap["tasks"] if t["task"] == "worker:1")
    assert worker["attempt"] == 1 and "was lost" in worker["failures"][0]


def test_lost_ps_restarts_the_others_in_place_and_only_itself_anew() -> None:
    spec = job(tasks=PS_JOB, max_restarts=1, stop_grace=2)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        chief = state.watch("chief", 0, 0, known=0)
        launcher.end("ps_0", "FAILED", "node lost")  # no report: lost
        for _ in range(6):  # past END_REPORT_GRACE
            await tick(state, clock)
            if state.phase is Phase.RESTARTING:
                break
        assert state.phase is Phase.RESTARTING
        events = [pb.ClusterEvent.FromString(e) async for e in chief.events()]
        assert [e.WhichOneof("event") for e in events] == ["cluster_spec", "stop"]
        # The chief hears a Stop with grace that names its next attempt.
        assert events[1].stop.next_attempt == 1 and events[1].stop.grace_seconds == 2
        for key in ("chief", "worker"):
            task = state.tasks[(Role(key), 0)]
            assert task.state is TaskState.RELAUNCHING and task.attempt == 1
            assert task.container_id == f"{key}_0"  # the same container
        # The previous attempt's calls are not refused meanwhile: its heartbeat
        # is taken, a stream opened again gets the Stop again.
        state.heartbeat("worker", 1, 0)
        again = state.watch("worker", 1, 0, known=1)
        stop = pb.ClusterEvent.FromString(await anext(again.events()))
        assert stop.stop.next_attempt == 1
        await tick(state, clock)
        # Only the ps asked YARN for a container, at its old port.
        assert launcher.killed == []
        assert [cid for cid, _ in launcher.started] == ["ps_1"]
        env = started_env(launcher, "ps_1")
        assert env["TFYARN_ATTEMPT"] == "1" and env["TFYARN_RESTART"] == "1"
        assert env["TFYARN_PORT"] == str(ports["ps:0"])
        launcher.grant("ps_1")
        for role, index in spec.task_keys():  # the survivors from their containers
            reregister(state, role.value, index, 1, ports[f"{role.value}:{index}"])
        assert state.generation == 2 and state.phase is Phase.RUNNING
        watcher = state.watch("worker", 0, 1, known=0)
        event = pb.ClusterEvent.FromString(await anext(watcher.events()))
        assert event.cluster_spec.generation == 2 and event.cluster_spec.restart == 1
        with pytest.raises(TaskRejected, match="replaced"):
            state.heartbeat("worker", 0, 0)  # once back, the old attempt is gone
        state.task_end("chief", 0, 1, 0, "")
        clock.now += 60
        await state.reconcile_once()

    state, _ = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED, state.diagnostics
    assert state.restart_reasons[0].startswith("cluster restarted: ps:0")
    assert state.cluster_restarts == 1 and state.budget_used == 1


def test_a_killed_ps_script_restarts_in_place_with_everyone_else() -> None:
    """Its runtime reported the signal and waits: no container is asked for."""
    spec = job(tasks=PS_JOB, max_restarts=1, stop_grace=2)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        ps = state.watch("ps", 0, 0, known=1)
        state.task_end("ps", 0, 0, -9, "Killed")
        stop = pb.ClusterEvent.FromString(await anext(ps.events()))
        assert stop.stop.next_attempt == 1
        for _ in range(10):
            await tick(state, clock)
        assert launcher.started == [] and launcher.killed == []
        for role, index in spec.task_keys():
            reregister(state, role.value, index, 1, ports[f"{role.value}:{index}"])
        assert state.generation == 2 and state.phase is Phase.RUNNING
        state.task_end("chief", 0, 1, 0, "")
        clock.now += 60
        await state.reconcile_once()

    state, launcher = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED, state.diagnostics
    assert state.budget_used == 1 and state.cluster_restarts == 1
    assert "killed by signal 9" in state.tasks[(Role.PS, 0)].failures[0]
    # YARN keeps the final diagnostics after the status is gone: they say it.
    assert launcher.final is not None
    assert (
        "; after 1 restart(s): 1. cluster restarted: ps:0 (attempt 0"
        in launcher.final[1]
    )


def test_a_failed_ps_strategy_worker_restarts_in_place_in_the_same_cluster() -> None:
    spec = job(tasks=PS_JOB, max_restarts=1, stop_grace=2)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        state.task_end("worker", 1, 0, 1, "OSError: disk full")
        worker = state.tasks[(Role.WORKER, 1)]
        assert worker.state is TaskState.RELAUNCHING and worker.attempt == 1
        await tick(state, clock)
        assert launcher.started == []
        # Nobody else is touched; it comes back at its address, same cluster.
        for key in ("chief", "ps"):
            assert state.tasks[(Role(key), 0)].state is TaskState.RUNNING
        reregister(state, "worker", 1, 1, ports["worker:1"])
        assert worker.state is TaskState.RUNNING and state.generation == 1
        state.task_end("chief", 0, 0, 0, "")
        clock.now += 60
        await state.reconcile_once()

    state, _ = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED, state.diagnostics
    assert state.restart_reasons[0].startswith("worker:1 replaced: worker:1")


def test_a_restart_in_place_that_does_not_come_back_gets_a_new_container() -> None:
    spec = job(
        tasks={"worker": 3}, max_restarts=1, stop_grace=2, registration_timeout=120
    )

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        state.task_end("worker", 2, 0, 1, "boom")
        launcher.end("worker_2", "FAILED")
        await tick(state, clock)
        # worker:0's container ends while it restarts in place; worker:1 never
        # registers again.
        launcher.end("worker_0", "FAILED", "Container killed on request")
        await tick(state, clock)
        assert "worker_0" not in launcher.killed
        assert any(cid.startswith("worker_") for cid, _ in launcher.started)
        clock.now += 2 + 5 + 30  # stop_grace + KILL_MARGIN + IN_PLACE_REGISTER
        await state.reconcile_once()
        await tick(state, clock)
        assert "worker_1" in launcher.killed  # killed before the new one is asked for
        started = {env["TFYARN_TASK_INDEX"]: env for _, env in launcher.started}
        assert set(started) == {"0", "1", "2"}
        # A fallback from a live container takes another attempt number: its
        # late registration is refused. An ended one cannot register.
        assert started["0"]["TFYARN_ATTEMPT"] == "1"
        assert started["1"]["TFYARN_ATTEMPT"] == "2"
        assert started["1"]["TFYARN_PORT"] == str(ports["worker:1"])
        with pytest.raises(TaskRejected):
            reregister(state, "worker", 1, 1, ports["worker:1"])
        for cid in list(launcher.containers):
            if launcher.containers[cid].state == "REQUESTED":
                launcher.grant(cid)
        for index in range(3):
            attempt = int(started[str(index)]["TFYARN_ATTEMPT"])
            reregister(state, "worker", index, attempt, ports[f"worker:{index}"])
        assert state.generation == 2
        state.task_end("worker", 0, 1, 0, "")
        for index in (1, 2):
            attempt = int(started[str(index)]["TFYARN_ATTEMPT"])
            state.task_end("worker", index, attempt, 0, "")
        clock.now += 60
        await state.reconcile_once()

    state, _ = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED, state.diagnostics
    # One failure, one charged restart: the fallbacks are not charged again.
    assert state.budget_used == 1 and state.cluster_restarts == 1
    history = "\n".join(state.tasks[(Role.WORKER, 1)].history)
    assert "restart in place failed (it did not register again in time)" in history


def test_the_job_stopped_during_a_restart_in_place_kills_those_containers() -> None:
    spec = job(tasks={"worker": 2}, max_restarts=1, stop_grace=2)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.task_end("worker", 1, 0, 1, "boom")
        await tick(state, clock)
        assert state.tasks[(Role.WORKER, 0)].in_place_stop is not None
        state.stop_job("tfyarn kill", 1)
        await tick(state, clock)
        # Not registered again: it cannot hear a Stop, so its container goes now.
        assert "worker_0" in launcher.killed
        clock.now += 60
        await state.reconcile_once()

    state, _ = run(spec, scenario)
    assert state.phase is Phase.KILLED, state.diagnostics


def test_replacement_that_cannot_keep_its_address_restarts_the_cluster() -> None:
    spec = job(tasks=PS_JOB, max_restarts=1, stop_grace=1)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.task_end("worker", 0, 0, 1, "boom")
        launcher.end("worker_0", "FAILED")
        await tick(state, clock)
        await tick(state, clock)
        assert "worker_2" in launcher.containers
        launcher.grant("worker_2")
        reregister(state, "worker", 0, 1, 4444)  # its old port was taken
        assert state.phase is Phase.RESTARTING
        assert state.cluster_restarts == 1
        state.request_kill("test over")

    state, _ = run(spec, scenario)
    assert state.budget_used == 1  # the same failure, not charged twice
    assert "not at its old address h:2002" in state.restart_reasons[1]


def test_all_reduce_worker_loss_restarts_every_task() -> None:
    spec = job(tasks={"worker": 2}, max_restarts=1, stop_grace=1)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.task_end("worker", 1, 0, -9, "")
        await state.reconcile_once()
        assert state.phase is Phase.RESTARTING
        assert state.tasks[(Role.WORKER, 0)].attempt == 1
        state.request_kill("test over")

    state, _ = run(spec, scenario)
    assert state.restart_reasons[0].startswith("cluster restarted: worker:1")


def test_past_the_budget_the_job_fails_listing_every_failure() -> None:
    spec = job(tasks=PS_JOB, max_restarts=1, stop_grace=1)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        state.task_end("worker", 1, 0, 3, "first crash")
        launcher.end("worker_1", "FAILED")
        await tick(state, clock)
        await tick(state, clock)
        launcher.grant("worker_2")
        reregister(state, "worker", 1, 1, ports["worker:1"])
        state.task_end("worker", 1, 1, 4, "second crash")
        await state.reconcile_once()

    state, launcher = run(spec, scenario)
    assert state.phase is Phase.FAILED
    assert launcher.final is not None
    text = launcher.final[1]
    assert "restart budget is used up (1 of max_restarts=1)" in text
    assert "1. worker:1 (attempt 0" in text and "first crash" in text
    assert "2. worker:1 (attempt 1" in text and "second crash" in text
    assert text.count("second crash") == 2  # the reason, then once in the list


def test_stalled_job_names_the_tasks_and_restarts_within_budget() -> None:
    spec = job(tasks={"worker": 2}, max_restarts=0, stall_timeout=30)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.progress("worker", 0, 0, 5, {})
        clock.now += 20
        state.heartbeat("worker", 0, 0)
        state.heartbeat("worker", 1, 0)
        await state.reconcile_once()
        assert state.phase is Phase.RUNNING
        clock.now += 15
        state.heartbeat("worker", 0, 0)
        state.heartbeat("worker", 1, 0)
        await state.reconcile_once()

    state, launcher = run(spec, scenario)
    assert state.phase is Phase.FAILED
    text = launcher.final[1] if launcher.final else ""
    assert "no task reported training progress for 35 s" in text
    assert "worker:0 at step 5 for 35 s" in text
    assert "worker:1 never reported progress" in text


def test_wedged_worker_is_killed_at_once_and_replaced() -> None:
    spec = job(tasks=PS_JOB, max_restarts=1, heartbeat_timeout=10, stop_grace=5)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        clock.now += 11
        for role, index in (("chief", 0), ("ps", 0), ("worker", 0)):
            state.heartbeat(role, index, 0)
        await state.reconcile_once()
        await state.reconcile_once()
        assert "worker_1" in launcher.killed  # no grace for a silent process
        clock.now += 1
        await state.reconcile_once()
        assert "worker_2" in launcher.containers
        state.request_kill("test over")

    state, _ = run(spec, scenario)
    assert "sent no heartbeat" in state.restart_reasons[0]


def test_stop_job_stops_every_task_with_a_grace_and_restarts_nothing() -> None:
    spec = job(tasks=PS_JOB, max_restarts=3, stop_grace=4)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        chief = state.watch("chief", 0, 0, known=0)
        grace, count = state.stop_job("stopped by tfyarn kill", 0)
        assert (grace, count) == (4, 4)
        assert state.phase is Phase.STOPPING
        events = [pb.ClusterEvent.FromString(e) async for e in chief.events()]
        assert events[-1].stop.grace_seconds == 4
        state.task_end("worker", 1, 0, -15, "Terminated")  # not a failure now
        await state.reconcile_once()
        assert len(launcher.launched) == 4 and state.restarts == 0
        state.request_kill("the application master received SIGTERM (killed)")

    state, launcher = run(spec, scenario)
    assert state.phase is Phase.KILLED
    assert state.tasks[(Role.WORKER, 1)].state is TaskState.KILLED
    assert launcher.final is None


def test_status_shows_restarts_and_why_each_attempt_ended() -> None:
    from tfyarn.client.narrator import restart_lines
    from tfyarn.contract.status import JobStatus

    spec = job(tasks=PS_JOB, max_restarts=2, stop_grace=1)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.task_end("worker", 1, 0, 3, "ValueError: bad batch")
        await state.reconcile_once()
        state.request_kill("test over")

    state, _ = run(spec, scenario)
    lines = restart_lines(JobStatus.from_dict(state.snapshot()))
    assert lines[0] == "restarts (1 of max_restarts=2 used):"
    assert lines[1].startswith("  1. worker:1 replaced: worker:1 (attempt 0")
    assert lines[2].startswith("  worker:1 attempt 0: worker:1 (attempt 0")
    assert "exited with code 3" in lines[2]


def test_big_jobs_heartbeat_less_often_and_the_timeout_follows() -> None:
    from tfyarn.contract.heartbeat import heartbeat_interval, heartbeat_timeout

    assert heartbeat_interval(2.0, 12) == 2.0
    assert heartbeat_interval(2.0, 5000) == 10.0  # 500 calls/s at the master
    assert heartbeat_timeout(30.0, 10.0) == 30.0
    assert heartbeat_timeout(6.0, 10.0) == 30.0  # never under 3 intervals


def test_each_restart_is_saved_for_a_later_master_attempt() -> None:
    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        assert launcher.restarts_record is None  # nothing to carry over yet
        state.task_end("ps", 0, 0, 1, "ps crashed")
        await tick(state, clock)
        state.request_kill("test over")

    _, launcher = run(job(tasks=PS_JOB, max_restarts=3), scenario)
    record = launcher.restarts_record
    assert record is not None
    assert record["budget_used"] == 1 and record["restarts"] == 1
    assert record["cluster_restarts"] == 1
    assert "ps crashed" in record["failures"][0]
    # A new master attempt goes on from it.
    again = JobState(job(tasks=PS_JOB, max_restarts=3), FakeLauncher())
    again.resume_after_master_loss(2, record)
    assert (again.budget_used, again.restarts, again.cluster_restarts) == (1, 2, 2)
    assert again.failures == record["failures"]


def test_a_task_stopped_while_restarting_in_place_is_not_relaunched() -> None:
    # `tfyarn kill` during a restart in place: the containers of the tasks
    # that had not registered again are killed, and no new one is asked for.
    spec = job(tasks={"worker": 2}, max_restarts=1, stop_grace=2)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.task_end("worker", 1, 0, 1, "boom")
        await tick(state, clock)
        state.stop_job("tfyarn kill", 1)
        for _ in range(5):
            await tick(state, clock)
        assert launcher.started == []
        for task in state.tasks.values():
            assert task.state is TaskState.KILLED, task.history
        assert state.relaunch == set()
        clock.now += 60
        await state.reconcile_once()

    state, launcher = run(spec, scenario)
    assert state.phase is Phase.KILLED, state.diagnostics
    assert launcher.started == []


@pytest.mark.parametrize("settle", ["lead finished", "tfyarn kill"])
def test_a_replacement_at_a_new_address_does_not_restart_a_settled_job(
    settle: str,
) -> None:
    # The job's outcome is settled (the lead finished, or `tfyarn kill`): a
    # replacement that registers elsewhere is stopped, not a cluster restart.
    spec = job(tasks=PS_JOB, max_restarts=1, stop_grace=1)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.task_end("worker", 0, 0, 1, "boom")
        launcher.end("worker_0", "FAILED")
        await tick(state, clock)
        await tick(state, clock)
        assert "worker_2" in launcher.containers
        if settle == "lead finished":
            state.task_end("chief", 0, 0, 0, "")
            settled = Phase.FINISHING
        else:
            state.stop_job("tfyarn kill", 1)
            settled = Phase.STOPPING
        launcher.grant("worker_2")
        reregister(state, "worker", 0, 1, 4444)  # its old port was taken
        assert state.phase is settled
        assert state.cluster_restarts == 0
        worker = state.tasks[(Role.WORKER, 0)]
        assert worker.stop_requested_at is not None
        # Its stream ends with the Stop (the stream closes after it).
        watcher = state.watch("worker", 0, 1, 0)
        events = [pb.ClusterEvent.FromString(e) async for e in watcher.events()]
        assert events[-1].HasField("stop")
        for _ in range(60):  # a grace, and after `tfyarn kill` the linger
            await tick(state, clock)
            if state.outcome is not None:
                break

    state, _ = run(spec, scenario)
    assert state.cluster_restarts == 0
    expected = Phase.SUCCEEDED if settle == "lead finished" else Phase.KILLED
    assert state.phase is expected, state.diagnostics


def test_no_cluster_forms_once_the_job_is_being_stopped() -> None:
    # `tfyarn kill` before the cluster formed: the tasks that register after
    # it get their Stop, not a ClusterSpec, and the job stays STOPPING.
    spec = job(tasks={"worker": 2})

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        for cid in list(launcher.containers):
            launcher.grant(cid)
        state.stop_job("tfyarn kill", 1)
        register(state, "worker", 0, 2000)
        register(state, "worker", 1, 2001)
        assert not state.formed and state.generation == 0
        assert state.phase is Phase.STOPPING
        watcher = state.watch("worker", 0, 0, 0)
        events = [pb.ClusterEvent.FromString(e) async for e in watcher.events()]
        assert [e.WhichOneof("event") for e in events] == ["stop"]
        state.request_kill("test over")

    state, _ = run(spec, scenario)
    assert state.phase is Phase.KILLED
