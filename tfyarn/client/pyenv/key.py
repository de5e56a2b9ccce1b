"""Cache keys: the same content gives the same archive name, computed in a blink.

Hashing a 2 GB environment's bytes at every submit would cost seconds; what
changes an installed environment changes its files' metadata. So an
environment's key is built from:

- a walk of every path the packer would put into the archive: its name and,
  for a file, its mode, size and mtime (a symlink: its target), so a file or
  directory added or removed anywhere under the prefix, by an installer or by
  hand, gives another key (~0.2 s for a 2 GB TensorFlow environment of
  29,000 files);
- each distribution's ``RECORD`` content (pip writes every installed file's
  sha256 there), which a reinstall rewrites even when its size and mtime tick
  happen to stay the same;
- the prefix, the base interpreter (path, size, mtime) and the files left out.

``__pycache__`` directories are not walked: Python writes them whenever a
module is first imported, and an archive with other ``.pyc`` files than the
environment runs the same (a ``.pyc`` that does not match its source is
recompiled). What the key does not see: a file edited in place, by hand, with
the same size within the same mtime tick. Source layers (editable installs) are
small and edited all the time, so their key is a hash of every file's content.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from pathlib import Path

# Bump when the archive layout, the packing or the key's recipe changes: old
# archives are not reused.
KEY_VERSION = "2"

# Top-level entries of a conda prefix that conda-pack never packs (its
# load_files): package caches and nested environments of a base install.
CONDA_UNPACKED = frozenset(
    {"pkgs", "envs", "conda-bld", ".conda_lock", "conda-recipes", ".index"}
)
# Written by Python as modules are imported, not by installers (see above).
_NOT_WALKED = "__pycache__"


def environment(
    prefix: str, *, kind: str, base_python: str, excluded: Iterable[str]
) -> str:
    """The key of a venv or conda environment's archive.

    Parameters
    ----------
    prefix
        The environment's directory.
    kind
        ``venv`` or ``conda``: which packer, hence which paths it packs.
    base_python
        A venv's base interpreter (nodes need it at that path); "" for conda.
    excluded
        Paths relative to ``prefix`` left out of the archive (the ``.pth``
        files that point outside it).
    """
    left_out = sorted(excluded)
    h = _hasher(kind, os.path.realpath(prefix), *left_out)
    _stat_into(h, Path(base_python)) if base_python else None
    root = Path(prefix)
    top_skip = CONDA_UNPACKED if kind == "conda" else frozenset()
    _tree_into(h, root, skip=set(left_out), top_skip=top_skip)
    for site in sorted(root.glob("lib/python*/site-packages")):
        h.update(site.name.encode())
        _records_into(h, site)
    return h.hexdigest()[:20]


def site_dir(path: str) -> str:
    """The key of a site-packages directory shipped as a layer."""
    h = _hasher("site", os.path.realpath(path))
    _tree_into(h, Path(path))
    _records_into(h, Path(path))
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


def _tree_into(
    h: hashlib._Hash,
    root: Path,
    *,
    skip: set[str] | None = None,
    top_skip: frozenset[str] = frozenset(),
) -> None:
    """Every path under ``root`` (relative, sorted): a directory's name, a
    file's mode, size and mtime, a symlink's target; symlinks are not followed.
    ``skip``: relative paths left out; ``top_skip``: names left out at the top."""
    skip = skip or set()
    pending = [("", root)]
    while pending:
        rel, directory = pending.pop()
        try:
            with os.scandir(directory) as found:
                entries = sorted(found, key=lambda e: e.name)
        except OSError as exc:  # the packer fails on it too; the key says so
            said = f"{rel}:unreadable:{exc.errno}\0"
            h.update(said.encode(errors="surrogateescape"))
            continue
        below = []
        for entry in entries:
            name = f"{rel}{entry.name}"
            if (
                entry.name == _NOT_WALKED
                or name in skip
                or (not rel and entry.name in top_skip)
            ):
                continue
            if entry.is_dir(follow_symlinks=False):
                # Its name only: its mtime changes when Python adds a
                # __pycache__ to it, and its entries are walked anyway.
                h.update(f"{name}/\0".encode(errors="surrogateescape"))
                below.append((f"{name}/", Path(entry.path)))
                continue
            try:
                st = entry.stat(follow_symlinks=False)
                link = os.readlink(entry.path) if entry.is_symlink() else ""
            except OSError:
                h.update(f"{name}:gone\0".encode(errors="surrogateescape"))
                continue
            about = f"{st.st_mode}:{st.st_size}:{st.st_mtime_ns}:{link}"
            h.update(f"{name}\0{about}\0".encode(errors="surrogateescape"))
        # Depth first, in name order: a stable order for the same tree.
        pending.extend(reversed(below))


def _records_into(h: hashlib._Hash, site: Path) -> None:
    """Each distribution's RECORD content (its installed files' hashes)."""
    try:
        names = sorted(os.listdir(site))
    except OSError:
        return
    for name in names:
        record = site / name / "RECORD"
        if name.endswith(".dist-info") and record.is_file():
            h.update(name.encode() + b"\0")
            h.update(hashlib.sha256(record.read_bytes()).digest())
