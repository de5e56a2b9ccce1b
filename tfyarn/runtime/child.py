"""The script's interpreter: started plain or pre-started, teed, stopped.

With ``preimport`` the interpreter starts early on the bootstrap
(:data:`tfyarn.runtime.prelude.BOOTSTRAP`), imports the heavy modules while the cluster forms
and waits on a pipe; :func:`hand_over` writes it the script's arguments and the
environment known only after formation. Without (or if that interpreter died),
the script starts as ``python -u SCRIPT ARGS``.
"""

from __future__ import annotations

import collections
import functools
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tfyarn.contract.noise import is_startup_noise
from tfyarn.runtime import prelude
from tfyarn.runtime.teardown import Teardown

log = logging.getLogger("tfyarn.runtime")


@dataclass
class Child:
    """The script's interpreter, the thread teeing its stderr, and (while a
    pre-started one waits for its script) the pipe its message goes to."""

    popen: subprocess.Popen[bytes]
    tee: threading.Thread
    message_fd: int | None = field(default=None)


def start(
    command: list[str],
    env: Mapping[str, str],
    *,
    cwd: Path,
    tail: collections.deque[str],
    pass_fds: tuple[int, ...] = (),
) -> Child:
    """Start ``command``; its stderr goes to ours and its last lines to ``tail``."""
    # Same process group as us: when YARN kills the container's group, the
    # script goes too. And if this runtime is killed alone (SIGKILL), the
    # kernel kills the script (PDEATHSIG, set by setpriv before exec): an
    # orphan would keep the port and the TF server alive behind the
    # master's back. (Not a preexec_fn: forking a process that runs gRPC
    # aborts the child in gRPC's fork handlers.)
    popen = subprocess.Popen(
        [*_die_with_parent(), *command],
        env=env,
        cwd=cwd,
        stderr=subprocess.PIPE,
        pass_fds=pass_fds,
    )
    tee = threading.Thread(target=_tee_stderr, args=(popen, tail), daemon=True)
    tee.start()
    return Child(popen, tee)


def prestart(
    script: Path,
    modules: tuple[str, ...],
    env: Mapping[str, str],
    *,
    cwd: Path,
    tail: collections.deque[str],
) -> Child | None:
    """Start the bootstrap: it imports ``modules``, then waits for the message
    :func:`hand_over` writes to its pipe. None if it could not start."""
    read_fd, write_fd = os.pipe()  # both non-inheritable but for pass_fds
    command = prelude.preload_command(read_fd, script, modules)
    try:
        child = start(command, env, cwd=cwd, tail=tail, pass_fds=(read_fd,))
    except OSError as exc:
        os.close(write_fd)
        log.warning("could not pre-start the script's interpreter: %s", exc)
        return None
    finally:
        os.close(read_fd)
    child.message_fd = write_fd
    return child


def hand_over(
    child: Child, args: list[str], env: Mapping[str, str], *, drain: float
) -> bool:
    """Give a pre-started interpreter its script's arguments and the environment
    known only now; False if it is dead (reaped) and cannot take them."""
    if child.message_fd is None:
        return False
    message = json.dumps({"env": dict(env), "args": args}).encode()
    fd, child.message_fd = child.message_fd, None
    if child.popen.poll() is None:
        # A message larger than the pipe's buffer (64 KiB; TF_CONFIG of a big
        # job) is read only once the imports end: write it aside, so a stop
        # meanwhile is still handled, and ends the writer with the interpreter
        # (EPIPE).
        threading.Thread(
            target=_write_message, args=(fd, message), name="hand-over", daemon=True
        ).start()
        return True
    os.close(fd)
    # It died importing (a crash in an extension module): the caller starts
    # the script the plain way, which fails or not as it would have without
    # preimport.
    child.popen.wait()
    child.tee.join(timeout=drain)
    log.warning(
        "the pre-started interpreter ended with %s before its script was "
        "handed over; starting the script in a new one",
        child.popen.returncode,
    )
    return False


