"""The last skein driver this process started: its log and its login.

skein's driver says why a Kerberos login failed only in its log, and answers
"Unknown ApplicationId" also when the ResourceManager refused that login; so
what the driver wrote and who it logged in as are kept here for
:mod:`tfyarn.client.yarn_answers` to read after a call failed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tfyarn.client.kerberos import Login

# The login of the last driver started, so yarn_errors can name it.
_login = Login()


def login() -> Login:
    """The login of the last driver started (or checked)."""
    return _login


def remember(used: Login) -> None:
    """``used`` is the login of the driver about to start."""
    global _login
    _login = used


def log_path() -> Path:
    """This process's skein driver log (skein truncates it at each start).

    One per process: the Kerberos mapping reads it, and a shared file is
    overwritten by any other tfyarn command starting meanwhile.
    """
    directory = Path(tempfile.gettempdir()) / f"tfyarn-{os.getuid()}"
    return directory / f"skein-driver-{os.getpid()}.log"


def forget_old_logs(directory: Path) -> None:
    """Delete the driver logs of processes that ended (kept while they run)."""
    for log in directory.glob("skein-driver-*.log"):
        pid = log.stem.rpartition("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            log.unlink(missing_ok=True)


def tail(path: Path, size: int = 8000) -> str:
    """The last ``size`` bytes of ``path`` as text, or "" if it cannot be read."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - size))
            return f.read().decode(errors="replace")
    except OSError:
        return ""
