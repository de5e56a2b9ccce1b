"""The Python API's front door: arguments checked before any work is done.

``tfyarn.submit``, ``tfyarn.status`` and friends are the client's functions,
wrapped so that a wrong argument type is a :class:`~tfyarn.errors.SpecError`
naming the keyword (``args=``, ``app_id=``) instead of an ``AttributeError``
from deep inside, and is refused before a YARN driver is started.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

from tfyarn import client
from tfyarn.errors import SpecError
from tfyarn.spec import script_args

F = TypeVar("F", bound=Callable[..., Any])


def _script(value: object) -> str:
    if not isinstance(value, (str, os.PathLike)) or not os.fspath(value):
        raise SpecError(
            "script= must be the path of the Python program every task runs "
            f"(a str or a pathlib.Path), got {value!r}"
        )
    return os.fspath(value)


def _app_id(value: object) -> str:
    if not isinstance(value, str):
        raise SpecError(
            "app_id= must be an application id string like "
            f"application_1700000000000_0001, got {value!r}"
        )
    return value


def _job(func: F) -> F:
    """``func(script, *, args=..., **options)`` with script and args checked."""

    @functools.wraps(func)
    def checked(script: Any = None, *pos: Any, args: Any = (), **kw: Any) -> Any:
        return func(_script(script), *pos, args=script_args(args), **kw)

    return checked  # type: ignore[return-value]


def _of_app(func: F) -> F:
    """``func(app_id, ...)`` with app_id checked."""

    @functools.wraps(func)
    def checked(app_id: Any = None, *pos: Any, **kw: Any) -> Any:
        return func(_app_id(app_id), *pos, **kw)

    return checked  # type: ignore[return-value]


check = _job(client.check)
submit = _job(client.submit)
status = _of_app(client.status)
kill = _of_app(client.kill)
wait = _of_app(client.wait)
logs = _of_app(client.logs)
stop_job = _of_app(client.stop_job)
scale = _of_app(client.scale)
