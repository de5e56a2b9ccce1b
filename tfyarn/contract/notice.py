"""The stop notice: how a script learns, before any signal, that its generation ends.

The master sends a ``StopNotice`` (proto/tfyarn/_proto/master.proto) to every
task of a generation it ends on purpose (a resize, a restart it decided,
``tfyarn kill --graceful``). The runtime writes it to a file the script finds
in :data:`STOP_FILE`; ``tfyarn.should_stop()`` checks that file, and its first
call leaves :func:`heeded_marker` beside it, which the runtime reports in its
heartbeats so the master knows to wait for the script (up to the notice's
deadline). A script that saved exits with :data:`RESTART_CODE`: not a failure,
nothing charged; the next generation resumes from what it saved.

The runtime, ``tfyarn.notice`` (in the script) and the master share these
names and this layout; nothing else about notices is shared.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

# The exit code of a script that saved on a notice and asks to be started
# again (TensorFlow's PreemptionCheckpointHandler exits with 42 too).
RESTART_CODE = 42
# The file the runtime creates when a notice arrives (absent: go on).
STOP_FILE = "TFYARN_STOP_FILE"
# The job's stop grace in seconds: how long a script has to save after a notice.
STOP_GRACE = "TFYARN_STOP_GRACE"


@dataclass(frozen=True)
class Notice:
    """What the script may read of a notice: why, how long, until when (epoch s)."""

    reason: str
    grace_seconds: float
    deadline: float

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Notice:
        """Raises ValueError for anything but a notice."""
        try:
            raw = json.loads(text)
            return cls(
                reason=str(raw["reason"]),
                grace_seconds=float(raw["grace_seconds"]),
                deadline=float(raw["deadline"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a tfyarn stop notice: {exc}") from exc


def stop_file(tmpdir: Path, attempt: int) -> Path:
    """Where an attempt's notice goes: one file per attempt, so a task restarted
    in place never sees the notice that ended its previous attempt."""
    return tmpdir / f"tfyarn-stop-notice.{attempt}"


def heeded_marker(path: str | os.PathLike[str]) -> Path:
    """The file ``should_stop()`` leaves beside :data:`STOP_FILE` on its first call."""
    return Path(f"{os.fspath(path)}.heeded")


def post(path: Path, notice: Notice) -> None:
    """Write the notice whole (a temporary name, then renamed): a script that
    checks the path mid-write sees nothing or all of it."""
    part = path.with_name(path.name + ".part")
    part.write_text(notice.to_json())
    os.replace(part, path)
