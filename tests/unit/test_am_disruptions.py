"""Containers YARN takes back (preemption, a released node) in the master's state.

They are not the job's fault: the task comes back without spending
max_restarts, within max_disruptions. YARN faked, time controlled.
"""

from __future__ import annotations

import pytest
from _am_support import job
from _state_support import PS_JOB, Clock, form, reregister, run, tick

from am.launcher import FakeLauncher
from am.reconcile import CONTAINER_END_HOLD, SIGTERM_HOLD
from am.state import JobState
from tfyarn.client.narrator import Narrator, describe_task, restart_lines
from tfyarn.contract.exit_codes import disruption, yarn_exit_status
from tfyarn.contract.status import JobStatus, Phase, TaskState, TaskStatus
from tfyarn.spec import Role

# What the ResourceManager tells skein's AM of a preempted container (exit
# status -102), which skein passes on as the container's exit message.
PREEMPTED = "Container preempted by scheduler"
# What skein says of a container over its memory (-104): the job's own doing.
OVER_MEMORY = (
    "Container [pid=4242,containerID=container_0_0001_01_000003] is running "
    "beyond physical memory limits. Current usage: 1.1 GB of 1 GB physical "
    "memory used. Killing container. Exit code: -104"
)


async def until_relaunched(state: JobState, clock: Clock, task_key: str) -> None:
    """Ticks until the task's next attempt asked YARN for its container (bounded)."""
    role, index = task_key.split(":")
    task = state.tasks[(Role(role), int(index))]
    for _ in range(10):
        await tick(state, clock)
        if task.state is TaskState.REQUESTED and task.attempt > 0:
            return
    raise AssertionError(f"{task_key} was not relaunched: {task.history}")


async def finish(state: JobState, clock: Clock) -> None:
    state.task_end("chief", 0, state.tasks[(Role.CHIEF, 0)].attempt, 0, "")
    clock.now += 60
    await state.reconcile_once()


def test_a_taken_back_attempt_reads_as_its_disruption_not_lost_or_failed() -> None:
    lost = TaskStatus(
        task="worker:1",
        role="worker",
        index=1,
        state=TaskState.LOST,
        disruption="preempted",
    )
    assert lost.shown_state() == "PREEMPTED"
    assert describe_task(lost) == "worker:1 PREEMPTED"
    failed = TaskStatus(
        task="ps:0",
        role="ps",
        index=0,
        state=TaskState.FAILED,
        exit_code=-15,
        disruption="preempted",
    )
    # The SIGTERM was YARN's: no words blaming the script or an administrator.
    assert describe_task(failed) == "ps:0 PREEMPTED (exit code -15)"
    plain = TaskStatus(task="ps:0", role="ps", index=0, state=TaskState.LOST)
    assert plain.shown_state() == "LOST"


@pytest.mark.parametrize(
    ("words", "status", "word"),
    [
        (PREEMPTED, -102, "preempted"),
        ("Container released on a *lost* node", -100, "released"),
        ("Exit code: -106 Container Killed by ResourceManager", -106, ""),
        ("Most of the disks failed. 1/1 local-dirs are bad", -101, "disks failed"),
        (OVER_MEMORY, -104, ""),
        ("Container failed during execution, see logs", None, ""),
    ],
)
def test_yarn_words_name_the_exit_status_and_whether_it_was_taken_back(
    words: str, status: int | None, word: str
) -> None:
    assert yarn_exit_status(words) == status
    expected = word or ("killed by the ResourceManager" if status == -106 else "")
    assert disruption(words) == expected


