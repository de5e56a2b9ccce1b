"""Code an environment imports from outside itself: editable installs and .pth paths.

venv-pack and conda-pack refuse (or skip) editable installs, yet tfyarn itself
is one in development and CI, and so is a user's own project. Python finds
them through ``.pth`` files in site-packages: a line that is a directory
(hatchling, setuptools' compat mode, ``setup.py develop``), or setuptools'
``import __editable___<name>_finder`` whose ``MAPPING`` names each package's
directory. Those directories are not on the nodes, so each becomes a *layer*:
shipped as its own archive and put on ``PYTHONPATH`` in the container, and the
``.pth``/finder files that point at them are left out of the environment's
archive. A layer that is itself a site-packages directory (a venv stacked on
another through a ``.pth``) is shipped whole; a source tree ships the files
git tracks (plus untracked, not ignored ones), else every file but caches,
VCS and virtualenv directories.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tfyarn.errors import SpecError

# A source layer larger than this is most likely not code.
MAX_SOURCE_BYTES = 256 * 1024 * 1024
_SKIP_DIRS = {
    "__pycache__",
    ".git",
    ".hg",
    ".svn",
    ".tox",
    ".nox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    "node_modules",
    "build",
    "dist",
}
_FINDER = re.compile(r"^\s*import\s+(__editable___\w+_finder)\b")


@dataclass(frozen=True)
class Layer:
    """A directory the environment imports from, outside it."""

    path: str
    # "site": a site-packages directory; "source": a project's source tree;
    # "package": one package (``name``) mapped by an editable finder.
    kind: str
    name: str = ""


@dataclass(frozen=True)
class Outside:
    """What an environment reaches outside itself."""

    layers: tuple[Layer, ...]
    # .pth and finder files (relative to the prefix) not to pack: the layers
    # replace them, and their absolute paths mean nothing on a node.
    excluded: tuple[str, ...]


def site_dirs(prefix: Path) -> list[Path]:
    """The site-packages directories of an environment."""
    return sorted(p for p in prefix.glob("lib/python*/site-packages") if p.is_dir())


def find(prefix: str) -> Outside:
    """Every directory the environment at ``prefix`` imports from outside it."""
    root = Path(prefix)
    layers: list[Layer] = []
    excluded: list[str] = []
    for site in site_dirs(root):
        for pth in sorted(site.glob("*.pth")):
            found, drop = _read_pth(pth, root)
            layers += [f for f in found if f not in layers]
            if drop:
                excluded.append(str(pth.relative_to(root)))
                excluded += [
                    str(f.relative_to(root)) for f in _finders(pth) if f.exists()
                ]
    return Outside(layers=tuple(layers), excluded=tuple(excluded))


def _read_pth(pth: Path, prefix: Path) -> tuple[list[Layer], bool]:
    """A .pth file's outside layers, and whether the file should be left out."""
    layers: list[Layer] = []
    kept = False
    try:
        lines = pth.read_text(errors="replace").splitlines()
    except OSError:
        return [], False
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        finder = _FINDER.match(line)
        if finder:
            mapped = _finder_mapping(pth.parent / f"{finder.group(1)}.py")
            layers += [Layer(path=p, kind="package", name=n) for n, p in mapped]
            continue
        if line.startswith(("import ", "import\t")):
            kept = True  # other code: keep the file, it may matter
            continue
        where = os.path.normpath(os.path.join(pth.parent, line))
        if _inside(where, prefix):
            kept = True
        elif os.path.isdir(where):
            has_dists = any(Path(where).glob("*.dist-info"))
            layers.append(Layer(path=where, kind="site" if has_dists else "source"))
    return layers, not kept


def _finders(pth: Path) -> list[Path]:
    names = []
    for line in pth.read_text(errors="replace").splitlines():
        match = _FINDER.match(line)
        if match:
            names.append(pth.parent / f"{match.group(1)}.py")
    return names


def _finder_mapping(finder: Path) -> list[tuple[str, str]]:
    """``MAPPING`` of a setuptools editable finder: package -> its directory."""
    try:
        tree = ast.parse(finder.read_text())
    except (OSError, SyntaxError):
        return []
    for node in tree.body:
        target = (
            getattr(node, "target", None)
            or (getattr(node, "targets", None) or [None])[0]
        )
        if isinstance(target, ast.Name) and target.id == "MAPPING":
            value = ast.literal_eval(node.value)  # type: ignore[attr-defined]
            return sorted((str(k), str(v)) for k, v in dict(value).items())
    return []


def _inside(path: str, prefix: Path) -> bool:
    try:
        return Path(path).resolve().is_relative_to(prefix.resolve())
    except OSError:
        return False


def layer_files(layer: Layer) -> list[tuple[str, str]]:
    """(absolute source, name in the layer's archive) of every file to ship.

    Raises
    ------
    SpecError
        A source tree above ``MAX_SOURCE_BYTES``.
    """
    root = Path(layer.path)
    if layer.kind == "package":
        if root.is_file():
            return [(str(root), f"{layer.name}.py")]
        return [(str(root / rel), f"{layer.name}/{rel}") for rel in _walk(root)]
    if layer.kind == "site":
        return [(str(root / rel), rel) for rel in _walk(root, skip=set())]
    rels = _git_files(root)
    files = [
        (str(root / rel), rel) for rel in (rels if rels is not None else _walk(root))
    ]
    total = sum(os.path.getsize(src) for src, _ in files)
    if total > MAX_SOURCE_BYTES:
        raise SpecError(
            f"--python_env: the editable install at {root} would ship "
            f"{total / 2**20:.0f} MiB of files (more than "
            f"{MAX_SOURCE_BYTES // 2**20} MiB): that is not only code. Install "
            "the project without -e, or move its data out of the source tree"
        )
    return files


def _git_files(root: Path) -> list[str] | None:
    """Tracked and untracked-not-ignored files under ``root``, if a git tree."""
    try:
        done = subprocess.run(
            [
                "git",
                "-C",
                str(root),
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ],
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    names = [n for n in done.stdout.decode(errors="surrogateescape").split("\0") if n]
    return sorted(n for n in names if _is_code(n) and (root / n).is_file())


def _is_code(rel: str) -> bool:
    """Not a cache or compiled file (git may list untracked ones)."""
    parts = rel.split("/")
    return not rel.endswith((".pyc", "~")) and not (set(parts[:-1]) & _SKIP_DIRS)


def _walk(root: Path, skip: set[str] | None = None) -> list[str]:
    skip = _SKIP_DIRS if skip is None else skip
    return sorted(_walk_iter(root, skip))


def _walk_iter(root: Path, skip: set[str]) -> Iterator[str]:
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        # Virtualenvs and conda environments inside a source tree are not code.
        dirnames[:] = [
            d
            for d in dirnames
            if d not in skip
            and not (skip and d.startswith("."))
            and not (here / d / "pyvenv.cfg").exists()
            and not (here / d / "conda-meta").exists()
        ]
        for name in filenames:
            if name.endswith((".pyc", "~")):
                continue
            yield str((here / name).relative_to(root))
