"""The reconcile loop's kills: a kill YARN refuses never aborts a pass.

Each kill path (a stop not heeded, an old attempt's container, a relaunch dropped
because the job finished) logs a refused kill once, tries again on the next
passes, and gives up after KILL_ATTEMPTS, so the job still ends.
"""

from __future__ import annotations

from typing import Any

import pytest
from _am_support import job
from _state_support import Clock, register_all, run

from am.launcher import FakeLauncher
from am.policy import Failure
from am.reconcile import KILL_ATTEMPTS
from am.state import JobState
from tfyarn.contract.status import Phase, TaskState
from tfyarn.spec import Role


def kill_warnings(caplog: pytest.LogCaptureFixture, container_id: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "am.reconcile" and f"container {container_id} " in r.getMessage()
    ]


def test_a_stop_not_heeded_whose_kill_fails_is_retried_then_given_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # worker:0 leads; when it succeeds the ps is told to stop. With no stream
    # to hear it, the master kills its container at once: YARN refuses.
    spec = job(tasks={"ps": 1, "worker": 1}, stop_grace=1)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        register_all(state, launcher)
        launcher.kill_error = RuntimeError("YARN is busy")
        state.task_end("worker", 0, 0, 0, "")
        ps = state.tasks[(Role.PS, 0)]
        for n in range(1, KILL_ATTEMPTS):
            clock.now += 1
            await state.reconcile_once()  # does not raise
            assert launcher.kill_attempts == ["ps_0"] * n
            assert ps.state is TaskState.RUNNING  # not claimed killed
            assert state.outcome is None
        clock.now += 1
        await state.reconcile_once()  # the last attempt: given up
        assert launcher.kill_attempts == ["ps_0"] * KILL_ATTEMPTS
        assert ps.state is TaskState.KILLED
        assert "could not kill container ps_0" in ps.history[-1]
        clock.now += 1
        await state.reconcile_once()
        assert len(launcher.kill_attempts) == KILL_ATTEMPTS  # no more tries

    state, launcher = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED
    assert launcher.killed == []
    warnings = kill_warnings(caplog, "ps_0")
    assert len(warnings) == 2, warnings  # the first refusal, then giving up
    assert "YARN is busy" in warnings[0] and "gave up" in warnings[1]


def test_a_kill_refused_once_is_done_on_the_next_pass(
    caplog: pytest.LogCaptureFixture,
) -> None:
    spec = job(tasks={"ps": 1, "worker": 1}, stop_grace=1)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        register_all(state, launcher)
        launcher.kill_error = RuntimeError("YARN is busy")
        state.task_end("worker", 0, 0, 0, "")
        clock.now += 1
        await state.reconcile_once()
        assert state.tasks[(Role.PS, 0)].state is TaskState.RUNNING
        launcher.kill_error = None
        clock.now += 1
        await state.reconcile_once()
        assert state.tasks[(Role.PS, 0)].state is TaskState.KILLED

    state, launcher = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED
    assert launcher.kill_attempts == ["ps_0", "ps_0"] and launcher.killed == ["ps_0"]
    assert "container killed by the master" in state.tasks[(Role.PS, 0)].history[-1]
    assert len(kill_warnings(caplog, "ps_0")) == 1


def test_an_old_attempt_whose_kill_fails_is_killed_on_a_later_pass_then_replaced() -> (
    None
):
    # A silent worker of a ParameterServerStrategy job is replaced alone; its
    # old container is killed at once (no grace for a wedged process).
    spec = job(
        tasks={"chief": 1, "ps": 1, "worker": 2}, max_restarts=1, heartbeat_timeout=10
    )

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        register_all(state, launcher)
        launcher.kill_error = RuntimeError("YARN is busy")
        clock.now += 11
        for role, index in (("chief", 0), ("ps", 0), ("worker", 0)):
            state.heartbeat(role, index, 0)
        await state.reconcile_once()  # worker:1 lost, its kill refused
        worker = state.tasks[(Role.WORKER, 1)]
        assert worker.state is TaskState.RELAUNCHING and worker.attempt == 1
        assert launcher.kill_attempts == ["worker_1"]
        clock.now += 1
        await state.reconcile_once()  # refused again: still not relaunched
        assert launcher.kill_attempts == ["worker_1"] * 2
        assert "worker_2" not in launcher.containers
        launcher.kill_error = None
        clock.now += 1
        await state.reconcile_once()  # killed
        clock.now += 1
        await state.reconcile_once()  # seen ended: the new attempt is asked for
        assert launcher.killed == ["worker_1"]
        assert "worker_2" in launcher.containers
        assert [h.split(" ", 1)[1] for h in worker.history].count(
            "killing the old container worker_1"
        ) == 1
        state.request_kill("test over")

    state, _ = run(spec, scenario)
    assert state.phase is Phase.KILLED


def test_a_relaunch_dropped_at_the_end_kills_the_old_container_even_if_refused_first(
    caplog: Any,
) -> None:
    spec = job(tasks={"chief": 1, "ps": 1, "worker": 2}, max_restarts=1, stop_grace=30)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        register_all(state, launcher)
        worker = state.tasks[(Role.WORKER, 1)]
        # Silent: replaced in a new container; the old one still up.
        state.mark(worker, TaskState.LOST, "no heartbeat")
        state.on_failure(worker, "worker:1 sent no heartbeat", Failure.SILENT)
        assert worker.retiring == "worker_1"
        launcher.kill_error = RuntimeError("YARN is busy")
        state.task_end("chief", 0, 0, 0, "")  # the job is finishing
        clock.now += 1
        await state.reconcile_once()  # nothing raised, the relaunch is still owed
        assert "worker_1" in launcher.kill_attempts
        assert worker in state.relaunch  # its old container still to be killed
        launcher.kill_error = None
        clock.now += 1
        await state.reconcile_once()
        assert "worker_1" in launcher.killed
        assert worker not in state.relaunch and worker.state is TaskState.KILLED
        assert "not relaunched: the job finished" in worker.history[-1]
        # Ended once, by the relaunch path: no container of its own was killed.
        assert [h for h in worker.history if "KILLED:" in h] == [worker.history[-1]]

    state, launcher = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED
    assert "worker_2" not in launcher.containers  # never relaunched
