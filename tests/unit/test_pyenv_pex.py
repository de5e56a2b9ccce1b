"""``--python_env app.pex``: reading the pex, and its launch command run by a real
shell on real pexes (built here with pex, a dev dependency) in a fake container."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tfyarn._launch import MISSING_PYTHON_EXIT, PEX_FILE, PEX_ROOT_DIR, Interpreter
from tfyarn.client.compile import to_skein
from tfyarn.client.pyenv import parse, pexfile
from tfyarn.errors import SpecError

# The base interpreter of this test's Python: the pexes below name it in
# their shebang, so the test does not depend on a python3.11 on PATH.
BASE_PYTHON = os.path.realpath(sys.executable)


def _fake_pex(
    path: Path,
    info: dict[str, object] | None = None,
    *,
    shebang: str = "#!/usr/bin/env python3.11",
    tfyarn_code: bool = True,
) -> Path:
    """A zip with a shebang before it, as pex writes them (never run)."""
    path.write_bytes(f"{shebang}\n".encode() if shebang else b"")
    with zipfile.ZipFile(path, "a") as z:
        if info is not None:
            z.writestr("PEX-INFO", json.dumps(info))
        if tfyarn_code:
            z.writestr("tfyarn/__init__.py", "")
    return path


def _build_pex(tmp: Path, name: str, *, shebang: str) -> Path:
    """A real pex of two modules (tfyarn's marker and a probe), made by pex."""
    src = tmp / f"{name}-src"
    (src / "tfyarn").mkdir(parents=True)
    (src / "tfyarn" / "__init__.py").write_text("")
    (src / "pexprobe.py").write_text(
        "import subprocess, sys\n"
        "print('prefix', sys.prefix)\n"
        "print('executable', sys.executable)\n"
        "child = [sys.executable, '-c', 'import pexprobe_child; print(\"child ok\")']\n"
        "print(subprocess.run(child, capture_output=True, text=True).stdout.strip())\n"
    )
    (src / "pexprobe_child.py").write_text("")
    out = tmp / f"{name}.pex"
    command = [sys.executable, "-m", "pex", "-D", str(src), "--venv"]
    subprocess.run(
        [*command, "--python-shebang", shebang, "-o", str(out)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return out


def _container(tmp: Path, pex: Path) -> tuple[Path, dict[str, str]]:
    """A container dir with the pex as YARN localizes it, and YARN's env."""
    local = tmp / "nm-local" / "usercache" / "alice"
    cwd = local / "appcache" / "application_1_0001" / "container_1"
    cwd.mkdir(parents=True)
    (cwd / PEX_FILE).symlink_to(pex)
    env = {
        "PATH": f"{tmp / 'bin'}:/usr/bin:/bin",
        "NM_HOST": "node7.example",
        "LOCAL_DIRS": f"{local / 'appcache' / 'application_1_0001'},/other/dir",
    }
    return cwd, env


def _run(
    script: str, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _shipped(python: str) -> Interpreter:
    return Interpreter(origin="app.pex", pex_python=python, pex_constraints=())


# -- reading the pex ------------------------------------------------------------


def test_read_a_venv_pex(tmp_path: Path) -> None:
    info = {
        "venv": True,
        "distributions": {},
        "interpreter_constraints": ["CPython==3.11.*"],
    }
    pex = pexfile.read(str(_fake_pex(tmp_path / "a.pex", info)), "a.pex")
    assert pex.python == "python3.11"
    assert pex.constraints == ("CPython==3.11.*",)
    # --include-tools is enough; tfyarn may be a distribution instead of code.
    tools = {
        "includes_tools": True,
        "distributions": {"tfyarn-0.1-py3-none-any.whl": "x"},
    }
    other = _fake_pex(tmp_path / "b.pex", tools, tfyarn_code=False)
    assert pexfile.read(str(other), "b.pex").key != pex.key


def test_key_follows_pex_info_and_shebang(tmp_path: Path) -> None:
    info = {"venv": True, "pex_hash": "1"}
    one = pexfile.read(str(_fake_pex(tmp_path / "1.pex", info)), "1.pex").key
    same = pexfile.read(str(_fake_pex(tmp_path / "2.pex", info)), "2.pex").key
    other_code = pexfile.read(
        str(_fake_pex(tmp_path / "3.pex", {**info, "pex_hash": "2"})), "3.pex"
    ).key
    other_python = pexfile.read(
        str(_fake_pex(tmp_path / "4.pex", info, shebang="#!/opt/py/bin/python3")),
        "4.pex",
    ).key
    assert one == same  # a name of the cache does not depend on the path
    assert len({one, other_code, other_python}) == 3


@pytest.mark.parametrize(
    ("shebang", "python"),
    [
        ("#!/usr/bin/env python3.11", "python3.11"),
        ("#!/usr/bin/env -S python3 -sE", "python3"),
        ("#!/opt/py/bin/python3.12 -sE", "/opt/py/bin/python3.12"),
        ("", pexfile.DEFAULT_PYTHON),
    ],
)
def test_python_of_the_shebang(shebang: str, python: str) -> None:
    assert pexfile.python_of(shebang) == python


@pytest.mark.parametrize(
    ("info", "tfyarn_code", "words"),
    [
        (None, True, "without PEX-INFO"),
        ({"venv": False, "includes_tools": False}, True, "pex --venv"),
        (
            {"venv": True, "distributions": {"six-1.whl": "x"}},
            False,
            "does not contain tfyarn",
        ),
    ],
)
def test_read_refuses(
    tmp_path: Path, info: dict[str, object] | None, tfyarn_code: bool, words: str
) -> None:
    path = _fake_pex(tmp_path / "app.pex", info, tfyarn_code=tfyarn_code)
    with pytest.raises(SpecError, match=r"--python_env app\.pex") as caught:
        pexfile.read(str(path), "app.pex")
    assert words in str(caught.value)


def test_parse_a_pex(tmp_path: Path) -> None:
    good = _fake_pex(tmp_path / "app.pex", {"venv": True})
    source = parse(str(good))
    assert (source.kind, source.location) == ("pex", str(good.resolve()))
    assert not source.packed
    (tmp_path / "not.pex").write_text("hello")
    with pytest.raises(SpecError, match="not a pex file"):
        parse(str(tmp_path / "not.pex"))
    packed = tmp_path / "packed"
    packed.mkdir()
    (packed / "PEX-INFO").write_text("{}")
    with pytest.raises(SpecError, match="single-file pex"):
        parse(str(packed))


# -- running it in a container ------------------------------------------------------


def test_the_pex_becomes_a_venv_once_per_node(tmp_path: Path) -> None:
    pex = _build_pex(tmp_path, "app", shebang=BASE_PYTHON)
    cwd, env = _container(tmp_path, pex)
    done = _run(_shipped(BASE_PYTHON).command("pexprobe"), cwd, env)
    assert done.returncode == 0, done.stderr
    lines = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    # The venv is under the user's NodeManager cache, not in the container.
    root = tmp_path / "nm-local" / "usercache" / "alice" / PEX_ROOT_DIR
    assert lines["prefix"].startswith(str(root)), done.stdout
    assert lines["executable"] == f"{lines['prefix']}/bin/python"
    # The script's own interpreter (sys.executable) sees the pex's modules.
    assert lines["child"] == "ok", done.stdout + done.stderr
    # A second container (another app) finds the same venv.
    cwd2 = cwd.parents[1] / "application_1_0002" / "container_2"
    cwd2.mkdir(parents=True)
    (cwd2 / PEX_FILE).symlink_to(pex)
    env2 = {**env, "LOCAL_DIRS": str(cwd2.parent)}
    again = _run(_shipped(BASE_PYTHON).command("pexprobe"), cwd2, env2)
    assert again.returncode == 0, again.stderr
    prefix = again.stdout.splitlines()[0].split(" ", 1)[1]
    # (pex names it by a shorter link the second time)
    assert os.path.realpath(prefix) == os.path.realpath(lines["prefix"])


def test_names_the_node_and_the_missing_interpreter(tmp_path: Path) -> None:
    pex = _build_pex(tmp_path, "app", shebang="/usr/bin/env tfyarn-no-such-python3")
    cwd, env = _container(tmp_path, pex)
    python = pexfile.read(str(pex), "app.pex").python
    assert python == "tfyarn-no-such-python3"
    done = _run(_shipped(python).command("tfyarn.runtime"), cwd, env)
    assert done.returncode == MISSING_PYTHON_EXIT
    assert "node7.example" in done.stderr and "tfyarn-no-such-python3" in done.stderr
    assert "(app.pex)" in done.stderr


def test_names_the_node_where_pex_cannot_make_its_venv(tmp_path: Path) -> None:
    """An interpreter that exists but cannot run the pex (here: one that fails
    at once, as a Python too old for pex or its wheels would)."""
    (tmp_path / "bin").mkdir()
    broken = tmp_path / "bin" / "python3.99"
    broken.write_text("#!/bin/sh\necho 'pex: no compatible interpreter' >&2\nexit 1\n")
    broken.chmod(0o755)
    pex = _build_pex(tmp_path, "app", shebang="/usr/bin/env python3.99")
    cwd, env = _container(tmp_path, pex)
    done = _run(_shipped("python3.99").command("am"), cwd, env)
    assert done.returncode == MISSING_PYTHON_EXIT
    assert "pex: no compatible interpreter" in done.stderr
    assert (
        "node7.example" in done.stderr
        and "could not make its virtualenv" in done.stderr
    )


def test_ship_uploads_the_pex_once_as_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tfyarn.client import pyenv
    from tfyarn.client.pyenv import cache
    from tfyarn.spec import JobSpec

    stored: dict[str, str] = {}
    monkeypatch.setattr(cache, "url_of", lambda name, path="": f"hdfs:///c/{name}")
    monkeypatch.setattr(cache, "has", lambda name, path="": name in stored)

    def upload(local: str, name: str, path: str = "") -> str:
        stored[name] = local
        return f"hdfs:///c/{name}"

    monkeypatch.setattr(cache, "upload", upload)
    pex = _fake_pex(tmp_path / "app.pex", {"venv": True})
    said: list[str] = []
    first = pyenv.ship(str(pex), say=said.append)
    again = pyenv.ship(str(pex), say=said.append)
    assert first == again and len(stored) == 1 and len(said) == 1
    (name,) = stored
    assert name.startswith("pex-app-") and name.endswith(".pex")
    assert first.pex_python == "python3.11"
    script = tmp_path / "train.py"
    script.write_text("")
    spec = JobSpec(script=str(script), tasks={"worker": {"count": 1}})
    app = to_skein(spec, am_source=str(script), interpreter=first)
    for service in (app.services["worker"], app.master):
        shipped = service.files[PEX_FILE]
        assert (shipped.source, shipped.type) == (f"hdfs:///c/{name}", "file")
        assert shipped.visibility == "private"
        assert "PEX_VENV=1" in service.script
