"""The master's state machine and reconcile loop, with YARN faked and time controlled."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from _am_support import job
from _state_support import Clock, register, register_all, run

from am.launcher import FakeLauncher
from am.model import TaskRejected
from am.state import JobState
from tfyarn._proto import master_pb2 as pb
from tfyarn.contract.status import (
    STATUS_KEY,
    SUMMARY_KEY,
    JobSummary,
    Phase,
    TaskState,
)
from tfyarn.spec import JobSpec, Role


def test_master_launches_each_task_with_its_identity() -> None:
    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        # The initial tasks are declared in the application spec: each is its
        # skein instance, nothing asked for by the master.
        assert launcher.declared_ids == ["ps_0", "worker_0", "worker_1"]
        assert launcher.started == []
        assert state.tasks[(Role.WORKER, 1)].container_id == "worker_1"
        # A replacement is added, with its identity in its env.
        launcher.grant("worker_1")
        register(state, "worker", 1, 2001)
        state.task_end("worker", 1, 0, -9, "")
        launcher.end("worker_1", "KILLED")
        for _ in range(30):
            clock.now += 1
            await state.reconcile_once()
            if launcher.started:
                break
        cid, env = next(
            (cid, env)
            for cid, env in launcher.started
            if env["TFYARN_TASK_INDEX"] == "1"
        )
        # skein's next instance of the service: not the task index.
        assert cid not in ("worker_0", "worker_1")
        assert env == {
            "TFYARN_TASK_INDEX": "1",
            "TFYARN_ATTEMPT": "1",
            "TFYARN_MASTER_ADDRESS": "m:1",
            "TFYARN_RESTART": "1",  # no chief: a lost worker restarts the cluster
            "TFYARN_PORT": "2001",
        }
        state.request_kill("test over")

    state, launcher = run(job(tasks={"ps": 1, "worker": 2}, max_restarts=1), scenario)
    assert state.phase is Phase.KILLED
    assert launcher.final is None  # a killed application is torn down by YARN


def test_cluster_forms_when_every_tf_task_registered_then_lead_success_ends_job() -> (
    None
):
    spec = job(tasks={"chief": 1, "ps": 1, "worker": 2, "evaluator": 1}, worker_grace=5)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        register_all(state, launcher)
        assert state.generation == 1 and state.phase is Phase.RUNNING
        assert state.cluster() == {
            "chief": ["h:2000"],
            "ps": ["h:2001"],
            "worker": ["h:2002", "h:2003"],
        }
        ps_stream = state.watch("ps", 0, 0, known=0)
        worker_stream = state.watch("worker", 1, 0, known=0)
        state.task_end("chief", 0, 0, 0, "")
        await state.reconcile_once()
        assert state.phase is Phase.FINISHING
        # Under ParameterServerStrategy ps, workers and the evaluator only serve
        # the coordinator: all are told to stop at once, without worker_grace.
        for stream in (ps_stream, worker_stream):
            kinds = [
                pb.ClusterEvent.FromString(e).WhichOneof("event")
                async for e in stream.events()
            ]
            assert kinds == ["cluster_spec", "stop"]
        for key in ((Role.EVALUATOR, 0), (Role.WORKER, 0), (Role.WORKER, 1)):
            assert state.tasks[key].stop_requested_at is not None
        for role, index in (("ps", 0), ("evaluator", 0), ("worker", 0), ("worker", 1)):
            state.task_end(role, index, 0, -15, "")

    state, launcher = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED
    assert launcher.final is not None and launcher.final[0] == "SUCCEEDED"
    assert "chief:0 finished successfully" in launcher.final[1]
    states = {t.key: t.state for t in state.tasks.values()}
    assert states["ps:0"] is TaskState.KILLED
    assert states["worker:1"] is TaskState.KILLED
    assert launcher.progress == 1.0


def test_training_workers_get_worker_grace_after_the_lead_succeeds() -> None:
    # A chief with workers but no ps (e.g. MultiWorkerMirrored): workers train,
    # so they may finish their last steps before being stopped.
    spec = job(tasks={"chief": 1, "worker": 2}, worker_grace=5)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        register_all(state, launcher)
        worker_stream = state.watch("worker", 1, 0, known=0)
        state.task_end("worker", 0, 0, 0, "")  # a worker may finish first
        state.task_end("chief", 0, 0, 0, "")
        await state.reconcile_once()
        assert state.phase is Phase.FINISHING
        assert state.tasks[(Role.WORKER, 1)].stop_requested_at is None
        clock.now += 6  # past worker_grace
        await state.reconcile_once()
        assert state.tasks[(Role.WORKER, 1)].stop_requested_at is not None
        kinds = [
            pb.ClusterEvent.FromString(e).WhichOneof("event")
            async for e in worker_stream.events()
        ]
        assert kinds == ["cluster_spec", "stop"]
        state.task_end("worker", 1, 0, 143, "Terminated")

    state, launcher = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED
    assert launcher.final is not None and launcher.final[0] == "SUCCEEDED"
    states = {t.key: t.state for t in state.tasks.values()}
    assert states["worker:0"] is TaskState.SUCCEEDED
    assert states["worker:1"] is TaskState.KILLED


def test_failing_task_fails_the_job_naming_task_code_and_stderr() -> None:
    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        register_all(state, launcher)
        state.task_end("worker", 1, 0, 3, "line one\nValueError: bad input shape")

    state, launcher = run(job(tasks={"ps": 1, "worker": 2}), scenario)
    assert state.phase is Phase.FAILED
    assert launcher.final is not None
    status, diagnostics = launcher.final
    assert status == "FAILED"
    assert "worker:1" in diagnostics and "exited with code 3" in diagnostics
    assert "ValueError: bad input shape" in diagnostics
    assert "yarn logs -applicationId application_0_0001" in diagnostics


def test_registration_timeout_names_missing_tasks_and_what_they_wait_for() -> None:
    spec = JobSpec(
        script="t.py",
        tasks={
            "worker": {"count": 2, "memory_mib": 4096, "gpus": 2},
            "ps": {"count": 1},
        },
        registration_timeout=120,
        max_restarts=0,
    )

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        launcher.grant("ps_0")
        launcher.grant("worker_0")
        register(state, "ps", 0, 1)
        clock.now += 121
        await state.reconcile_once()

    _, launcher = run(spec, scenario)
    assert launcher.final is not None
    status, diagnostics = launcher.final
    assert status == "FAILED"
    assert (
        "worker:1 waiting for a container of 4096 MiB, 1 vcores, 2 GPUs; not granted after 121 s"
        in diagnostics
    )
    assert "worker:0 got container" in diagnostics and "did not register" in diagnostics
    assert "ps:0" not in diagnostics.split("All task logs")[0]


def test_container_that_disappears_without_reporting_counts_as_failed() -> None:
    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        register_all(state, launcher)
        launcher.end(
            "worker_1", "FAILED", "Container killed on request. Exit code is 137"
        )
        clock.now += 1  # the next poll sees the container gone
        await state.reconcile_once()
        assert state.phase is Phase.RUNNING  # a ReportTaskEnd may still come
        clock.now += 5  # past the grace for a late ReportTaskEnd
        await state.reconcile_once()

    state, launcher = run(job(tasks={"worker": 2}), scenario)
    assert launcher.final is not None
    assert launcher.final[0] == "FAILED"
    assert "worker:1" in launcher.final[1] and "was lost" in launcher.final[1]
    assert "Exit code is 137" in launcher.final[1]
    assert state.tasks[(Role.WORKER, 1)].state is TaskState.LOST


def test_silent_task_is_lost_after_the_heartbeat_timeout() -> None:
    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        register_all(state, launcher)
        clock.now += 20
        state.heartbeat("worker", 0, 0)  # worker 0 is alive, worker 1 wedged
        await state.reconcile_once()
        assert state.phase is Phase.RUNNING
        clock.now += 15
        await state.reconcile_once()

    _, launcher = run(job(tasks={"worker": 2}, heartbeat_timeout=30), scenario)
    assert launcher.final is not None and launcher.final[0] == "FAILED"
    assert (
        "worker:1" in launcher.final[1] and "no heartbeat for 35 s" in launcher.final[1]
    )


def test_stale_attempt_and_unknown_task_are_refused() -> None:

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        for call, code in (
            (lambda: state.heartbeat("worker", 0, 7), "FAILED_PRECONDITION"),
            (lambda: state.heartbeat("worker", 5, 0), "NOT_FOUND"),
            (lambda: state.heartbeat("driver", 0, 0), "NOT_FOUND"),
        ):
            try:
                call()
            except TaskRejected as exc:
                assert exc.code == code
            else:
                raise AssertionError("accepted")
        state.request_kill("done")

    run(job(), scenario)


def test_status_snapshot_is_published_with_the_agreed_keys() -> None:
    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        register_all(state, launcher)
        state.progress("worker", 0, 0, 7, {"loss": 0.5, "total_steps": 10})
        clock.now += 1  # status publication is throttled
        await state.reconcile_once()
        snap = json.loads(launcher.kv[STATUS_KEY])
        assert snap["phase"] == "RUNNING" and snap["generation"] == 1
        assert {
            "restarts",
            "restart_reasons",
            "started",
            "cluster_formed_at",
            "diagnostics",
        } <= set(snap)
        task = snap["tasks"][0]
        assert task["task"] == "worker:0" and task["state"] == "RUNNING"
        assert task["address"] == "h:2000" and task["step"] == 7
        assert set(task) >= {
            "role",
            "index",
            "attempt",
            "container_id",
            "yarn_container_id",
            "exit_code",
            "last_heartbeat_age",
            "history",
        }
        assert abs(launcher.progress - (0.1 + 0.85 * 0.7)) < 0.01
        state.task_end("worker", 0, 0, 0, "")

    _, launcher = run(job(), scenario)
    assert json.loads(launcher.kv[STATUS_KEY])["phase"] == "SUCCEEDED"


def test_timeouts_fire_even_when_yarn_cannot_be_polled() -> None:
    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        async def broken() -> dict[str, Any]:
            raise ConnectionError("skein's AM does not answer")

        launcher.poll = broken  # type: ignore[method-assign]
        clock.now += 31
        await state.reconcile_once()

    _, launcher = run(job(tasks={"worker": 1}, registration_timeout=30), scenario)
    assert launcher.final is not None and launcher.final[0] == "FAILED"
    assert "worker:0 waiting for a container" in launcher.final[1]


def test_big_jobs_log_a_summary_instead_of_a_line_per_task(caplog: Any) -> None:
    caplog.set_level("INFO", logger="am")

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        register_all(state, launcher)
        clock.now += 2 * state.tick  # the next pass scans (and summarizes)
        await state.reconcile_once()
        state.request_kill("test over")

    state, _ = run(job(tasks={"ps": 1, "worker": 300}), scenario)
    lines = [r.getMessage() for r in caplog.records]
    assert not [line for line in lines if "registered at" in line], lines[:5]
    assert "301 tasks: 301 RUNNING" in lines, lines
    # Every task's step is still in its history.
    assert "registered at h:" in state.tasks[(Role.WORKER, 299)].history[-2]


def test_big_jobs_scan_every_task_less_often() -> None:
    small = JobState(job(tasks={"worker": 2}), FakeLauncher(), tick=0.5)
    big = JobState(job(tasks={"ps": 10, "worker": 4990}), FakeLauncher(), tick=0.5)
    assert (small.tick, big.tick) == (0.5, 2.5)


def test_the_summary_stands_for_the_status_published_with_it() -> None:
    digests = []

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        register_all(state, launcher)
        for step in (7, 8):
            state.progress("worker", 0, 0, step, {"total_steps": 10})
            await state.reconcile_once()
            # Publication is throttled by what a snapshot cost in real time
            # (a loaded machine stretches the gap past any fake-clock step):
            # this test is about what one publication holds, so it forces one.
            await state.publisher.publish(force=True)
            status = json.loads(launcher.kv[STATUS_KEY])
            summary = JobSummary.from_json(launcher.kv[SUMMARY_KEY])
            assert summary == JobSummary.of(status)
            assert (summary.lead_step, summary.total_steps) == (step, 10)
            digests.append(summary.digest)
        state.request_kill("done")

    run(job(), scenario)
    assert digests[0] == digests[1]  # a step alone is not a change to re-read


def test_status_too_big_for_the_kv_store_drops_history_and_failures_are_survived(
    monkeypatch: Any, caplog: Any
) -> None:
    import am.publish

    monkeypatch.setattr(am.publish, "MAX_STATUS_BYTES", 2000)
    calls = {"n": 0}

    class FlakyKv(FakeLauncher):
        async def publish(self, key: str, value: str) -> None:
            calls["n"] += 1
            if calls["n"] <= 3:
                raise RuntimeError("kv store unavailable")
            await super().publish(key, value)

    launcher = FlakyKv()
    clock = Clock()

    async def main() -> JobState:
        state = JobState(job(tasks={"worker": 20}), launcher, clock=clock, tick=0.01)
        await state.start()
        for _ in range(6):
            clock.now += 5  # a refresh is due even with nothing new
            await state.reconcile_once()
        state.request_kill("test over")
        await asyncio.wait_for(state.until_done(), 5)
        return state

    state = asyncio.run(main())
    assert state.phase is Phase.KILLED  # publishing failed, the job went on
    failures = [r for r in caplog.records if "could not publish" in r.getMessage()]
    assert len(failures) == 1, failures  # said once, not every pass
    assert calls["n"] > 3
    published = json.loads(launcher.kv[STATUS_KEY])
    assert len(published["tasks"]) == 20
    assert all(t["history"] == [] for t in published["tasks"])  # too big with it


def test_a_killed_job_whose_master_is_gone_says_so_without_a_traceback(
    caplog: Any,
) -> None:
    # YARN kills skein's master with the application: the last publish then
    # fails, which is expected and not a bug to trace.
    class GoneOnKill(FakeLauncher):
        async def set_progress(self, progress: float) -> None:
            if progress >= 1.0:  # the last one, once YARN is killing the app
                raise ConnectionError("Unable to connect to application")

    async def main() -> JobState:
        state = JobState(job(tasks={"worker": 1}), GoneOnKill(), tick=0.01)
        await state.start()
        state.request_kill("killed by YARN")
        await asyncio.wait_for(state.until_done(), 5)
        return state

    state = asyncio.run(main())
    assert state.phase is Phase.KILLED
    said = [r for r in caplog.records if "final status" in r.getMessage()]
    assert said and all(r.exc_info is None for r in said), said
    assert "Unable to connect" in said[0].getMessage()
