"""Fault injection from outside, as a real failure would hit a job.

Processes are found by what YARN and tfyarn put in their environment
(``CONTAINER_ID``, ``TFYARN_ROLE``, ``TFYARN_TASK_INDEX`` or skein's
``SKEIN_CONTAINER_ID``, ``TFYARN_ATTEMPT``),
read from ``/proc/<pid>/environ``; never by a name pattern, so only the job
under test is ever touched.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from tfyarn.contract.env import task_index

T = TypeVar("T")


@dataclass(frozen=True)
class Proc:
    """One process of a job: its pid, environment and command line."""

    pid: int
    env: dict[str, str]
    cmdline: str

    @property
    def container(self) -> str:
        return self.env.get("CONTAINER_ID", "")

    @property
    def is_script(self) -> bool:
        """The user's script: the runtime starts it with TF_GRPC_REUSE_PORT.

        Not TF_CONFIG: a pre-started interpreter (tfyarn/runtime/_bootstrap/preload.py) gets it
        later, in os.environ, which /proc/<pid>/environ does not show.
        """
        return "TF_GRPC_REUSE_PORT" in self.env

    @property
    def is_runtime(self) -> bool:
        return "tfyarn.runtime" in self.cmdline

    @property
    def runs_script(self) -> bool:
        """The script started: a pre-started interpreter puts /dev/null in
        place of its message pipe (``preload.py FD ...``) once it got the
        script; before, killing it only makes the runtime start the script
        the plain way."""
        words = self.cmdline.split()
        for n, word in enumerate(words[:-1]):
            if word.endswith("preload.py"):
                try:
                    held = os.readlink(f"/proc/{self.pid}/fd/{words[n + 1]}")
                except OSError:
                    return True
                return not held.startswith("pipe:")
        return True


def _app_marker(app_id: str) -> str:
    # application_<cluster ts>_<n> -> container_[eNN_]<cluster ts>_<n>_<attempt>_<id>
    _, stamp, number = app_id.split("_")
    return f"_{stamp}_{number}_"


def job_processes(app_id: str) -> list[Proc]:
    """Every live process of this application's containers on this machine."""
    marker = _app_marker(app_id)
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "environ").read_bytes()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:  # gone, or not ours to read
            continue
        env = dict(
            item.split("=", 1)
            for item in raw.decode(errors="replace").split("\0")
            if "=" in item
        )
        if marker in env.get("CONTAINER_ID", ""):
            found.append(
                Proc(
                    int(entry.name),
                    env,
                    cmd.replace(b"\0", b" ").decode(errors="replace"),
                )
            )
    return found


def task_process(
    app_id: str, task: str, *, script: bool = True, attempt: int | None = None
) -> Proc:
    """The script (or runtime) process of ``task`` ("worker:1"); fail if none."""
    role, index = task.split(":")
    for proc in job_processes(app_id):
        env = proc.env
        if env.get("TFYARN_ROLE") != role or _index(env) != int(index):
            continue
        if attempt is not None and env.get("TFYARN_ATTEMPT", "0") != str(attempt):
            continue
        if proc.is_script and proc.runs_script if script else proc.is_runtime:
            return proc
    raise AssertionError(f"no {'script' if script else 'runtime'} process of {task}")


def retry_until(what: str, probe: Callable[[], T], timeout: float = 180) -> T:
    """``probe()``'s result once it stops failing an assertion (a process not
    there yet), for up to ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return probe()
        except AssertionError:
            assert time.monotonic() < deadline, f"{what} within {timeout:.0f} s"
            time.sleep(0.5)


def _index(env: dict[str, str]) -> int | None:
    """The task index, as the runtime reads it (a declared container's runtime
    has only skein's container id)."""
    try:
        return task_index(env)
    except ValueError:
        return None


def kill_task(app_id: str, task: str, sig: int = signal.SIGKILL, **kw: object) -> Proc:
    """Send ``sig`` to a task's script (default) or runtime; return which process."""
    proc = task_process(app_id, task, **kw)  # type: ignore[arg-type]
    os.kill(proc.pid, sig)
    return proc


def am_processes(app_id: str) -> list[Proc]:
    """The application master container's processes (skein's Java AM, ``python -m am``)."""
    return [
        p
        for p in job_processes(app_id)
        if p.container.endswith("_000001") and "TFYARN_ROLE" not in p.env
    ]


def kill_am_container(app_id: str) -> list[int]:
    """SIGKILL every process of the AM container, as a dying node would."""
    procs = am_processes(app_id)
    assert procs, f"no application master process of {app_id} found"
    for proc in procs:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return [p.pid for p in procs]


def wait_gone(pid: int, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