def test_a_preempted_worker_comes_back_without_spending_the_budget() -> None:
    # No restart budget at all: a charged failure would fail the job.
    spec = job(tasks=PS_JOB, max_restarts=0, max_disruptions=3, stop_grace=2)
    seen: dict[str, object] = {}

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        launcher.end("worker_1", "FAILED", PREEMPTED)
        await tick(state, clock)
        clock.now += 4  # past END_REPORT_GRACE: it did not report
        await state.reconcile_once()
        worker = state.tasks[(Role.WORKER, 1)]
        assert any("LOST: preempted: container FAILED" in h for h in worker.history)
        await until_relaunched(state, clock, "worker:1")
        assert worker.attempt == 1 and launcher.started[0][0] == "worker_2"
        snap = JobStatus.from_dict(state.snapshot())
        seen["relaunched"] = snap
        # Nobody else was touched; it comes back at its address, same cluster.
        for key in ("chief", "ps"):
            assert state.tasks[(Role(key), 0)].state is TaskState.RUNNING
        launcher.grant("worker_2")
        reregister(state, "worker", 1, 1, ports["worker:1"])
        assert worker.state is TaskState.RUNNING and state.generation == 1
        seen["back"] = JobStatus.from_dict(state.snapshot()).task("worker:1")
        await finish(state, clock)

    state, _ = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED, state.diagnostics
    assert state.restarts == 0 and state.budget_used == 0
    assert state.restart_reasons == [] and state.failures == []
    assert len(state.disruption_reasons) == 1
    assert state.disruption_reasons[0].startswith("worker:1 (")
    assert "was preempted: YARN took its container back" in state.disruption_reasons[0]
    snap = seen["relaunched"]
    assert isinstance(snap, JobStatus)
    assert snap.disruptions == 1 and snap.max_disruptions == 3
    assert snap.disruption_kinds == {"preempted": 1} and snap.restarts == 0
    task = snap.task("worker:1")
    assert task is not None and task.disruption == "preempted"
    assert "was preempted" in task.failures[0]
    assert describe_task(task) == "worker:1 REQUESTED (preempted, attempt 1, h:2003)"
    lines = restart_lines(snap)
    assert lines[0] == (
        "containers taken back by YARN (1 of max_disruptions=3, not charged to "
        "max_restarts):"
    )
    assert (
        Narrator()
        .update(snap)[1]
        .startswith("taken back by YARN 1 (not charged to max_restarts): worker:1 (")
    )
    back = seen["back"]
    assert back is not None and back.disruption == ""  # type: ignore[union-attr]


def test_a_preempted_ps_restarts_the_cluster_without_spending_the_budget() -> None:
    spec = job(tasks=PS_JOB, max_restarts=0, stop_grace=2)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        launcher.end("ps_0", "FAILED", PREEMPTED)
        for _ in range(6):
            await tick(state, clock)
            if state.phase is Phase.RESTARTING:
                break
        assert state.phase is Phase.RESTARTING
        await until_relaunched(state, clock, "ps:0")
        launcher.grant("ps_1")
        for role, index in spec.task_keys():
            reregister(state, role.value, index, 1, ports[f"{role.value}:{index}"])
        assert state.generation == 2 and state.phase is Phase.RUNNING
        await finish(state, clock)

    state, _ = run(spec, scenario)
    assert state.phase is Phase.SUCCEEDED, state.diagnostics
    assert state.cluster_restarts == 1
    assert state.restarts == 0 and state.budget_used == 0
    assert state.disruption_kinds == {"preempted": 1}


def test_more_than_max_disruptions_fails_the_job_saying_so() -> None:
    spec = job(tasks=PS_JOB, max_restarts=5, max_disruptions=1, stop_grace=2)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        ports = form(state, launcher)
        launcher.end("worker_1", "FAILED", PREEMPTED)
        await until_relaunched(state, clock, "worker:1")
        launcher.grant("worker_2")
        reregister(state, "worker", 1, 1, ports["worker:1"])
        launcher.end("worker_2", "FAILED", "Container released on a *lost* node")
        for _ in range(10):
            await tick(state, clock)
            if state.outcome is not None:
                break

    state, launcher = run(spec, scenario)
    assert state.phase is Phase.FAILED
    assert launcher.final is not None
    diagnostics = launcher.final[1]
    assert diagnostics.startswith("worker:1 (")
    assert "was released: YARN took its container back" in diagnostics
    assert "more than max_disruptions=1 times" in diagnostics
    assert "1. worker:1" in diagnostics and "was preempted" in diagnostics
    assert "--max_disruptions" in diagnostics
    # Neither spent the restart budget.
    assert state.budget_used == 0 and state.restarts == 0


def test_a_container_over_its_memory_still_spends_the_budget() -> None:
    spec = job(tasks=PS_JOB, max_restarts=1, max_disruptions=3, stop_grace=2)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        launcher.end("worker_1", "FAILED", OVER_MEMORY)
        await until_relaunched(state, clock, "worker:1")
        assert state.budget_used == 1 and state.restarts == 1
        worker = state.tasks[(Role.WORKER, 1)]
        assert "was lost" in worker.failures[0]
        assert state.disrupted.get(worker) is None
        state.request_kill("done")

    state, _ = run(spec, scenario)
    assert state.disruption_reasons == [] and state.disruption_kinds == {}
    snap = JobStatus.from_dict(state.snapshot())
    assert snap.disruptions == 0 and snap.budget_used == 1


