"""A --python on this machine that lacks tfyarn's modules is refused before submitting.

Its master would otherwise die on its first import, on a node, after the
upload and YARN's scheduling. The interpreter here is a real, empty virtualenv:
a Python without grpc, skein or tfyarn, as a node's system Python is.
"""

from __future__ import annotations

import logging
import sys
import venv
from pathlib import Path

import pytest

from tfyarn import cli
from tfyarn.client import preflight, submission
from tfyarn.errors import SpecError

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    where = tmp_path_factory.mktemp("bare") / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(where)
    return str(where / "bin" / "python")


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "train.py"
    path.write_text("print('hi')\n")
    return str(path)


def test_a_python_without_tfyarn_is_refused_naming_what_it_lacks(
    bare_python: str,
) -> None:
    with pytest.raises(SpecError) as refused:
        preflight.check_interpreter(bare_python)
    said = str(refused.value)
    version = ".".join(str(n) for n in sys.version_info[:3])
    assert said.startswith(f"--python {bare_python} (Python {version} on this machine)")
    # The master's own check ran there (am/dependencies.py): its list, its words.
    assert (
        "it cannot import grpc, grpc_health, google.protobuf, yaml, "
        "prometheus_client, tfyarn, skein (No module named 'grpc'), which the "
        "master needs"
    ) in said
    assert "--python_env auto" in said


def test_check_refuses_it_before_any_cluster(bare_python: str, script: str) -> None:
    with pytest.raises(SpecError, match="cannot run tfyarn's master or tasks"):
        submission.check(script, python=bare_python, cluster=False)


def test_the_command_line_says_it_without_a_traceback(
    bare_python: str, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code = cli.main(["submit", "--dry_run", "--python", bare_python, script])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith(f"Error: --python {bare_python} (Python ")
    assert "Traceback" not in err


def test_a_python_with_tfyarn_passes_with_the_jobs_env() -> None:
    # This interpreter has every dependency; tfyarn comes from the checkout,
    # which the job's --env PYTHONPATH gives the containers too.
    preflight.check_interpreter(sys.executable, env={"PYTHONPATH": str(REPO)})


def test_the_clients_own_pythonpath_is_not_the_containers(
    monkeypatch: pytest.MonkeyPatch, bare_python: str
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    with pytest.raises(SpecError, match="tfyarn"):
        preflight.check_interpreter(bare_python)


def test_paths_not_on_this_machine_are_left_to_the_nodes() -> None:
    preflight.check_interpreter("/opt/python3.99/bin/python")  # nodes may have it
    preflight.check_interpreter("python3")  # found on each node's PATH


def test_a_python_too_old_to_compile_the_check_is_refused(tmp_path: Path) -> None:
    old = tmp_path / "python"
    old.write_text(
        "#!/bin/sh\necho '  File \"dependencies.py\", line 50' >&2\n"
        "echo 'SyntaxError: invalid syntax' >&2\nexit 1\n"
    )
    old.chmod(0o755)
    with pytest.raises(SpecError, match=r"too old .* tfyarn needs Python 3.10"):
        preflight.check_interpreter(str(old))


def test_something_that_is_not_python_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 'not python' >&2\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(SpecError, match=r"did not run as a Python .* \(not python\)"):
        preflight.check_interpreter(str(fake))


def test_a_hung_interpreter_is_not_waited_for(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    slow = tmp_path / "python"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    monkeypatch.setattr(preflight, "PROBE_TIMEOUT", 0.5)
    with caplog.at_level(logging.WARNING, logger="tfyarn.client"):
        preflight.check_interpreter(str(slow))
    assert "did not answer within 0 s" in caplog.text or "within 1 s" in caplog.text
