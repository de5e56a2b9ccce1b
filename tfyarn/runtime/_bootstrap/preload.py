"""Bootstrap of a task's script: import heavy modules early, run the script later.

The runtime starts this file (by path, with the job's interpreter) as soon as
the task holds its port, while it still waits for the ClusterSpec::

    python -u preload.py FD SCRIPT [MODULE ...]

It imports each MODULE (``tensorflow`` by default; a failure is ignored here
and surfaces again when the script imports it), then blocks reading one JSON
message from the inherited pipe FD, ``{"env": {...}, "args": [...]}``: what is
only known once the cluster formed (TF_CONFIG, TFYARN_RESTART, ...). It adds
``env`` to ``os.environ`` and runs SCRIPT as ``python -u SCRIPT *args`` would:
``__name__ == "__main__"``, ``sys.argv[0]`` and ``__file__`` the script,
``sys.path[0]`` its directory, the same exit codes and tracebacks.

It must not import tfyarn (``--python`` may be another environment than the
runtime's), so it uses the standard library only. It lives alone in its
directory: Python puts that directory first on ``sys.path`` while the bootstrap
starts, and nothing there can shadow a module the bootstrap imports.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import json
import os
import runpy
import sys
from types import TracebackType
from typing import Any

# An empty or unreadable message: the runtime died or will not run the script.
EXIT_NO_MESSAGE = 3
# Where to say that the script returned, and with what code
# (tfyarn.runtime.teardown.RETURNED_FILE).
RETURNED_FILE = "TFYARN_RETURNED_FILE"

# The script's exit code once it returned, for _say_returned.
_returned: list[int] = []
# A child the script forked runs our atexit handler too: only this process speaks.
_PID = os.getpid()
# The script's globals: they die in the interpreter's teardown, as those of
# `python SCRIPT` do, not when run_path returns (before _say_returned).
_kept: list[dict[str, Any]] = []


def main(argv: list[str]) -> int:
    fd, script, modules = int(argv[1]), argv[2], argv[3:]
    # First registered, so run last: after the script's and TensorFlow's own
    # handlers (an async checkpoint's writer is joined in one).
    atexit.register(_say_returned)
    # `python SCRIPT` starts with the script's directory first on sys.path;
    # runpy.run_path does not put it there, and the preimported modules may
    # come from it too.
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    _before_script()
    _preimport(modules)
    try:
        message = _read_message(fd)
    except (OSError, ValueError):
        message = None
    if not isinstance(message, dict):
        return EXIT_NO_MESSAGE
    os.environ.update({str(k): str(v) for k, v in message.get("env", {}).items()})
    # runpy sets sys.argv[0] to the script while it runs.
    sys.argv = [script, *(str(a) for a in message.get("args", []))]
    try:
        _kept.append(runpy.run_path(script, run_name="__main__"))
    except SystemExit as exc:
        # The interpreter ends on it as for any script: the exit code or message.
        code = exc.code
        if code is None or isinstance(code, int):
            _returned.append(code or 0)
        raise
    except KeyboardInterrupt:
        raise  # SIGINT re-raised by the interpreter
    except BaseException as exc:  # noqa: BLE001 - printed as Python would
        tb = _without_bootstrap(exc.__traceback__)
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)
        _returned.append(1)
        return 1
    _returned.append(0)
    return 0


def _before_script() -> None:
    """What the script's interpreter does before importing anything else
    (see tfyarn.runtime.prelude: the plain start's counterpart is there)."""


def _say_returned() -> None:
    """Tell the runtime the script returned and its exit handlers ran: what is
    left, the interpreter's teardown, has a bound there
    (tfyarn/runtime/teardown.py). Written whole, then renamed."""
    path = os.environ.get(RETURNED_FILE)
    if not path or not _returned or os.getpid() != _PID:
        return
    with contextlib.suppress(OSError):
        with open(path + ".part", "w") as f:
            f.write(str(_returned[0]))
        os.replace(path + ".part", path)


def _preimport(modules: list[str]) -> None:
    for name in modules:
        # A failure surfaces again, with its traceback, when the script imports it.
        with contextlib.suppress(Exception):
            importlib.import_module(name)


def _read_message(fd: int) -> Any:
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    # /dev/null in the pipe's place rather than a free number: the script's
    # children do not inherit it, its own opens do not take the number, and
    # from outside the pipe's end shows the script started (tests/integration/_faults.py).
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, fd, inheritable=False)
    os.close(null)
    return json.loads(b"".join(chunks)) if chunks else None


def _without_bootstrap(tb: TracebackType | None) -> TracebackType | None:
    """The traceback from the script's first frame on, as `python SCRIPT` shows it."""
    ours = (globals(), vars(runpy))  # by module: runpy is "<frozen runpy>" in 3.11
    while tb is not None and any(tb.tb_frame.f_globals is g for g in ours):
        tb = tb.tb_next
    return tb


if __name__ == "__main__":
    sys.exit(main(sys.argv))
