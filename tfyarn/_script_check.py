"""Refuse a script that cannot run before a job is submitted for it.

A syntax error otherwise surfaces only once every task has been launched and
has failed (the master restarts them up to ``max_restarts`` times first: a
one-character typo cost 99 s and four attempts). Compiling locally takes
milliseconds.
"""

from __future__ import annotations

import io
import os
import sys
import tokenize
from pathlib import Path

from tfyarn.errors import SpecError


def check_script(path: str, python: str = "") -> None:
    """Raise :class:`SpecError` unless ``path`` is Python source that compiles.

    The syntax is checked only when the tasks run this very interpreter (or
    ``python`` is empty): another version may accept syntax this one does not.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise SpecError(f"cannot read script {path}: {exc.strerror}") from None
    if b"\0" in data:
        raise SpecError(
            f"script {path} is not a Python program: it holds binary data "
            "(NUL bytes); give the .py file every task should run"
        )
    _decode(path, data)
    if python and not _same_interpreter(python):
        return
    try:
        compile(data, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        where = f"{exc.filename or path}:{exc.lineno}" if exc.lineno else path
        raise SpecError(
            f"script {path} does not compile ({where}: {exc.msg}); every task "
            "would fail on it, so nothing was submitted: fix the script first"
        ) from None


def _decode(path: str, data: bytes) -> None:
    """The source must decode in its declared encoding (UTF-8 by default)."""
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:  # a coding cookie naming no codec
        raise SpecError(f"script {path}: {exc.msg}") from None
    try:
        data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpecError(
            f"script {path} is not Python source: {path}:{line} is not valid "
            f"{encoding} (byte 0x{data[exc.start]:02x}); save it as UTF-8 or "
            "declare its encoding on the first line (# -*- coding: latin-1 -*-)"
        ) from None


def _same_interpreter(python: str) -> bool:
    try:
        return os.path.samefile(python, sys.executable)
    except OSError:
        return False
