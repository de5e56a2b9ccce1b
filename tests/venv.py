"""Make the checkout's ``.venv`` for the tests: tfyarn, editable, over a cached
copy of its dependencies.

A fresh checkout's ``pip install -e '.[dev]'`` spent over a minute of the test
command's set-up, on one core and before any test ran, unpacking the same 2 GB
of dependencies as the run before (TensorFlow's 1.3 GB among them). So the
dependencies are installed once into a venv in the per-user cache, named by a
digest of what ``pyproject.toml`` asks for and of the Python running this; a
fresh checkout's ``.venv`` is a hard-linked copy of it (under a second) whose
scripts are pointed at their new place, and pip then installs tfyarn alone,
editable. The cached venv is made again after ``MAX_AGE_S``, so new releases
within the ranges arrive as they would with a plain install.

A checkout that already has its ``.venv`` keeps it: ``pip install -e
'.[dev]'`` brings it up to date, as before. Standard library only: this runs
before any venv exists. Usage: ``python3 tests/venv.py`` from the checkout.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
VENV = REPO / ".venv"
# A week: the cache is a convenience, not a lock file.
MAX_AGE_S = 7 * 24 * 3600
# A cached venv no checkout asked for in this long is deleted (2.3 GB each).
UNUSED_S = 2 * 24 * 3600
COMPLETE = ".tfyarn-complete"
USED = ".tfyarn-used"


def cache_dir() -> Path:
    base = os.environ.get("TFYARN_CACHE_DIR") or str(Path.home() / ".cache" / "tfyarn")
    return Path(base) / "venvs"


def requirements(pyproject: Path) -> list[str]:
    """tfyarn's dependencies and its ``dev`` extra's, as pyproject.toml names them."""
    import tomllib

    project = tomllib.loads(pyproject.read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["dev"]]


def digest(reqs: list[str]) -> str:
    summed = hashlib.sha256(f"{sys.version}\0{sys.executable}\0".encode())
    summed.update("\0".join(reqs).encode())
    return summed.hexdigest()[:16]


def _pip(python: Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "-q", *args], check=True)


def cached_venv(reqs: list[str]) -> Path:
    """The cached venv holding ``reqs``, made (under a lock) when missing or old."""
    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    venv = root / digest(reqs)
    with open(root / f"{venv.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = venv / COMPLETE
        if not done.is_file() or time.time() - done.stat().st_mtime > MAX_AGE_S:
            shutil.rmtree(venv, ignore_errors=True)
            print(f"tests/venv.py: installing the dependencies into {venv}", flush=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            _pip(venv / "bin" / "python", *reqs)
            done.write_text("\n".join(reqs) + "\n")
        (venv / USED).touch()
    _forget_unused(root, keep=venv)
    return venv


def _forget_unused(root: Path, keep: Path) -> None:
    for other in root.iterdir():
        used = other / USED
        if other == keep or not other.is_dir():
            continue
        if not used.exists() or time.time() - used.stat().st_mtime > UNUSED_S:
            shutil.rmtree(other, ignore_errors=True)
            (root / f"{other.name}.lock").unlink(missing_ok=True)


def _repoint(path: Path, old: str, new: str) -> None:
    """Replace ``old`` by ``new`` in a text file, writing a new file: the old
    one is a hard link into the cache, which must not change."""
    data = path.read_bytes()
    if old.encode() not in data or b"\0" in data:
        return
    fresh = path.with_name(path.name + ".tfyarn-tmp")
    fresh.write_bytes(data.replace(old.encode(), new.encode()))
    shutil.copymode(path, fresh)
    os.replace(fresh, path)


def link_copy(source: Path, dest: Path) -> None:
    """``dest`` as a hard-linked copy of the venv ``source``, its scripts,
    activation files and ``pyvenv.cfg`` naming ``dest``."""
    partial = dest.with_name(dest.name + ".tfyarn-partial")
    shutil.rmtree(partial, ignore_errors=True)
    subprocess.run(["cp", "-al", str(source), str(partial)], check=True)
    for marker in (COMPLETE, USED):
        (partial / marker).unlink(missing_ok=True)
    for path in [*(partial / "bin").iterdir(), partial / "pyvenv.cfg"]:
        if path.is_file() and not path.is_symlink():
            _repoint(path, str(source), str(dest))
    os.replace(partial, dest)


def main() -> int:
    if VENV.exists() or sys.version_info < (3, 11):  # (tomllib: 3.11)
        # A developer's venv, or no cache: a plain install, brought up to date.
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        _pip(VENV / "bin" / "python", "-e", f"{REPO}[dev]")
        return 0
    link_copy(cached_venv(requirements(REPO / "pyproject.toml")), VENV)
    _pip(VENV / "bin" / "python", "--no-deps", "-e", str(REPO))
    return 0


if __name__ == "__main__":
    sys.exit(main())
