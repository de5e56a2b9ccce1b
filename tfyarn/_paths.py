"""Where the files tfyarn ships beside its code live.

In a checkout (and an editable install) ``am/`` and ``conf/`` sit next to the
``tfyarn/`` package; a wheel carries them as ``tfyarn/_shipped/{am,conf}``.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def _shipped(name: str) -> Path:
    for candidate in (_PACKAGE / "_shipped" / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(
        f"tfyarn's '{name}' directory is missing (looked in {_PACKAGE / '_shipped'} "
        f"and {_PACKAGE.parent}); reinstall tfyarn"
    )


def conf_dir() -> Path:
    """The shipped defaults: ``conf/``."""
    return _shipped("conf")


def am_dir() -> Path:
    """The application master's source: ``am/``, shipped to the AM container."""
    return _shipped("am")
