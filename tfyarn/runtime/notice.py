"""The runtime's side of stop notices: show one to the script, say whether it heeds them.

A ``StopNotice`` on the task's stream (:mod:`tfyarn.contract.notice`) becomes
a file the script's ``tfyarn.should_stop()`` finds; the script's first such
call leaves a marker, which the heartbeats report so the master waits for it.
After a notice, a script that ended keeps its runtime (heartbeating, holding
the port) until the master's Stop says whether to start again in place:
:meth:`NoticeBoard.wait_for_stop` is how long.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from tfyarn._proto import master_pb2 as pb
from tfyarn.contract import notice as _notice

log = logging.getLogger("tfyarn.runtime")

# Beyond a notice's deadline, how long a runtime whose script ended waits for
# the master's Stop (sent once the deadline passes, within a reconcile pass).
STOP_SLACK = 15.0


def script_env(tmpdir: Path, attempt: int, stop_grace: float) -> dict[str, str]:
    """The variables ``tfyarn.should_stop()`` and ``termination_config()`` read."""
    return {
        _notice.STOP_FILE: str(_notice.stop_file(tmpdir, attempt)),
        _notice.STOP_GRACE: f"{stop_grace:g}",
    }


class NoticeBoard:
    """One attempt's stop notice: the file the script sees, and what the master said."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.notice: _notice.Notice | None = None
        self._lock = threading.Lock()
        # An earlier runtime in this container (a restart in place keeps the
        # directory) used other attempt numbers; clear this one's anyway.
        self.clear()

    @property
    def active(self) -> bool:
        return self.notice is not None

    def post(self, event: pb.StopNotice) -> None:
        """Show the notice to the script (once; a repeat on a new stream is ignored)."""
        with self._lock:
            if self.notice is not None:
                return
            self.notice = _notice.Notice(
                reason=event.reason,
                grace_seconds=event.grace_seconds,
                deadline=event.deadline,
            )
        log.warning(
            "stop notice: %s (%.0f s to save; tfyarn.should_stop() is now True)",
            event.reason,
            event.grace_seconds,
        )
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            _notice.post(self.path, self.notice)
        except OSError as exc:  # the script then gets its SIGTERM as before
            log.warning("could not write the stop notice to %s: %s", self.path, exc)

    def heeded(self) -> bool:
        """Whether the script asked (``tfyarn.should_stop()`` left its marker)."""
        return _notice.heeded_marker(self.path).exists()

    def wait_for_stop(self) -> float:
        """Seconds to wait, once the script ended after the notice, for the Stop."""
        if self.notice is None:
            return 0.0
        return max(0.0, self.notice.deadline - time.time()) + STOP_SLACK

    def clear(self) -> None:
        for path in (self.path, _notice.heeded_marker(self.path)):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.warning("could not remove %s: %s", path, exc)
