"""What the shipped-environment tests put into the environments they build.

tfyarn laid out as its wheel has it, and its dependencies as this session's
environment has them installed (nothing is downloaded): by default without
TensorFlow, TensorBoard and pyarrow, which neither the master nor the task
runtime imports, so the environments are small and quick to build.
"""

from __future__ import annotations

import importlib.metadata
import re
import shutil
import subprocess
import sys
from pathlib import Path

from helpers import REPO

# What the master and the runtime never import.
BIG = {"tensorflow-cpu", "tensorboard", "pyarrow"}


def _name(requirement: str) -> str:
    return re.split(r"[ ;<>=!~\[(]", requirement, maxsplit=1)[0]


def requirements(*, full: bool = False) -> list[str]:
    """tfyarn's own requirements (its installed metadata), without extras."""
    kept = [
        r for r in importlib.metadata.requires("tfyarn") or [] if "extra ==" not in r
    ]
    return kept if full else [r for r in kept if _name(r) not in BIG]


def distributions(*, full: bool = False) -> list[importlib.metadata.Distribution]:
    """The installed distributions of :func:`requirements`, with theirs."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    todo = [_name(r) for r in requirements(full=full)]
    while todo:
        name = todo.pop().lower().replace("_", "-")
        if name in seen:
            continue
        dist = importlib.metadata.distribution(name)
        seen[name] = dist
        todo += [_name(r) for r in dist.requires or [] if "extra ==" not in r]
    return list(seen.values())


def tfyarn_sources(where: Path) -> Path:
    """tfyarn's package as its wheel lays it out (the hdfs:// plugin if built,
    ``am/`` and ``conf/`` in ``tfyarn/_shipped``), under ``where``."""
    skip = shutil.ignore_patterns(
        "__pycache__", "src", "target", "Cargo.*", "hatch_build.py", "cargo_sources.py"
    )
    shutil.copytree(REPO / "tfyarn", where / "tfyarn", ignore=skip)
    for shipped in ("am", "conf"):
        shutil.copytree(
            REPO / shipped, where / "tfyarn" / "_shipped" / shipped, ignore=skip
        )
    return where


def small_venv(where: Path) -> Path:
    """A virtualenv at ``where`` holding tfyarn as this session has it installed
    (editable: its ``.pth`` points at the checkout) and :func:`distributions`,
    their files copied from this session's environment: what ``--python_env
    auto`` packs when the client runs from it, about 80 MB instead of 2 GB."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(where)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    site = where / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}"
    site = site / "site-packages"
    for dist in [*distributions(), importlib.metadata.distribution("tfyarn")]:
        for file in dist.files or []:
            if str(file).startswith(".."):  # scripts in bin/: not imported
                continue
            source = Path(str(dist.locate_file(file)))
            if source.is_file():
                target = site / file
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
    return where