def discard(child: Child, *, drain: float) -> None:
    """Kill and reap a pre-started interpreter that never got its script."""
    if child.message_fd is not None:
        os.close(child.message_fd)
        child.message_fd = None
    send_signal(child.popen, signal.SIGKILL)  # it ran imports only, no user code
    child.popen.wait()
    child.tee.join(timeout=drain)


def supervise(
    popen: subprocess.Popen[bytes],
    stop: StopRequest,
    teardown: Teardown | None = None,
) -> int:
    """Wait for the script; on a stop request, SIGTERM it, SIGKILL after the
    grace. With ``teardown``, an interpreter whose script returned gets a
    bound on its teardown. Returns the exit code to report."""
    killed_at: float | None = None
    while popen.poll() is None:
        if teardown is not None:
            teardown.check(popen)
        if stop.event.is_set() and killed_at is None:
            log.warning("stopping the script: %s", stop.reason)
            send_signal(popen, signal.SIGTERM)
            killed_at = time.monotonic() + stop.grace
        if killed_at is not None and time.monotonic() >= killed_at:
            log.warning("the script outlived its %.0f s grace: SIGKILL", stop.grace)
            send_signal(popen, signal.SIGKILL)
            killed_at = float("inf")
        try:
            popen.wait(timeout=0.2)
        except subprocess.TimeoutExpired:
            pass
    return int(popen.returncode) if teardown is None else teardown.exit_code(popen)


class StopRequest:
    """Why and how the script must stop (master's Stop, SIGTERM, lost master).

    ``next_attempt`` (not 0): the master restarts the task in place, the
    runtime goes on as that attempt once the script ended. A final stop
    (SIGTERM, a refusal) arriving meanwhile wins over it.
    """

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reason = ""
        self.grace = 0.0
        self.next_attempt = 0
        # The runtime's own SIGTERM: the container is being ended from outside.
        self.container_ending = False
        self._lock = threading.Lock()

    def set(
        self,
        reason: str,
        grace: float,
        *,
        next_attempt: int = 0,
        container_ending: bool = False,
    ) -> None:
        with self._lock:
            self.container_ending = self.container_ending or container_ending
            if not self.event.is_set():
                self.reason, self.grace = reason, grace
                self.next_attempt = next_attempt
                self.event.set()
            elif self.next_attempt and not next_attempt:
                self.reason, self.next_attempt = reason, 0

    def take_restart(self) -> int:
        """The attempt to restart in place as (and clear the request), or 0."""
        with self._lock:
            attempt = self.next_attempt
            if attempt:
                self.event.clear()
                self.reason, self.grace, self.next_attempt = "", 0.0, 0
            return attempt


def send_signal(popen: subprocess.Popen[bytes], sig: int) -> None:
    try:
        popen.send_signal(sig)
    except ProcessLookupError:
        pass


def _tee_stderr(popen: subprocess.Popen[bytes], tail: collections.deque[str]) -> None:
    assert popen.stderr is not None
    out = sys.stderr.buffer
    for line in iter(popen.stderr.readline, b""):
        out.write(line)
        out.flush()
        text = line.decode("utf-8", "replace").rstrip("\n")
        if not is_startup_noise(text):  # it stays in the log, not in diagnostics
            tail.append(text)


@functools.cache
def _die_with_parent() -> tuple[str, ...]:
    """A command prefix that makes Linux SIGKILL the command when we die."""
    setpriv = shutil.which("setpriv")  # util-linux
    if setpriv is None:
        log.warning("setpriv not found: the script may outlive a killed runtime")
        return ()
    probe = subprocess.run(
        [setpriv, "--help"], capture_output=True, text=True, check=False
    )
    if "--pdeathsig" not in probe.stdout:
        return ()
    return (setpriv, "--pdeathsig", "KILL", "--")


def _write_message(fd: int, message: bytes) -> None:
    """Write all of ``message`` to a pipe, then close it (the message's end)."""
    try:
        view = memoryview(message)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:  # the interpreter died: its exit code tells
        log.warning("could not hand the script over: %s", exc)
    finally:
        os.close(fd)
