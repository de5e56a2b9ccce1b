"""Which surface a user is on: the command line or the Python API.

The same check raises the same error from ``tfyarn submit`` and from
``tfyarn.submit(...)``, but a fix is written differently on each: a
command-line user sets ``--num_worker 2``, a Python caller ``num_worker=2``.
The CLI marks its handlers with :func:`command_line`; everything else is the
Python API, so errors there never mention flags or "the command line".
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any

_CLI = contextvars.ContextVar("tfyarn_cli", default=False)


@contextlib.contextmanager
def command_line() -> Iterator[None]:
    """Within this block, errors speak of flags (``--num_worker 2``)."""
    token = _CLI.set(True)
    try:
        yield
    finally:
        _CLI.reset(token)


def on_command_line() -> bool:
    return _CLI.get()


def option(key: str, value: Any = None) -> str:
    """How the user sets ``key``: ``--num_worker 2`` or ``num_worker=2``."""
    if on_command_line():
        return f"--{key}" if value is None else f"--{key} {value}"
    return f"{key}=" if value is None else f"{key}={value}"


def given_source() -> str:
    """Where options that are neither defaults nor a file came from."""
    return "the command line" if on_command_line() else "the keyword arguments"