def test_a_sigterm_from_a_preemption_waits_for_yarn_and_spends_nothing() -> None:
    """The runtime passes YARN's SIGTERM on and reports it before YARN's word
    on the container reaches the master: the verdict waits for that word."""
    spec = job(tasks=PS_JOB, max_restarts=0, stop_grace=2)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.task_end("worker", 1, 0, -15, "Terminated")
        worker = state.tasks[(Role.WORKER, 1)]
        await state.reconcile_once()
        # Not judged yet: neither a failure nor a restart.
        assert state.outcome is None and worker.attempt == 0
        assert worker.state is TaskState.FAILED
        launcher.end("worker_1", "FAILED", PREEMPTED)
        await until_relaunched(state, clock, "worker:1")
        assert worker.failures[0].startswith("worker:1 (")
        assert "was preempted" in worker.failures[0]
        snap = JobStatus.from_dict(state.snapshot())
        assert snap.disruptions == 1
        state.request_kill("done")

    state, _ = run(spec, scenario)
    assert state.budget_used == 0 and state.restarts == 0


def test_a_sigterm_nobody_took_back_is_an_ordinary_signal_after_the_hold() -> None:
    spec = job(tasks=PS_JOB, max_restarts=1, stop_grace=2)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.task_end("worker", 1, 0, 143, "Terminated")
        worker = state.tasks[(Role.WORKER, 1)]
        clock.now += SIGTERM_HOLD / 2
        await state.reconcile_once()
        assert worker.attempt == 0 and state.budget_used == 0
        clock.now += SIGTERM_HOLD
        await state.reconcile_once()
        # Charged, and restarted in place: its container is alive and waits.
        assert state.budget_used == 1 and worker.attempt == 1
        assert worker.in_place_stop is not None
        state.request_kill("done")

    state, _ = run(spec, scenario)
    assert state.disruption_reasons == []


def test_a_sigterm_with_no_budget_fails_the_job_once_the_hold_ends() -> None:
    spec = job(tasks={"worker": 2}, max_restarts=0)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        for cid in list(launcher.containers):
            launcher.grant(cid)
        form_ports = {0: 2000, 1: 2001}
        for index, port in form_ports.items():
            reregister(state, "worker", index, 0, port)
        state.task_end("worker", 1, 0, -15, "Terminated")
        launcher.end("worker_1", "FAILED", "Container failed during execution")
        await tick(state, clock)

    state, launcher = run(spec, scenario)
    assert state.phase is Phase.FAILED
    assert launcher.final is not None and "exited with code -15" in launcher.final[1]


def test_a_new_master_attempt_goes_on_counting_disruptions() -> None:
    spec = job(tasks=PS_JOB, max_restarts=0, max_disruptions=4, stop_grace=2)
    record: dict[str, object] = {}

    async def first(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        launcher.end("worker_1", "FAILED", PREEMPTED)
        await until_relaunched(state, clock, "worker:1")
        record.update(state.restart_record())
        state.request_kill("done")

    run(spec, first)
    assert record["disruption_kinds"] == {"preempted": 1}
    state = JobState(spec, FakeLauncher())
    state.resume_after_master_loss(2, dict(record))
    assert len(state.disruption_reasons) == 1
    assert state.disruption_kinds == {"preempted": 1}
    assert JobStatus.from_dict(state.snapshot()).disruptions == 1


def test_a_runtime_sent_sigterm_itself_waits_longer_for_yarns_word() -> None:
    """YARN ends the whole container: the runtime reports ``container_ending``
    and the verdict waits past SIGTERM_HOLD, as YARN's word may take longer."""
    spec = job(tasks=PS_JOB, max_restarts=0, stop_grace=2)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.task_end("worker", 1, 0, -15, "Terminated", container_ending=True)
        worker = state.tasks[(Role.WORKER, 1)]
        clock.now += SIGTERM_HOLD * 4
        await state.reconcile_once()
        assert state.outcome is None and worker.attempt == 0  # still waiting
        launcher.end("worker_1", "FAILED", PREEMPTED)
        await until_relaunched(state, clock, "worker:1")
        assert "was preempted" in worker.failures[0]
        state.request_kill("done")

    state, _ = run(spec, scenario)
    assert state.budget_used == 0 and len(state.disruption_reasons) == 1


def test_a_container_ending_without_yarns_word_is_judged_after_the_long_hold() -> None:
    spec = job(tasks=PS_JOB, max_restarts=0, stop_grace=2)

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.task_end("worker", 1, 0, 1, "Traceback", container_ending=True)
        clock.now += CONTAINER_END_HOLD - 1
        await state.reconcile_once()
        assert state.outcome is None
        clock.now += 2
        await state.reconcile_once()

    state, launcher = run(spec, scenario)
    assert state.phase is Phase.FAILED and state.disruption_reasons == []
    assert launcher.final is not None and "exited with code 1" in launcher.final[1]
