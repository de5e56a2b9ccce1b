"""Cache keys: the same content gives the same archive name, computed in milliseconds.

Hashing a 2 GB environment's bytes at every submit would cost seconds; what
changes an installed environment is an installer, and installers write
metadata. So an environment's key is built from:

- each distribution's ``RECORD`` (pip writes every installed file's sha256
  there; an upgrade, a reinstall or a removal changes it) or, for an
  ``.egg-info`` and conda's ``conda-meta/*.json``, name, size and mtime;
- name, size and mtime of every other top-level entry of site-packages and of
  ``bin/`` (a package dropped in by hand, a script added);
- the prefix, the base interpreter (path, size, mtime) and the files left out.

What it does not see: a file inside an installed package edited by hand
without an installer. Source layers (editable installs) are small and edited
all the time, so their key is a hash of every file's content.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

# Bump when the archive layout or packing changes: old archives are not reused.
KEY_VERSION = "1"


def environment(
    prefix: str, *, kind: str, base_python: str, excluded: Iterable[str]
) -> str:
    """The key of a venv or conda environment's archive."""
    h = _hasher(kind, os.path.realpath(prefix), *sorted(excluded))
    _stat_into(h, Path(base_python)) if base_python else None
    root = Path(prefix)
    for sub in ("bin", "conda-meta"):
        _entries_into(h, root / sub)
    for site in sorted(root.glob("lib/python*/site-packages")):
        h.update(site.name.encode())
        _site_into(h, site)
    return h.hexdigest()[:20]


def site_dir(path: str) -> str:
    """The key of a site-packages directory shipped as a layer."""
    h = _hasher("site", os.path.realpath(path))
    _site_into(h, Path(path))
    return h.hexdigest()[:20]


def files(entries: Iterable[tuple[str, str]]) -> str:
    """The key of a source layer: every file's name and content."""
    h = _hasher("files")
    for source, name in entries:
        h.update(name.encode(errors="surrogateescape") + b"\0")
        with open(source, "rb") as f:
            h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()[:20]


def local_file(path: str) -> str:
    """The key of a prebuilt archive: path, size and mtime (not its bytes)."""
    h = _hasher("archive", os.path.realpath(path))
    _stat_into(h, Path(path))
    return h.hexdigest()[:20]


def _hasher(*parts: str) -> hashlib._Hash:
    h = hashlib.sha256()
    for part in (KEY_VERSION, *parts):
        h.update(part.encode(errors="surrogateescape") + b"\0")
    return h


def _stat_into(h: hashlib._Hash, path: Path) -> None:
    try:
        st = path.stat()
    except OSError:
        h.update(f"{path}:missing\0".encode())
        return
    h.update(f"{path}:{st.st_size}:{st.st_mtime_ns}\0".encode(errors="surrogateescape"))


def _entries_into(h: hashlib._Hash, directory: Path) -> None:
    """Name, size and mtime of each entry (conda-meta's JSON files included)."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return
    for name in names:
        _stat_into(h, directory / name)


def _site_into(h: hashlib._Hash, site: Path) -> None:
    for name in sorted(os.listdir(site)):
        path = site / name
        record = path / "RECORD"
        if name.endswith(".dist-info") and record.is_file():
            h.update(name.encode() + b"\0")
            h.update(hashlib.sha256(record.read_bytes()).digest())
        else:
            _stat_into(h, path)
