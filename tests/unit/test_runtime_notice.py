"""A stop notice end to end: a live master, real runtimes and scripts, fake YARN.

Two workers loop on ``tfyarn.should_stop()``. The master ends the generation
on purpose: each script sees the notice, "saves" (a file) and exits with the
restart code; the master waits for both, then restarts them in place, and the
second attempt finishes the job. Nothing is charged (``max_restarts=0``).
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from _am_support import LiveMaster, job, task_env

import tfyarn
from tfyarn.contract.status import Phase
from tfyarn.runtime import Runtime, TaskContext
from tfyarn.spec import JobSpec

SCRIPT = r"""
import json, os, sys, time
import tfyarn
env = os.environ
name = f"{env['TFYARN_TASK_INDEX']}_{env['TFYARN_ATTEMPT']}"
if env["TFYARN_ATTEMPT"] == "0":
    deadline = time.time() + 60
    while not tfyarn.should_stop() and time.time() < deadline:
        time.sleep(0.05)
    notice = tfyarn.stop_notice()
    with open(f"saved_{name}.json", "w") as f:
        json.dump({"reason": notice.reason, "grace": notice.grace_seconds}, f)
    sys.exit(tfyarn.RESTART_CODE)
with open(f"resumed_{name}.json", "w") as f:
    json.dump({"restart": env["TFYARN_RESTART"]}, f)
"""


def start_tasks(
    spec: JobSpec, credentials: tuple[bytes, bytes], workdir: Path, script: str
) -> tuple[LiveMaster, dict[str, int], list[threading.Thread]]:
    """Every task's runtime in a thread, its script able to import tfyarn."""
    (workdir / spec.script_name).write_text(script)
    master = LiveMaster(spec, credentials).start()
    master.grant_all()
    codes: dict[str, int] = {}

    def one(role: str, index: int) -> None:
        env = task_env(
            spec,
            master,
            role,
            index,
            PYTHONPATH=str(Path(tfyarn.__file__).parent.parent),
        )
        rt = Runtime(
            TaskContext.from_env(env), credentials=credentials, workdir=workdir, env=env
        )
        codes[f"{role}:{index}"] = rt.run()

    threads = [
        threading.Thread(target=one, args=(role.value, index), daemon=True)
        for role, index in spec.task_keys()
    ]
    for thread in threads:
        thread.start()
    return master, codes, threads


def wait_until(master: LiveMaster, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if master.call(check):
            return
        time.sleep(0.1)
    raise AssertionError("the master never got there")


def test_scripts_save_on_the_notice_and_restart_in_place(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    spec = job(
        tasks={"worker": 2}, max_restarts=0, stop_grace=20, heartbeat_interval=0.2
    )
    master, codes, threads = start_tasks(spec, credentials, tmp_path, SCRIPT)
    state = master.state
    assert state is not None
    # Both scripts asked should_stop(): their heartbeats say so.
    wait_until(master, lambda: all(t.heeds_notice for t in state.tasks.values()), 30)
    why = "rebalancing the job"
    started = time.monotonic()
    master.call(
        lambda: state.notices.begin(
            why, functools.partial(state.restart_on_purpose, why)
        )
    )
    phase, diagnostics = master.wait_done(timeout=60)
    for thread in threads:
        thread.join(30)
    assert phase is Phase.SUCCEEDED, diagnostics
    assert codes == {"worker:0": 0, "worker:1": 0}
    # The master did not wait for the grace: both saved within a second or two.
    assert time.monotonic() - started < 15
    for index in "01":
        saved = json.loads((tmp_path / f"saved_{index}_0.json").read_text())
        assert saved == {"reason": why, "grace": 20.0}
        resumed = json.loads((tmp_path / f"resumed_{index}_1.json").read_text())
        assert resumed == {"restart": "1"}
    assert master.launcher.started == [] and master.launcher.killed == []
    assert state.budget_used == 0 and state.failures == []
    history = "\n".join(state.tasks[next(iter(state.tasks))].history)
    assert "after the stop notice" in history
