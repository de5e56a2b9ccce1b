"""A bound on the script's interpreter teardown, once the script has returned.

When a pre-started script returns (or calls ``sys.exit``), the bootstrap
(:data:`tfyarn.runtime.prelude.BOOTSTRAP`) lets the interpreter wind down as
``python SCRIPT`` would: non-daemon threads are joined, then ``atexit``
handlers run (TensorFlow's async checkpoint joins its writer there). Its own
``atexit`` handler, registered before any other and so run after all of them,
then writes the script's exit code to :func:`returned_file`. What is left is
the teardown of the interpreter and its extensions, where nothing the script
asked for remains to be done.

That teardown can hang. Measured on the HA local cluster: a
MultiWorkerMirroredStrategy worker whose ``tfyarn.data`` input pipeline was
still prefetching when the script returned waited in TensorFlow's
``RootDataset::Iterator`` destructor for a tf.data thread (the iterator freed
with the script's globals, after ``atexit``), and ignored SIGTERM (the
coordination service's preemption notifier takes it) until it was killed
47 s later. A lead task's runtime waits for it without any bound. So
:class:`Teardown` gives the teardown :attr:`Timeouts.teardown` seconds and
then SIGKILLs the interpreter, reporting the exit code the script returned.
The same race can abort the interpreter instead (a tf.data thread unwound
by the finalizing interpreter: "FATAL: exception not rethrown", seen in 1 of
6 local runs); a teardown ended by a signal is reported as the script's
code too.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from pathlib import Path

log = logging.getLogger("tfyarn.runtime")

#: The variable naming the file the bootstrap writes once the script returned
#: (the bootstrap reads it by this literal name: it cannot import tfyarn).
RETURNED_FILE = "TFYARN_RETURNED_FILE"


def returned_file(tmpdir: Path, attempt: int) -> Path:
    """Where an attempt's bootstrap says its script returned, and with what."""
    return tmpdir / f"returned-{attempt}"


def script_env(tmpdir: Path, attempt: int) -> dict[str, str]:
    """The variable the bootstrap reads; a stale file of the attempt is removed."""
    path = returned_file(tmpdir, attempt)
    path.unlink(missing_ok=True)
    return {RETURNED_FILE: str(path)}


def returned_code(path: Path | None) -> int | None:
    """The exit code the bootstrap wrote, or None (not yet, or unreadable)."""
    if path is None:
        return None
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


class Teardown:
    """Watches one interpreter: when its script returned, and for how long it
    has been tearing down since."""

    def __init__(self, path: Path | None, bound: float) -> None:
        self.path = path
        self.bound = bound
        self.code: int | None = None
        self._since: float | None = None
        self.killed = False

    def check(self, popen: subprocess.Popen[bytes]) -> None:
        """Call while the interpreter lives: SIGKILL it once its teardown
        outlived the bound."""
        if self.killed:
            return
        if self.code is None:
            self.code = returned_code(self.path)
            if self.code is None:
                return
            self._since = time.monotonic()
        assert self._since is not None
        waited = time.monotonic() - self._since
        if waited < self.bound:
            return
        log.warning(
            "the script returned %s %.0f s ago but its interpreter is still "
            "tearing down (TensorFlow's destructors): SIGKILL, reported as %s",
            self.code,
            waited,
            self.code,
        )
        try:
            popen.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.killed = True

    def exit_code(self, popen: subprocess.Popen[bytes]) -> int:
        """The code to report: the script's own when its teardown was cut
        short, or ended by a signal (tf.data's threads calling into an
        interpreter that is finalizing abort it: "FATAL: exception not
        rethrown", SIGABRT)."""
        code = int(popen.returncode)
        if self.code is None:
            self.code = returned_code(self.path)  # written just before the end
        if self.code is None or code >= 0:
            return code
        if not self.killed:
            log.warning(
                "the script returned %s, then its interpreter was ended by "
                "signal %d while tearing down: reported as %s",
                self.code,
                -code,
                self.code,
            )
        return self.code
