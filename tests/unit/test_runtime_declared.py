"""Declared containers (the job's initial tasks): index from the skein instance,
the master's address from skein's key-value store (tfyarn.contract.env)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from _am_support import SCRIPT, LiveMaster, job

from tfyarn.contract import env as _env
from tfyarn.contract.status import MASTER_KEY, Phase
from tfyarn.errors import MasterUnavailableError, SpecError
from tfyarn.runtime import Runtime, TaskContext, discover


class FakeKv:
    def __init__(self, value: str | None = None, *, appears_after: float = 0.0) -> None:
        self.value = value
        self.at = time.monotonic() + appears_after
        self.gets = 0

    def get(self, key: str) -> bytes | None:
        self.gets += 1
        assert key == MASTER_KEY
        if self.value is None or time.monotonic() < self.at:
            return None
        return self.value.encode()


class FakeApp:
    def __init__(self, kv: FakeKv) -> None:
        self.kv = kv
        self.closed = False

    def close(self) -> None:
        self.closed = True


def declared_env(spec: Any, role: str, instance: int) -> dict[str, str]:
    """A declared container's env: the service's, plus what skein sets."""
    return {
        _env.JOB: spec.to_env(),
        _env.ROLE: role,
        _env.SKEIN_CONTAINER_ID: f"{role}_{instance}",
        "NM_HOST": "127.0.0.1",
        "PATH": "/usr/bin:/bin",
    }


def test_a_declared_container_is_its_skein_instance() -> None:
    ctx = TaskContext.from_env(declared_env(job(), "worker", 3))
    assert (ctx.index, ctx.attempt, ctx.restart, ctx.master_address) == (3, 0, 0, "")
    # An added container (a replacement) says its index: the instance is not it.
    env = {**declared_env(job(), "worker", 7), _env.TASK_INDEX: "1", _env.ATTEMPT: "2"}
    ctx = TaskContext.from_env(env)
    assert (ctx.index, ctx.attempt) == (1, 2)


def test_no_index_at_all_is_a_clear_error() -> None:
    env = declared_env(job(), "worker", 0)
    del env[_env.SKEIN_CONTAINER_ID]
    with pytest.raises(SpecError, match="TFYARN_TASK_INDEX"):
        TaskContext.from_env(env)
    env[_env.SKEIN_CONTAINER_ID] = "worker"
    with pytest.raises(SpecError, match="SKEIN_CONTAINER_ID='worker'"):
        TaskContext.from_env(env)


def test_the_master_address_is_waited_for_then_found() -> None:
    kv = FakeKv("host:1234", appears_after=0.3)
    app = FakeApp(kv)
    assert discover.master_address(5, connect=lambda: app) == "host:1234"
    assert kv.gets >= 2 and app.closed


def test_a_master_that_never_publishes_is_a_bounded_error() -> None:
    started = time.monotonic()
    with pytest.raises(MasterUnavailableError, match=r"did not appear within 0\.5 s"):
        discover.master_address(0.5, connect=lambda: FakeApp(FakeKv()))
    assert time.monotonic() - started < 3
    stopped = threading.Event()
    stopped.set()
    with pytest.raises(MasterUnavailableError, match="stopped"):
        discover.master_address(60, stopped=stopped, connect=lambda: FakeApp(FakeKv()))

    def refuse() -> Any:
        raise ConnectionError("no AM here")

    with pytest.raises(MasterUnavailableError, match="no AM here"):
        discover.master_address(0.3, connect=refuse)


def test_declared_tasks_find_the_master_and_their_script_sees_its_identity(
    credentials: tuple[bytes, bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = job(tasks={"worker": 2}, worker_grace=5, stop_grace=2)
    (tmp_path / spec.script_name).write_text(SCRIPT)
    master = LiveMaster(spec, credentials).start()
    master.grant_all()
    kv = FakeKv(master.address, appears_after=0.5)
    monkeypatch.setattr(discover, "_from_current", lambda: FakeApp(kv))
    codes: dict[int, int] = {}

    def one(index: int) -> None:
        env = declared_env(spec, "worker", index)
        rt = Runtime(
            TaskContext.from_env(env),
            credentials=credentials,
            workdir=tmp_path,
            env=env,
        )
        codes[index] = rt.run()

    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    phase, diagnostics = master.wait_done()
    assert phase is Phase.SUCCEEDED, diagnostics
    assert codes == {0: 0, 1: 0}
    seen = json.loads((tmp_path / "worker_1.json").read_text())["env"]
    assert seen[_env.TASK_INDEX] == "1" and seen[_env.ATTEMPT] == "0"
    assert seen[_env.MASTER_ADDRESS] == master.address  # tfyarn.report_progress
    assert seen[_env.RESTART] == "0"
