"""Helpers the unit tests share: credentials, job specs, a live master, runtimes
run against it, the master's status snapshot and Hadoop token files.

The master here is the real one (am.state + am.servicer over mutual TLS) with
the in-memory FakeLauncher in place of YARN.
"""

from __future__ import annotations

import asyncio
import io
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import skein
from grpc_health.v1 import health

from am.launcher import FakeLauncher
from am.servicer import create_server, mark_serving
from am.state import JobState
from tfyarn.contract import tokens
from tfyarn.contract.channel import credentials_of
from tfyarn.contract.status import JobStatus, Phase, TaskState, TaskStatus
from tfyarn.contract.tokens import HDFS_KIND, Token
from tfyarn.runtime import Runtime, TaskContext
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


# -- runtimes against a live master ---------------------------------------------

# A task's script: records its arguments and tfyarn's variables in
# ROLE_INDEX.json; ps waits to be stopped; EXIT_CODE=N fails with a traceback.
SCRIPT = r"""
import json, os, sys, time
out = {"argv": sys.argv[1:], "env": {k: v for k, v in os.environ.items()
       if k.startswith(("TF_", "TFYARN_")) and k != "TFYARN_JOB"}}
role = os.environ["TFYARN_ROLE"]
with open(f"{role}_{os.environ['TFYARN_TASK_INDEX']}.json", "w") as f:
    json.dump(out, f)
if role == "ps":
    time.sleep(60)  # like server.join(): only a Stop ends it
code = int(os.environ.get("EXIT_CODE", "0"))
if code:
    print("Traceback (most recent call last):", file=sys.stderr)
    print("ValueError: the model exploded", file=sys.stderr)
sys.exit(code)
"""


def task_env(
    spec: JobSpec, master: LiveMaster, role: str, index: int, **extra: str
) -> dict[str, str]:
    """The environment the master gives a task's runtime (``extra`` added)."""
    return {
        "TFYARN_JOB": spec.to_env(),
        "TFYARN_ROLE": role,
        "TFYARN_TASK_INDEX": str(index),
        "TFYARN_ATTEMPT": "0",
        "TFYARN_MASTER_ADDRESS": master.address,
        "TFYARN_RESTART": "0",
        "NM_HOST": "127.0.0.1",
        "PATH": "/usr/bin:/bin",
        **extra,
    }


def run_tasks(
    spec: JobSpec,
    credentials: tuple[bytes, bytes],
    workdir: Path,
    *,
    script: str = SCRIPT,
    **extra: str,
) -> tuple[LiveMaster, dict[str, int]]:
    """Run every task's runtime in a thread against a live master; their codes."""
    (workdir / spec.script_name).write_text(script)
    master = LiveMaster(spec, credentials).start()
    master.grant_all()
    codes: dict[str, int] = {}

    def one(role: str, index: int) -> None:
        env = task_env(spec, master, role, index, **extra)
        rt = Runtime(
            TaskContext.from_env(env), credentials=credentials, workdir=workdir, env=env
        )
        codes[f"{role}:{index}"] = rt.run()

    threads = [
        threading.Thread(target=one, args=(role.value, index))
        for role, index in spec.task_keys()
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return master, codes


# -- the master's status snapshot ------------------------------------------------

# Text a page must escape wherever it shows it.
HOSTILE = "<script>alert('x')</script>"


def snapshot(**changes: Any) -> dict[str, Any]:
    """A snapshot as am/publish.py builds it (through the contract's own types)."""
    job = JobStatus(
        phase=Phase.RUNNING,
        generation=2,
        restarts=1,
        restart_reasons=[f"cluster restarted: ps:0 (node2) was lost {HOSTILE}"],
        max_restarts=3,
        budget_used=1,
        started=1_800_000_000.0,
        cluster_formed_at=1_800_000_012.5,
        master_address="node1:40000",
        lead="chief:0",
        diagnostics="",
        tasks=[
            TaskStatus(
                task="chief:0",
                role="chief",
                index=0,
                attempt=0,
                state=TaskState.RUNNING,
                address="node1:2222",
                container_id="chief_0",
                yarn_container_id="container_1800000000000_0007_01_000002",
                node="node1:8042",
                step=250,
                metrics={"loss": 0.125, "total_steps": 1000.0},
                last_heartbeat_age=1.5,
                history=["10:00:00 RUNNING: received cluster 2"],
            ),
            TaskStatus(
                task="ps:0",
                role="ps",
                index=0,
                attempt=1,
                state=TaskState.REGISTERED,
                address="node2:2223",
                container_id="ps_1",
                yarn_container_id="container_1800000000000_0007_01_000005",
                node="node2:8042",
                last_heartbeat_age=0.5,
                failures=["attempt 0: lost"],
                history=[f"10:00:05 REGISTERED: {HOSTILE}"],
            ),
            TaskStatus(
                task="worker:0",
                role="worker",
                index=0,
                state=TaskState.REQUESTED,
                # A node address that is not host:port must not become a link.
                node="javascript:alert(1)",
                yarn_container_id="container_x",
            ),
        ],
    ).to_dict()
    job.update(changes)
    return job


# -- Hadoop token files ------------------------------------------------------------


def identifier(issued_ms: int, max_ms: int, owner: str = "me@R.TEST") -> bytes:
    """A delegation token identifier, as Hadoop writes it, with these dates (ms)."""
    out = io.BytesIO()
    out.write(b"\x00")
    for text in (owner, "me", ""):
        tokens._write_bytes(out, text.encode())
    tokens._write_vlong(out, issued_ms)
    tokens._write_vlong(out, max_ms)
    tokens._write_vlong(out, 7)
    tokens._write_vlong(out, 2)
    return out.getvalue()


def hdfs_token(
    service: str, issued_ms: int = 1_795_500_006_958, life_ms: int = 120_000
) -> Token:
    """An HDFS delegation token for ``service``, issued and ending at these times."""
    return Token(
        alias=service.encode(),
        identifier=identifier(issued_ms, issued_ms + life_ms),
        password=b"p" * 20,
        kind=HDFS_KIND,
        service=service,
    )


# YARN's token of the application master, which token files carry beside HDFS's.
AMRM = Token(b"amrm", b"\x01\x02", b"secret", "YARN_AM_RM_TOKEN", "")
