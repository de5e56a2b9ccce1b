"""The container's launch command, run by a real shell in a fake container dir."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tfyarn._launch import MISSING_PYTHON_EXIT, Archive, Interpreter
from tfyarn.client.compile import to_skein
from tfyarn.spec import JobSpec


def _run(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "NM_HOST": "node7.example"}
    return subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _shipped(layers: tuple[str, ...] = ()) -> Interpreter:
    return Interpreter(
        files={"env": Archive(url="hdfs:///e.tar.gz")},
        pythonpath=layers,
        origin="auto",
    )


def test_runs_the_shipped_python_with_layers(tmp_path: Path) -> None:
    (tmp_path / "env" / "bin").mkdir(parents=True)
    (tmp_path / "env" / "bin" / "python").symlink_to(sys.executable)
    (tmp_path / "env-1").mkdir()
    (tmp_path / "env-1" / "probe.py").write_text(
        "import sys; print(sys.executable); print(__file__)\n"
    )
    done = _run(_shipped(("env-1",)).command("probe"), tmp_path)
    assert done.returncode == 0, done.stderr
    executable, module = done.stdout.split()
    assert executable == str(tmp_path / "env" / "bin" / "python")
    assert module == str(tmp_path / "env-1" / "probe.py")


def test_names_the_node_and_the_missing_base_interpreter(tmp_path: Path) -> None:
    (tmp_path / "env" / "bin").mkdir(parents=True)
    (tmp_path / "env" / "bin" / "python").symlink_to("python3")
    (tmp_path / "env" / "bin" / "python3").symlink_to("/opt/missing/bin/python3.11")
    done = _run(_shipped().command("tfyarn.runtime"), tmp_path)
    assert done.returncode == MISSING_PYTHON_EXIT
    assert "node7.example" in done.stderr
    assert "/opt/missing/bin/python3.11" in done.stderr
    assert "(auto)" in done.stderr


def test_names_an_archive_without_python(tmp_path: Path) -> None:
    (tmp_path / "env").mkdir()
    done = _run(_shipped().command("am"), tmp_path)
    assert done.returncode == MISSING_PYTHON_EXIT
    assert "node7.example" in done.stderr and "has no bin/python" in done.stderr


def test_to_skein_ships_the_environment_to_master_and_tasks(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    spec = JobSpec(script=str(script), tasks={"worker": {"count": 1}})
    app = to_skein(spec, am_source=str(script), interpreter=_shipped(("env-1",)))
    worker = app.services["worker"]
    for files, command in [
        (worker.files, worker.script),
        (app.master.files, app.master.script),
    ]:
        assert files["env"].source == "hdfs:///e.tar.gz"
        assert files["env"].type == "archive"
        assert files["env"].visibility == "private"
        assert 'exec "$py" -u -m' in command and "env-1" in command
    # Without one: the job's interpreter (no --python: the client's own).
    plain = to_skein(spec, am_source=str(script))
    assert plain.services["worker"].script.startswith(f"exec {sys.executable} ")
    assert "env" not in plain.services["worker"].files


def test_a_shipped_file_may_not_take_the_environments_name(tmp_path: Path) -> None:
    import pytest

    from tfyarn.errors import SpecError

    script = tmp_path / "train.py"
    script.write_text("")
    clash = tmp_path / "env-1"
    clash.write_text("")
    with pytest.raises(SpecError, match="rename them"):
        JobSpec(script=str(script), files=(str(clash),), python_env="auto").validate()
    JobSpec(script=str(script), files=(str(clash),)).validate()  # no env: fine


def _as_unprivileged(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run the launch command as a user who cannot enter a 0700 directory of
    someone else's: ourselves, or nobody when the tests run as root."""
    if os.geteuid() != 0:
        return _run(script, cwd)
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root and no setpriv to drop privileges")
    return _run(
        f"exec {setpriv} --reuid 65534 --regid 65534 --clear-groups bash -c "
        + shlex.quote(script),
        cwd,
    )


def test_names_a_base_interpreter_the_containers_user_cannot_reach() -> None:
    # A venv made from a Python under a home directory others cannot enter:
    # the interpreter is there, the container's user may not reach it. It
    # must not read "does not have" (nor a bare exit code).
    top = Path(tempfile.mkdtemp(prefix="tfyarn-launch-"))  # not pytest's 0700 dirs
    locked = top / "home" / "alice"
    try:
        top.chmod(0o755)
        (locked / "bin").mkdir(parents=True)
        (locked / "bin" / "python3.11").symlink_to(sys.executable)
        container = top / "container"
        (container / "env" / "bin").mkdir(parents=True)
        (container / "env" / "bin" / "python").symlink_to(locked / "bin" / "python3.11")
        locked.chmod(0o700 if os.geteuid() == 0 else 0o000)
        done = _as_unprivileged(_shipped().command("am"), container)
    finally:
        locked.chmod(0o700)
        shutil.rmtree(top, ignore_errors=True)
    assert done.returncode == MISSING_PYTHON_EXIT, done.stderr
    assert "node7.example" in done.stderr and "(auto)" in done.stderr
    assert f"under {locked}," in done.stderr
    assert "cannot enter (Permission denied)" in done.stderr
    assert "does not have" not in done.stderr
