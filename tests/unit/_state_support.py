"""Driving the master's state machine by hand: a clock, the loop, registrations.

The master's ``JobState`` runs with the in-memory ``FakeLauncher`` in place of
YARN and a clock the test moves; these helpers are what the state, gang,
reconcile, recovery, disruption and record tests share.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from am.launcher import FakeLauncher
from am.state import JobState
from tfyarn._proto import master_pb2 as pb
from tfyarn.spec import JobSpec

# A ParameterServerStrategy job: a coordinating chief, one ps, two workers.
PS_JOB = {"chief": 1, "ps": 1, "worker": 2}


class Clock:
    """Time as the test says: ``now`` moves only when the test moves it."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(
    spec: JobSpec, scenario: Callable[[JobState, FakeLauncher, Clock], Awaitable[None]]
) -> tuple[JobState, FakeLauncher]:
    """Run the master's loop with ``scenario`` driving it; return when it ends."""
    launcher = FakeLauncher()
    clock = Clock()

    async def main() -> None:
        state = JobState(spec, launcher, clock=clock, tick=0.01, master_address="m:1")
        await state.start()  # the loop's beginning: every task's container asked for
        await state.reconcile_once()  # and its first pass
        await scenario(state, launcher, clock)
        await asyncio.wait_for(state.until_done(), 5)
        result["state"] = state

    result: dict[str, Any] = {}
    asyncio.run(main())
    return result["state"], launcher


def register(
    state: JobState, role: str, index: int, port: int, *, attempt: int = 0
) -> None:
    """Task ``role:index`` (``attempt``) registers at ``h:port``."""
    state.register(
        pb.RegisterTaskRequest(
            task=pb.TaskKey(role=role, index=index),
            attempt=attempt,
            host="h",
            port=port,
        )
    )


def reregister(state: JobState, role: str, index: int, attempt: int, port: int) -> None:
    """A later attempt of a task registers."""
    register(state, role, index, port, attempt=attempt)


def form(state: JobState, launcher: FakeLauncher) -> dict[str, int]:
    """Grant every container and register every task; return ports by task."""
    for cid in list(launcher.containers):
        launcher.grant(cid)
    ports = {}
    for n, (role, index) in enumerate(state.spec.task_keys()):
        register(state, role.value, index, 2000 + n)
        ports[f"{role.value}:{index}"] = 2000 + n
    return ports


def register_all(state: JobState, launcher: FakeLauncher) -> None:
    """Grant every container and register every task."""
    form(state, launcher)


async def tick(state: JobState, clock: Clock) -> None:
    """One second later, one reconcile pass (it polls YARN once per tick)."""
    clock.now += 1
    await state.reconcile_once()
