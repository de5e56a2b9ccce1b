"""``tfyarn image build``: a base image plus the job's Python environment.

The environment is this client's: tfyarn (its code, master and shipped
defaults, laid out as a wheel would), every distribution it requires,
recursively, and any named with ``--with``. Their files are streamed as a
tar into a container (``docker cp -``) and committed: no build context, no
Dockerfile, no network inside the build. Two layers: the distributions
(TensorFlow: gigabytes), kept as ``tfyarn-env:<key>`` and reused while the
base and their files are the same, then tfyarn itself (a few MB), so a
rebuild after a change of tfyarn's code copies only that.

They go into a virtual environment at :data:`~tfyarn.contract.docker.IMAGE_PYTHON`
whose interpreter is the base's own Python, which must be of the client's
version (``X.Y``): the copied wheels hold compiled code for it.
"""

from __future__ import annotations

import hashlib
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
    image_exists,
    last_line,
    require_engine,
)

VENV = PurePosixPath(_docker.IMAGE_PYTHON).parents[1]  # /opt/tfyarn/venv
# Where the distributions' layers are kept, each tagged by its content's key.
ENV_REPOSITORY = "tfyarn-env"
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
    files: int  # copied by this build
    size_bytes: int
    seconds: float
    environment: str  # the distributions' layer (ENV_REPOSITORY:<key>)
    reused_environment: bool  # it was there already: only tfyarn was copied


@dataclass(frozen=True)
class Entry:
    """One member of a layer's tar: a file (``source``), a directory, a link
    or literal content."""

    target: PurePosixPath
    source: Path | None = None
    size: int = 0
    mode: int = 0o644
    link: str = ""
    data: bytes | None = None
    directory: bool = False


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
    dependencies = list(_dependency_files(names))
    env = environment_tag(base, python, version, dependencies)
    reused = image_exists(env)
    if not reused:
        venv = list(_venv_skeleton(python, version))
        _commit_layer(base, env, [*venv, *dependencies], changes=())
    own = list(_own_files())
    _commit_layer(
        env,
        tag,
        own,
        changes=(
            "ENTRYPOINT []",
            f'CMD ["{_docker.IMAGE_PYTHON}"]',
            f"LABEL tfyarn.python={_docker.IMAGE_PYTHON}",
        ),
    )
    copied = own if reused else [*dependencies, *own]
    return Built(
        tag=tag,
        base=base,
        python=python,
        distributions=tuple(sorted(names)),
        files=sum(1 for e in copied if e.source is not None),
        size_bytes=sum(e.size for e in copied),
        seconds=time.monotonic() - start,
        environment=env,
        reused_environment=reused,
    )


def environment_tag(
    base: str, python: str, version: str, entries: Sequence[Entry]
) -> str:
    """``tfyarn-env:<key>``: the distributions' layer on ``base``, named by
    what it holds: the base image's id, its Python, every file's path and
    size, and each distribution's ``RECORD`` (the hash of every file pip
    installed). Not times, nor the byte code compiled at install (it holds
    the venv's path): a fresh venv of the same wheels has the same key, and a
    changed dependency makes a new one."""
    inspected = docker(
        ["image", "inspect", "--format", "{{.Id}}", base], timeout=60, check=False
    )
    digest = hashlib.sha256(f"{inspected.stdout.strip() or base}\n".encode())
    digest.update(f"{python} {version}\n".encode())
    for entry in entries:
        if "__pycache__" in entry.target.parts:
            continue
        digest.update(f"{entry.target} {entry.size}\n".encode())
        if entry.source and entry.target.name == "RECORD":
            digest.update(_recorded_hashes(entry.source))
    return f"{ENV_REPOSITORY}:{digest.hexdigest()[:16]}"


def _recorded_hashes(record: Path) -> bytes:
    """A RECORD's lines for files of the distribution itself (not the
    scripts and byte code made at install, which hold the venv's path)."""
    lines = record.read_text(errors="replace").splitlines()
    return "\n".join(
        line
        for line in lines
        if not line.startswith("..") and "__pycache__" not in line
    ).encode()


def _commit_layer(
    image: str, tag: str, entries: Sequence[Entry], *, changes: Sequence[str]
) -> None:
    """``image`` plus ``entries``, committed as ``tag`` (one layer)."""
    created = docker(["create", "--entrypoint", "", image, "true"], timeout=120)
    container = created.stdout.strip()
    try:
        _copy(container, entries)
        flags = [arg for change in changes for arg in ("--change", change)]
        docker(["commit", *flags, container, tag], timeout=600)
    finally:
        docker(["rm", "-f", container], timeout=120, check=False)


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


