"""Helpers for the master and runtime unit tests: credentials and a live master.

The master here is the real one (am.state + am.servicer over mutual TLS) with
the in-memory FakeLauncher in place of YARN.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import skein
from grpc_health.v1 import health

from am.launcher import FakeLauncher
from am.servicer import create_server, mark_serving
from am.state import JobState
from tfyarn.contract.channel import credentials_of
from tfyarn.spec import JobSpec


def new_credentials() -> tuple[bytes, bytes]:
    """A fresh (cert, key) pair like the one skein makes for every application."""
    return credentials_of(skein.Security.new_credentials())


def job(**kwargs: Any) -> JobSpec:
    """A small job spec; ``tasks`` as {"worker": 2, "ps": 1}."""
    counts = kwargs.pop("tasks", {"worker": 1})
    kwargs.setdefault("script", "train.py")
    kwargs.setdefault("registration_timeout", 30.0)
    # Fail at the first failure and start scripts plainly, unless a test says so.
    kwargs = {"max_restarts": 0, "preimport": (), **kwargs}
    tasks = {role: {"count": n, "memory_mib": 512} for role, n in counts.items()}
    return JobSpec(tasks=tasks, **kwargs)


@dataclass
class LiveMaster:
    """A master serving on 127.0.0.1 in a background event loop thread."""

    spec: JobSpec
    credentials: tuple[bytes, bytes]
    tick: float = 0.05
    launcher: FakeLauncher = field(default_factory=FakeLauncher)
    state: JobState | None = None
    address: str = ""
    outcome: Any = None
    _loop: asyncio.AbstractEventLoop | None = None
    _thread: threading.Thread | None = None
    _ready: threading.Event = field(default_factory=threading.Event)
    _done: threading.Event = field(default_factory=threading.Event)

    def start(self) -> LiveMaster:
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "master did not start"
        return self

    def _main(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        cert, key = self.credentials
        self.state = JobState(self.spec, self.launcher, tick=self.tick)
        health_servicer = health.aio.HealthServicer()
        server, port = create_server(
            self.state, cert, key, "127.0.0.1:0", health_servicer=health_servicer
        )
        self.address = self.state.master_address = f"127.0.0.1:{port}"
        await server.start()
        await mark_serving(health_servicer)
        self._ready.set()
        try:
            self.outcome = await self.state.run()
        finally:
            self._done.set()
            await server.stop(grace=0.5)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` on the master's loop (the state is not thread-safe)."""
        assert self._loop is not None
        result: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                result["value"] = fn()
            finally:
                done.set()

        self._loop.call_soon_threadsafe(run)
        assert done.wait(10)
        return result.get("value")

    def grant_all(self) -> None:
        def grant() -> None:
            for cid, info in self.launcher.containers.items():
                if info.state == "REQUESTED":
                    self.launcher.grant(cid)

        self.call(grant)

    def wait_done(self, timeout: float = 30) -> Any:
        assert self._done.wait(timeout), "the master did not finish in time"
        return self.outcome
