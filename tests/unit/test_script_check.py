"""A script that cannot run is refused before anything is submitted."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _fake_yarn import FakeYarn

from tfyarn._script_check import check_script
from tfyarn.cli import main
from tfyarn.client import connection
from tfyarn.errors import SpecError
from tfyarn.spec import JobSpec


def write(tmp_path: Path, data: bytes, name: str = "train.py") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


def test_a_syntax_error_names_file_line_and_message(tmp_path: Path) -> None:
    script = write(tmp_path, b"import os\n\ndef f(:\n    pass\n")
    with pytest.raises(SpecError) as err:
        check_script(script)
    msg = str(err.value)
    assert f"{script}:3: " in msg and "invalid syntax" in msg, msg
    assert "nothing was submitted" in msg


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"\x7fELF\x02\x01\x01\x00\x00\x00", "binary data"),
        (
            b"x = 1\nname = '\xe9t\xe9'\n",
            r"train.py:2 is not valid utf-8 \(byte 0xe9\)",
        ),
        (b"# -*- coding: nope -*-\nx = 1\n", "unknown encoding"),
    ],
)
def test_a_file_that_is_not_python_source_is_refused(
    tmp_path: Path, data: bytes, expected: str
) -> None:
    with pytest.raises(SpecError, match=expected):
        check_script(write(tmp_path, data))


def test_a_declared_encoding_is_honoured(tmp_path: Path) -> None:
    check_script(write(tmp_path, b"# -*- coding: latin-1 -*-\nname = '\xe9t\xe9'\n"))


def test_another_interpreter_may_accept_syntax_this_one_does_not(
    tmp_path: Path,
) -> None:
    # Syntax is version-dependent: only this interpreter's verdict is trusted.
    script = write(tmp_path, b"def f(:\n")
    check_script(script, python="/opt/python3.99/bin/python")
    with pytest.raises(SpecError, match="does not compile"):
        check_script(script, python=sys.executable)


def test_validate_compiles_the_script(tmp_path: Path) -> None:
    spec = JobSpec(script=write(tmp_path, b"print(\n"))
    with pytest.raises(SpecError, match="does not compile"):
        spec.validate()
    spec.validate(check_local_files=False)  # the master and tasks skip it


@pytest.mark.parametrize("dry_run", [True, False])
def test_submit_refuses_it_before_connecting(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    dry_run: bool,
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    fake = FakeYarn()
    monkeypatch.setattr(connection, "connect", lambda: fake)
    script = write(tmp_path, b"for x in range(3)\n    print(x)\n")
    argv = ["submit", *(["--dry_run"] if dry_run else []), script]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"Error: script {script} does not compile ({script}:1: ")
    assert "Traceback" not in err
    assert fake.submitted == []