def _copy(container: str, entries: Sequence[Entry]) -> None:
    """Stream ``entries`` into ``container`` as one tar, each file after the
    directories below site-packages that hold it."""
    made: set[PurePosixPath] = set()
    with subprocess.Popen(
        ["docker", "cp", "-", f"{container}:/"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdin is not None
        try:
            with tarfile.open(fileobj=proc.stdin, mode="w|") as tar:
                for entry in entries:
                    # A file's directories below site-packages, each once.
                    for directory in _parents_of(entry.target.parent):
                        if directory not in made and SITE in directory.parents:
                            made.add(directory)
                            tar.addfile(_dir_info(directory))
                    _add(tar, entry)
        except BrokenPipeError:
            pass  # docker cp ended early: its stderr says why
        finally:
            proc.stdin.close()
        error = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    if proc.returncode != 0:
        raise ImageError(f"`docker cp` into the image failed: {error.strip()[-300:]}")


def _add(tar: tarfile.TarFile, entry: Entry) -> None:
    if entry.directory:
        tar.addfile(_dir_info(entry.target))
    elif entry.link:
        info = tarfile.TarInfo(str(entry.target).lstrip("/"))
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, entry.link, 0o777
        tar.addfile(info)
    elif entry.data is not None:
        tar.addfile(_file_info(entry.target, len(entry.data)), io.BytesIO(entry.data))
    else:
        assert entry.source is not None
        with entry.source.open("rb") as data:
            tar.addfile(_file_info(entry.target, entry.size, entry.mode), data)


def _venv_skeleton(python: str, version: str) -> Iterator[Entry]:
    """The venv around the base's interpreter: its directories, links, pyvenv.cfg."""
    for directory in _parents_of(VENV / "bin", SITE):
        yield Entry(directory, directory=True)
    for link in ("python", "python3", f"python{_PY}"):
        yield Entry(VENV / "bin" / link, link=python)
    cfg = (
        f"home = {PurePosixPath(python).parent}\n"
        "include-system-site-packages = false\n"
        f"version = {version}\n"
    ).encode()
    yield Entry(VENV / "pyvenv.cfg", data=cfg, size=len(cfg))


def _file(source: Path, target: PurePosixPath) -> Entry:
    stat = source.stat()
    return Entry(target, source=source, size=stat.st_size, mode=stat.st_mode)


def _dependency_files(names: set[str]) -> Iterator[Entry]:
    """Every file of the distributions in ``names`` but tfyarn, in the venv."""
    seen: set[PurePosixPath] = set()
    own = canonicalize_name("tfyarn")
    for name in sorted(names):
        if canonicalize_name(name) == own:
            continue
        dist = metadata.distribution(name)
        root = Path(str(dist.locate_file(""))).resolve()
        for rel in dist.files or ():
            source = Path(str(dist.locate_file(rel))).resolve()
            try:
                inside = source.relative_to(root)
            except ValueError:
                continue  # console scripts (../../bin/...): not needed in a task
            target = SITE / PurePosixPath(*inside.parts)
            if source.is_file() and target not in seen:
                seen.add(target)
                yield _file(source, target)


def _own_files() -> Iterator[Entry]:
    """tfyarn from its source (editable installs too), with its metadata."""
    dist = metadata.distribution("tfyarn")
    root = Path(str(dist.locate_file(""))).resolve()
    for rel in dist.files or ():
        if str(rel).endswith(".dist-info/METADATA"):
            source = Path(str(dist.locate_file(rel))).resolve()
            yield _file(source, SITE / PurePosixPath(*source.relative_to(root).parts))
    package = Path(__file__).resolve().parents[1]
    for top, into in (
        (package, SITE / "tfyarn"),
        (_paths.am_dir(), SITE / "tfyarn" / "_shipped" / "am"),
        (_paths.conf_dir(), SITE / "tfyarn" / "_shipped" / "conf"),
    ):
        for path in sorted(top.rglob("*")):
            parts = path.relative_to(top).parts
            if path.is_file() and "__pycache__" not in parts and parts[0] != "_shipped":
                yield _file(path, into / PurePosixPath(*parts))


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
