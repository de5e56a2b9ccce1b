"""``tfyarn image build``: a base image plus the job's Python environment.

The environment is this client's: tfyarn (its code, master and shipped
defaults, laid out as a wheel would), every distribution it requires,
recursively, and any named with ``--with``. Their files are streamed as one
tar into a container of the base image (``docker cp -``) and committed: no
build context, no Dockerfile, no network inside the build, one layer.

They go into a virtual environment at :data:`~tfyarn.contract.docker.IMAGE_PYTHON`
whose interpreter is the base's own Python, which must be of the client's
version (``X.Y``): the copied wheels hold compiled code for it.
"""

from __future__ import annotations

import io
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tfyarn import _paths
from tfyarn.contract import docker as _docker
from tfyarn.image._engine import (
    ImageError,
    docker,
    last_line,
    require_engine,
)

VENV = PurePosixPath(_docker.IMAGE_PYTHON).parents[1]  # /opt/tfyarn/venv
_PY = f"{sys.version_info.major}.{sys.version_info.minor}"
SITE = VENV / "lib" / f"python{_PY}" / "site-packages"
# The base's interpreter of the client's version, or its python3.
_FIND_PYTHON = (
    f'p=$(command -v python{_PY} || command -v python3) && echo "$p" && '
    '"$p" -c "import sys; print(\'%d.%d.%d\' % sys.version_info[:3])"'
)


@dataclass(frozen=True)
class Built:
    tag: str
    base: str
    python: str  # the base's interpreter the venv runs
    distributions: tuple[str, ...]
    files: int
    size_bytes: int
    seconds: float


def default_base() -> str:
    """Python's official slim image of the client's version (needs a registry)."""
    return f"python:{_PY}-slim-bookworm"


def build(
    tag: str, *, base: str | None = None, with_distributions: Sequence[str] = ()
) -> Built:
    """Build image ``tag`` from ``base`` with this client's job environment.

    Raises
    ------
    ImageError
        The tag is not a name YARN accepts, no Docker engine, the base has no
        Python of the client's version, or Docker failed (its words).
    """
    start = time.monotonic()
    problem = _docker.image_problem(tag)
    if problem:
        raise ImageError(f"--tag: {problem}")
    base = base or default_base()
    require_engine()
    python, version = _base_python(base)
    names = closure(["tfyarn", *with_distributions])
    created = docker(["create", "--entrypoint", "", base, "true"], timeout=120)
    container = created.stdout.strip()
    try:
        files, size = _copy_environment(container, python, version, names)
        docker(
            [
                "commit",
                "--change",
                "ENTRYPOINT []",
                "--change",
                f'CMD ["{_docker.IMAGE_PYTHON}"]',
                "--change",
                f"LABEL tfyarn.python={_docker.IMAGE_PYTHON}",
                container,
                tag,
            ],
            timeout=600,
        )
    finally:
        docker(["rm", "-f", container], timeout=120, check=False)
    return Built(
        tag=tag,
        base=base,
        python=python,
        distributions=tuple(sorted(names)),
        files=files,
        size_bytes=size,
        seconds=time.monotonic() - start,
    )


def closure(roots: Iterable[str]) -> set[str]:
    """The installed distributions ``roots`` need, themselves included.

    Raises
    ------
    ImageError
        A root is not installed here (a dependency missing is skipped: pip
        allows optional ones to be absent).
    """
    seen: set[str] = set()
    todo = [(r, True) for r in roots]
    while todo:
        name, required = todo.pop()
        key = canonicalize_name(name)
        if key in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            if required:
                raise ImageError(
                    f"--with {name}: no such distribution is installed in this "
                    f"Python ({sys.executable})"
                ) from None
            continue
        seen.add(key)
        for text in dist.requires or ():
            req = Requirement(text)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append((req.name, False))
    return seen


def _base_python(base: str) -> tuple[str, str]:
    result = docker(
        [
            "run",
            "--rm",
            "--network",
            "none",
            "--entrypoint",
            "",
            base,
            "sh",
            "-c",
            _FIND_PYTHON,
        ],
        timeout=300,
        check=False,
    )
    lines = result.stdout.split()
    if result.returncode != 0 or len(lines) != 2:
        if "Unable to find image" in result.stderr or "No such image" in result.stderr:
            raise ImageError(
                f"base image {base} is not on this machine and could not be "
                f"pulled ({last_line(result)}); load it first or give --base"
            )
        raise ImageError(
            f"base image {base} has no python{_PY} or python3 "
            f"({last_line(result)}); give --base an image with Python {_PY}"
        )
    python, version = lines
    if not version.startswith(_PY + "."):
        raise ImageError(
            f"base image {base} has Python {version} ({python}), this client "
            f"{sys.version.split()[0]}: the copied packages hold compiled code "
            f"for {_PY}; give --base an image with Python {_PY}"
        )
    return python, version


