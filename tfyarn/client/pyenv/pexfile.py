"""A ``.pex`` file as the job's environment: what the client reads from it.

A pex is a zip (PEX-INFO, pex's own bootstrap, the dependencies) run by a
Python the node has. In its default "zipapp" mode pex only changes
``sys.path`` of the process it runs in, and the task's script runs in a second
interpreter that would not see the pex's packages. So tfyarn runs every pex
the way pex runs a ``--venv`` pex (``PEX_VENV=1``): on a node's first job pex
turns it into a virtualenv under its ``PEX_ROOT`` (kept per node and user, see
:mod:`tfyarn._launch`) and later jobs find it there; the master, the runtime
and the script all run that venv's ``bin/python``. ``PEX_VENV`` needs a pex
built with ``--venv`` or ``--include-tools``, which is checked here, with the
rest of what a job needs, before anything is uploaded.
"""

from __future__ import annotations

import hashlib
import json
import shlex
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfyarn.errors import SpecError

SUFFIX = ".pex"
# Bump when what a pex's key covers changes.
KEY_VERSION = "1"
# Without a shebang, pex files are run by `python3` (pex's own default is the
# building interpreter's name, e.g. python3.11).
DEFAULT_PYTHON = "python3"


@dataclass(frozen=True)
class PexFile:
    """What the client needs of a ``.pex``."""

    path: str
    # The interpreter each node runs it with: the shebang's program
    # (``python3.11`` from ``#!/usr/bin/env python3.11``, or an absolute path).
    python: str
    # PEX-INFO's interpreter constraints, for the message of a node without it.
    constraints: tuple[str, ...]
    # The archive's cache key: PEX-INFO holds the hash of every distribution
    # and of the code, so its bytes (and the shebang) stand for the content.
    key: str


def read(path: str, given: str) -> PexFile:
    """Read and check a zipapp ``.pex`` (``given``: as the user wrote it).

    Raises
    ------
    SpecError
        Not a pex file, a pex that cannot run as a venv, or one without tfyarn;
        the message says how to build one that works.
    """
    try:
        with zipfile.ZipFile(path) as pex:
            raw = pex.read("PEX-INFO")
            names = pex.namelist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise SpecError(
            f"--python_env {given}: not a pex file ({exc}); build one with "
            "`pex --venv tfyarn ... -o app.pex`"
        ) from None
    except KeyError:
        raise SpecError(
            f"--python_env {given}: a zip without PEX-INFO, so not a pex file; "
            "build one with `pex --venv tfyarn ... -o app.pex`"
        ) from None
    try:
        info: dict[str, Any] = json.loads(raw)
    except ValueError as exc:
        raise SpecError(
            f"--python_env {given}: its PEX-INFO is not JSON ({exc}); build the "
            "pex again"
        ) from None
    if not (info.get("venv") or info.get("includes_tools")):
        raise SpecError(
            f"--python_env {given}: this pex runs only inside its own process "
            "(built without --venv or --include-tools), so the task's script, "
            "which runs in a second interpreter, would not see its packages. "
            "Build it again with `pex --venv ...` (or --include-tools): tfyarn "
            "then turns it into a virtualenv once per node"
        )
    if not _has_tfyarn(info, names):
        raise SpecError(
            f"--python_env {given}: the pex does not contain tfyarn, which the "
            "master and every task run from it; add tfyarn to its requirements "
            "(`pex --venv tfyarn tensorflow-cpu ... -o app.pex`)"
        )
    shebang = _shebang(path)
    return PexFile(
        path=path,
        python=python_of(shebang),
        constraints=tuple(str(c) for c in info.get("interpreter_constraints") or ()),
        key=_key(shebang, raw),
    )


def is_pex_dir(path: Path) -> bool:
    """A ``--layout packed`` or ``loose`` pex: a directory with PEX-INFO."""
    return (path / "PEX-INFO").is_file()


def python_of(shebang: str) -> str:
    """The interpreter a shebang line runs: ``#!/usr/bin/env python3.11`` ->
    ``python3.11``, ``#!/opt/py/bin/python3 -sE`` -> ``/opt/py/bin/python3``."""
    words = shlex.split(shebang[2:]) if shebang.startswith("#!") else []
    if words and Path(words[0]).name == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    return words[0] if words else DEFAULT_PYTHON


def _shebang(path: str) -> str:
    with open(path, "rb") as f:
        first = f.readline(4096)
    return first.decode("utf-8", "replace").strip() if first.startswith(b"#!") else ""


def _has_tfyarn(info: dict[str, Any], names: list[str]) -> bool:
    """tfyarn as a distribution (``tfyarn-0.1.0-py3-none-any.whl``) or as
    sources added with ``-D``/``-P`` (``tfyarn/__init__.py`` at the top)."""
    dists = info.get("distributions") or {}
    if any(str(d).lower().startswith("tfyarn-") for d in dists):
        return True
    return "tfyarn/__init__.py" in names


def _key(shebang: str, pex_info: bytes) -> str:
    h = hashlib.sha256()
    for part in (KEY_VERSION, "pex", shebang):
        h.update(part.encode(errors="surrogateescape") + b"\0")
    h.update(pex_info)
    return h.hexdigest()[:20]
