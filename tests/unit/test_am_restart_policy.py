"""The restart policy in the master's state: a bug is not a transient failure.

The same script error twice ends the job at once, whatever the budget; a
task killed by a signal or lost is restarted however often; ``restart_policy``
and ``retry_exit_codes`` say which failures are restarted.
"""

from __future__ import annotations

from typing import Any

from _am_support import job
from _state_support import PS_JOB, Clock, form, reregister, run, tick

from am.launcher import FakeLauncher
from am.state import JobState
from tfyarn.contract.status import Phase
from tfyarn.spec import Role

TRACEBACK = """\
Traceback (most recent call last):
  File "/container/train.py", line 12, in <module>
    main()
  File "/container/train.py", line 9, in main
    raise ValueError(f"bad input: {path}")
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
ValueError: bad input: /data/x
"""


async def fail_worker(
    state: JobState,
    launcher: FakeLauncher,
    clock: Clock,
    ports: dict[str, int],
    *,
    code: int,
    tail: str = TRACEBACK,
) -> None:
    """worker:1's current attempt ends with ``code``; its replacement registers
    (if the master replaced it)."""
    worker = state.tasks[(Role.WORKER, 1)]
    attempt, container = worker.attempt, worker.container_id or ""
    state.task_end("worker", 1, attempt, code, tail)
    launcher.end(container, "FAILED")
    await tick(state, clock)
    await tick(state, clock)
    if worker.attempt == attempt + 1 and worker.container_id:
        launcher.grant(worker.container_id)
        reregister(state, "worker", 1, worker.attempt, ports["worker:1"])


def ends_after(spec: Any, codes: list[int], tail: str = TRACEBACK) -> JobState:
    """Run a PS job whose worker:1 fails with each of ``codes`` in turn."""

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        for code in codes:
            await fail_worker(state, launcher, clock, ports, code=code, tail=tail)
            if state.outcome is not None:
                return
        state.request_kill("test over")

    state, _ = run(spec, scenario)
    return state


def test_the_same_error_twice_ends_the_job_at_once_whatever_the_budget() -> None:
    state = ends_after(job(tasks=PS_JOB, max_restarts=10, stop_grace=1), [1, 1, 1])
    assert state.phase is Phase.FAILED
    assert state.tasks[(Role.WORKER, 1)].attempt == 1  # one replacement, not ten
    assert state.budget_used == 1
    first, second, *rest = state.diagnostics.splitlines()
    assert first == "ValueError: bad input: /data/x"
    assert second.startswith("This error repeated: a worker task failed with it")
    text = "\n".join(rest)
    assert "1. worker:1 (attempt 0" in text and "2. worker:1 (attempt 1" in text
    # The stderr excerpt leads with the error too, with no ^^^^ markers.
    assert "Last lines of its stderr:\n  ValueError: bad input: /data/x\n" in text
    assert "^^^" not in state.diagnostics


def test_different_errors_are_restarted_within_the_budget() -> None:
    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        for n in range(3):
            tail = TRACEBACK.replace("/data/x", f"/data/{n}")
            await fail_worker(state, launcher, clock, ports, code=1, tail=tail)
        assert state.outcome is None
        state.request_kill("test over")

    state, _ = run(job(tasks=PS_JOB, max_restarts=10, stop_grace=1), scenario)
    assert state.tasks[(Role.WORKER, 1)].attempt == 3
    assert state.budget_used == 3


def test_a_task_killed_by_a_signal_is_restarted_every_time() -> None:
    # SIGKILL twice (an OOM killer, a preemption): bad luck, not a bug.
    state = ends_after(job(tasks=PS_JOB, max_restarts=10, stop_grace=1), [-9, -9, -9])
    assert state.phase is Phase.KILLED  # ended by the test, not by the policy
    assert state.tasks[(Role.WORKER, 1)].attempt == 3
    assert state.budget_used == 3
    assert "killed by signal 9" in state.failures[0]


def test_retry_exit_codes_ask_for_a_restart_even_when_they_repeat() -> None:
    spec = job(tasks=PS_JOB, max_restarts=2, stop_grace=1, retry_exit_codes=[75])
    state = ends_after(spec, [75, 75, 75])
    assert state.phase is Phase.FAILED
    assert state.tasks[(Role.WORKER, 1)].attempt == 2
    assert "restart budget is used up (2 of max_restarts=2)" in state.diagnostics


def test_transient_only_fails_on_a_script_error_but_restarts_a_signal() -> None:
    spec = job(
        tasks=PS_JOB, max_restarts=5, stop_grace=1, restart_policy="transient_only"
    )
    state = ends_after(spec, [-9, 1])
    assert state.phase is Phase.FAILED
    assert state.tasks[(Role.WORKER, 1)].attempt == 1
    first = state.diagnostics.splitlines()[0]
    assert first.startswith("worker:1 (attempt 1") and "exited with code 1" in first
    assert "restart_policy=transient_only" in state.diagnostics


def test_never_restarts_nothing() -> None:
    spec = job(tasks=PS_JOB, max_restarts=5, stop_grace=1, restart_policy="never")
    state = ends_after(spec, [-9])
    assert state.phase is Phase.FAILED
    assert state.tasks[(Role.WORKER, 1)].attempt == 0
    assert "restart_policy=never" in state.diagnostics


def test_a_later_master_attempt_remembers_the_errors_seen() -> None:
    spec = job(tasks=PS_JOB, max_restarts=10, stop_grace=1)
    first = ends_after(spec, [1])
    record = first.restart_record()
    assert record["errors_seen"] == ["worker: ValueError: bad input: /data/x"]
    again = JobState(spec, FakeLauncher())
    again.resume_after_master_loss(2, record)
    assert again.errors_seen == {"worker: ValueError: bad input: /data/x"}
