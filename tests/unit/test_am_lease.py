"""A server set's lease (am/lease.py): the decision as a table, the master
ending an orphaned set with the reason, and the Renew call over mutual TLS."""

from __future__ import annotations

import pytest
from _am_support import LiveMaster, job
from _state_support import Clock, form, run

from am.launcher import FakeLauncher
from am.lease import FIRST_RENEWAL_MIN, LeaseAction, LeaseView, decide
from am.state import JobState
from tfyarn._proto import master_pb2 as pb
from tfyarn.contract.channel import MasterClient
from tfyarn.contract.status import Phase, TaskState
from tfyarn.spec import Role

KEEP, EXPIRE = LeaseAction.KEEP, LeaseAction.EXPIRE

# bound, since_start, since_renewal, settled, expected
CASES = [
    (0, 10_000, None, False, KEEP),  # no lease: a job, or a detached set
    (60, 10_000, 59, False, KEEP),  # renewed within the bound
    (60, 10_000, 60, False, KEEP),  # at the bound
    (60, 10_000, 61, False, EXPIRE),  # past it
    (15, 100, 16, False, EXPIRE),  # a short lease
    (60, 10_000, 600, True, KEEP),  # ending anyway: nothing to add
    (60, 59, None, False, KEEP),  # the client has not renewed yet, in time
    (60, 61, None, False, EXPIRE),  # never renewed
    (10, FIRST_RENEWAL_MIN - 1, None, False, KEEP),  # the first gets at least this
    (10, FIRST_RENEWAL_MIN + 1, None, False, EXPIRE),
]


@pytest.mark.parametrize(("bound", "started", "renewed", "settled", "want"), CASES)
def test_each_situation_gets_its_decision(
    bound: float,
    started: float,
    renewed: float | None,
    settled: bool,
    want: LeaseAction,
) -> None:
    view = LeaseView(
        bound=bound, since_start=started, since_renewal=renewed, settled=settled
    )
    got = decide(view)
    assert got.action is want
    if want is EXPIRE:
        first = max(bound, FIRST_RENEWAL_MIN) if renewed is None else bound
        assert "server set ended" in got.reason and f"bound {first:.0f} s" in got.reason


def server_set(lease: float = 10.0) -> object:
    return job(tasks={"ps": 1, "worker": 2}, servers=True, lease=lease, max_restarts=3)


def test_a_set_whose_client_stops_renewing_ends_killed_with_the_reason() -> None:
    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.lease.renew(clock.now, "test")
        for _ in range(3):  # renewed every 5 s: the set stays
            clock.now += 5
            state.lease.renew(clock.now, "test")
            await state.reconcile_once()
        assert state.outcome is None and state.phase is Phase.RUNNING
        clock.now += 10.5  # the client is gone
        await state.reconcile_once()

    state, launcher = run(server_set(), scenario)
    assert state.phase is Phase.KILLED
    assert "lease expired" in state.diagnostics and "10 s" in state.diagnostics
    assert launcher.final is not None and launcher.final[0] == "KILLED"


def test_a_detached_set_has_no_lease() -> None:
    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        clock.now += 3600
        await state.reconcile_once()
        assert state.outcome is None
        state.stop_job("stopped by tfyarn kill", 1)
        clock.now += 100
        await state.reconcile_once()

    state, _ = run(server_set(lease=0), scenario)
    assert state.phase is Phase.KILLED


def test_a_lost_worker_is_replaced_alone_and_a_lost_ps_restarts_the_set() -> None:
    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        form(state, launcher)
        state.lease.renew(clock.now, "test")
        state.task_end("worker", 1, 0, -9, "")
        clock.now += 1
        state.lease.renew(clock.now, "test")
        await state.reconcile_once()
        worker1, worker0 = state.tasks[(Role.WORKER, 1)], state.tasks[(Role.WORKER, 0)]
        assert worker1.attempt == 1 and worker0.attempt == 0
        assert state.cluster_restarts == 0
        state.task_end("ps", 0, 0, -9, "")
        clock.now += 1
        state.lease.renew(clock.now, "test")
        await state.reconcile_once()
        assert state.cluster_restarts == 1
        assert state.tasks[(Role.WORKER, 0)].state is not TaskState.RUNNING
        state.stop_job("done", 1)
        clock.now += 100
        await state.reconcile_once()

    run(server_set(), scenario)


def test_renew_answers_the_bound_and_the_restarts(
    credentials: tuple[bytes, bytes],
) -> None:
    master = LiveMaster(server_set(lease=30), credentials).start()
    client = MasterClient(master.address, credentials)
    try:
        reply = client.renew(pb.RenewRequest(holder="me@gateway pid 1"), timeout=5)
        assert reply.lease_seconds == 30 and reply.cluster_restarts == 0
        assert reply.phase in ("LAUNCHING", "REGISTERING")
        assert master.call(lambda: master.state.lease.holder) == "me@gateway pid 1"
    finally:
        client.close()
        master.call(lambda: master.state.request_kill("test over"))
        master.wait_done()
