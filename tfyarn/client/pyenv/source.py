"""What ``--python_env`` names: an environment directory, an archive, a pex or a URL."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from tfyarn.client.pyenv import pexfile
from tfyarn.errors import SpecError

# Archives YARN unpacks itself (Hadoop's FileUtil: unzip, untar).
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar", ".zip")
REMOTE_SCHEMES = ("hdfs", "viewfs")


@dataclass(frozen=True)
class EnvSource:
    """A parsed ``--python_env``."""

    # "venv" | "conda" | "archive" (local file) | "pex" (local .pex file) |
    # "remote" (hdfs://)
    kind: str
    location: str  # the environment's prefix, the archive's (or pex's) path, a URL
    given: str  # what the user wrote, for messages

    @property
    def packed(self) -> bool:
        """Whether tfyarn packs it (a directory) or ships it as it is."""
        return self.kind in ("venv", "conda")

    def base_python(self) -> str:
        """The interpreter a venv's ``bin/python`` links to: nodes need it at
        this path. Empty for conda environments and archives."""
        if self.kind != "venv":
            return ""
        return os.path.realpath(Path(self.location) / "bin" / "python")


def parse(value: str) -> EnvSource:
    """Classify ``--python_env``; the directory or file must exist.

    Raises
    ------
    SpecError
        The value names nothing usable, saying what would be.
    """
    given = value.strip()
    if given == "auto":
        prefix = sys.prefix
        kind = _env_kind(Path(prefix))
        if kind is None:
            raise SpecError(
                f"--python_env auto: this Python ({sys.executable}) runs from "
                f"{prefix}, which is not a virtualenv or conda environment, so "
                "there is nothing self-contained to ship: create one "
                "(python3 -m venv ENV && ENV/bin/pip install tfyarn ...), run "
                "tfyarn from it, or give --python_env ENV"
            )
        return EnvSource(kind=kind, location=prefix, given=given)
    if "://" in given:
        scheme = given.split("://", 1)[0]
        if scheme not in REMOTE_SCHEMES or not given.endswith(ARCHIVE_SUFFIXES):
            raise SpecError(
                f"--python_env {given}: a remote environment must be an archive "
                f"({', '.join(ARCHIVE_SUFFIXES)}) on HDFS (hdfs:// or viewfs://)"
            )
        return EnvSource(kind="remote", location=given, given=given)
    path = Path(given).expanduser()
    if not path.exists():
        raise SpecError(
            f"--python_env {given}: not found (relative to {Path.cwd()}); give "
            "auto, a virtualenv or conda directory, an archive of one "
            f"({', '.join(ARCHIVE_SUFFIXES)}), a .pex file or an hdfs:// archive"
        )
    if path.is_dir():
        kind = _env_kind(path)
        if kind is None and pexfile.is_pex_dir(path):
            raise SpecError(
                f"--python_env {given}: a pex directory (--layout packed or "
                "loose); give a single-file pex (pex's default --layout zipapp)"
            )
        if kind is None:
            raise SpecError(
                f"--python_env {given}: {path.resolve()} is neither a virtualenv "
                "(no pyvenv.cfg) nor a conda environment (no conda-meta/)"
            )
        return EnvSource(kind=kind, location=str(path.absolute()), given=given)
    if path.name.endswith(pexfile.SUFFIX):
        location = str(path.resolve())
        pexfile.read(location, given)  # refused now, before anything is uploaded
        return EnvSource(kind="pex", location=location, given=given)
    if not path.name.endswith(ARCHIVE_SUFFIXES):
        raise SpecError(
            f"--python_env {given}: not an archive YARN can unpack; give "
            f"{', '.join(ARCHIVE_SUFFIXES)} (venv-pack or conda-pack make them) "
            "or a .pex file"
        )
    return EnvSource(kind="archive", location=str(path.resolve()), given=given)


def _env_kind(prefix: Path) -> str | None:
    if (prefix / "conda-meta").is_dir():
        return "conda"
    if (prefix / "pyvenv.cfg").is_file():
        return "venv"
    return None
