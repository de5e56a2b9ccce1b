"""tests/venv.py: a fresh checkout's .venv is a hard-linked copy of a cached
venv, repointed without touching the cache, and named by what pyproject asks."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import _by_path
import pytest

SCRIPT = Path(__file__).parents[1] / "venv.py"


def _venv_py() -> ModuleType:
    return _by_path.load("tests_venv", SCRIPT)


def _fake_venv(root: Path) -> Path:
    venv = root / "cached"
    (venv / "bin").mkdir(parents=True)
    (venv / "lib" / "site-packages").mkdir(parents=True)
    (venv / "lib" / "site-packages" / "mod.py").write_text("x = 1\n")
    script = venv / "bin" / "tool"
    script.write_text(f"#!{venv}/bin/python\nimport mod\n")
    script.chmod(0o755)
    (venv / "bin" / "activate").write_text(f'VIRTUAL_ENV="{venv}"\n')
    (venv / "bin" / "native").write_bytes(b"\x7fELF\0" + str(venv).encode())
    (venv / "bin" / "python").symlink_to(sys.executable)
    (venv / "pyvenv.cfg").write_text(
        f"home = /usr/bin\ncommand = python -m venv {venv}\n"
    )
    return venv


def test_the_copy_names_itself_and_leaves_the_cache_as_it_was(tmp_path: Path) -> None:
    venv_py = _venv_py()
    cached = _fake_venv(tmp_path)
    dest = tmp_path / "checkout" / ".venv"
    dest.parent.mkdir()

    venv_py.link_copy(cached, dest)

    tool = dest / "bin" / "tool"
    assert tool.read_text().startswith(f"#!{dest}/bin/python\n")
    assert os.access(tool, os.X_OK)
    assert (dest / "bin" / "activate").read_text() == f'VIRTUAL_ENV="{dest}"\n'
    assert f"venv {dest}" in (dest / "pyvenv.cfg").read_text()
    # The cache still names itself; the library files are the same inodes.
    assert (cached / "bin" / "tool").read_text().startswith(f"#!{cached}/bin/python\n")
    assert f"venv {cached}" in (cached / "pyvenv.cfg").read_text()
    module = "lib/site-packages/mod.py"
    assert (dest / module).stat().st_ino == (cached / module).stat().st_ino
    # Binaries are not edited; symlinks stay symlinks.
    assert (dest / "bin" / "native").read_bytes() == (
        cached / "bin" / "native"
    ).read_bytes()
    assert (dest / "bin" / "python").is_symlink()
    assert not list(dest.parent.glob("*partial*"))


def test_the_cache_is_named_by_the_requirements_pyproject_gives() -> None:
    pytest.importorskip("tomllib")
    venv_py = _venv_py()
    reqs = venv_py.requirements(SCRIPT.parents[1] / "pyproject.toml")
    assert any(r.startswith("tensorflow-cpu") for r in reqs)
    assert any(r.startswith("pytest") for r in reqs)  # the dev extra
    assert venv_py.digest(reqs) != venv_py.digest([*reqs, "extra>=1"])


def test_an_old_or_unfinished_cached_venv_is_made_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    venv_py = _venv_py()
    monkeypatch.setenv("TFYARN_CACHE_DIR", str(tmp_path))
    made: list[list[str]] = []

    def fake_run(cmd: list[str], check: bool) -> subprocess.CompletedProcess[bytes]:
        made.append(cmd)
        if cmd[1:3] == ["-m", "venv"]:
            (Path(cmd[3]) / "bin").mkdir(parents=True)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(venv_py.subprocess, "run", fake_run)
    first = venv_py.cached_venv(["a>=1"])
    assert (first / venv_py.COMPLETE).is_file() and len(made) == 2
    assert venv_py.cached_venv(["a>=1"]) == first and len(made) == 2  # kept

    old = (first / venv_py.COMPLETE).stat().st_mtime - venv_py.MAX_AGE_S - 60
    os.utime(first / venv_py.COMPLETE, (old, old))
    venv_py.cached_venv(["a>=1"])
    assert len(made) == 4  # a week old: made again

    (first / venv_py.COMPLETE).unlink()  # an install that did not finish
    venv_py.cached_venv(["a>=1"])
    assert len(made) == 6

    other = venv_py.cached_venv(["b>=1"])  # another pyproject: the first unused
    os.utime(other.parent / first.name / venv_py.USED, (0, 0))
    venv_py.cached_venv(["b>=1"])
    assert not first.exists() and other.exists()