def _copy_environment(
    container: str, python: str, version: str, names: set[str]
) -> tuple[int, int]:
    """Stream the venv into ``container`` as one tar; (files, bytes) copied."""
    count = size = 0
    with subprocess.Popen(
        ["docker", "cp", "-", f"{container}:/"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdin is not None
        try:
            with tarfile.open(fileobj=proc.stdin, mode="w|") as tar:
                for directory in _parents_of(VENV / "bin", SITE):
                    tar.addfile(_dir_info(directory))
                for link in ("python", "python3", f"python{_PY}"):
                    info = tarfile.TarInfo(str(VENV / "bin" / link).lstrip("/"))
                    info.type, info.linkname, info.mode = tarfile.SYMTYPE, python, 0o777
                    tar.addfile(info)
                cfg = (
                    f"home = {PurePosixPath(python).parent}\n"
                    "include-system-site-packages = false\n"
                    f"version = {version}\n"
                ).encode()
                info = _file_info(VENV / "pyvenv.cfg", len(cfg))
                tar.addfile(info, io.BytesIO(cfg))
                made: set[PurePosixPath] = set()
                for source, target in _environment_files(names):
                    for directory in _parents_of(target.parent):
                        if directory not in made and SITE in directory.parents:
                            made.add(directory)
                            tar.addfile(_dir_info(directory))
                    stat = source.stat()
                    info = _file_info(target, stat.st_size, stat.st_mode)
                    with source.open("rb") as data:
                        tar.addfile(info, data)
                    count += 1
                    size += stat.st_size
        except BrokenPipeError:
            pass  # docker cp ended early: its stderr says why
        finally:
            proc.stdin.close()
        error = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise ImageError(f"`docker cp` into the image failed: {error.strip()[-300:]}")
    return count, size


def _environment_files(names: set[str]) -> Iterator[tuple[Path, PurePosixPath]]:
    """(local file, path in the image) for every file of the environment."""
    seen: set[PurePosixPath] = set()
    own = canonicalize_name("tfyarn")
    for name in sorted(names):
        dist = metadata.distribution(name)
        root = Path(str(dist.locate_file(""))).resolve()
        for rel in dist.files or ():
            if canonicalize_name(name) == own and not str(rel).endswith(
                ".dist-info/METADATA"
            ):
                continue  # tfyarn comes from its source below (editable installs)
            source = Path(str(dist.locate_file(rel))).resolve()
            try:
                inside = source.relative_to(root)
            except ValueError:
                continue  # console scripts (../../bin/...): not needed in a task
            target = SITE / PurePosixPath(*inside.parts)
            if source.is_file() and target not in seen:
                seen.add(target)
                yield source, target
    package = Path(__file__).resolve().parents[1]
    for top, into in (
        (package, SITE / "tfyarn"),
        (_paths.am_dir(), SITE / "tfyarn" / "_shipped" / "am"),
        (_paths.conf_dir(), SITE / "tfyarn" / "_shipped" / "conf"),
    ):
        for path in sorted(top.rglob("*")):
            parts = path.relative_to(top).parts
            if path.is_file() and "__pycache__" not in parts and parts[0] != "_shipped":
                yield path, into / PurePosixPath(*parts)


def _parents_of(*paths: PurePosixPath) -> list[PurePosixPath]:
    out: list[PurePosixPath] = []
    for path in paths:
        for p in [*reversed(path.parents), path]:
            if str(p) != "/" and p not in out:
                out.append(p)
    return out


def _dir_info(path: PurePosixPath) -> tarfile.TarInfo:
    info = tarfile.TarInfo(str(path).lstrip("/"))
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    return info


def _file_info(path: PurePosixPath, size: int, mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(str(path).lstrip("/"))
    # Any user may read (YARN runs the container as the job's user); the
    # execute bits stay as they were (compiled libraries, helper binaries).
    info.size, info.mode = size, (mode & 0o755) | 0o444
    return info
