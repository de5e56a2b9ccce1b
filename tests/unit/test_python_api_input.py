"""The Python API refuses wrong arguments in its own words.

Errors name keywords (``args=``, ``num_worker=``), never flags or "the command
line", and a wrong type is a :class:`TfyarnError`, never an AttributeError.
"""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

import pytest
from _fake_yarn import FakeYarn

import tfyarn
from tfyarn.client import connection
from tfyarn.errors import SpecError, TfyarnError
from tfyarn.spec import JobSpec

# Callers without a type checker: these tests pass what the types forbid.
api: Any = tfyarn


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(time, "sleep", lambda s: None)
    path = tmp_path / "train.py"
    path.write_text("print('hi')\n")
    return str(path)


@pytest.fixture
def no_yarn(monkeypatch: pytest.MonkeyPatch) -> None:
    def connect() -> None:
        raise AssertionError("a refused call must not start a YARN driver")

    monkeypatch.setattr(connection, "connect", connect)


def submitted_args(fake: FakeYarn) -> list[str]:
    (app,) = fake.submitted
    job = json.loads(base64.b64decode(app.master.env["TFYARN_JOB"]))
    return list(job["args"])


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        ("--steps 3", ["--steps", "3"]),
        ("--name 'a b' --lr=0.1", ["--name", "a b", "--lr=0.1"]),
        (["--steps", 3], ["--steps", "3"]),
        (("--steps", "3"), ["--steps", "3"]),
        ("", []),
    ],
)
def test_args_string_is_split_like_a_shell(
    script: str, args: Any, expected: list[str]
) -> None:
    fake = FakeYarn()
    tfyarn.submit(script, args=args, client=fake)
    assert submitted_args(fake) == expected
    assert list(JobSpec(script=script, args=args).args) == expected


@pytest.mark.parametrize("args", [3, {"steps": 3}, {"--steps"}, None, b"--steps 3"])
def test_args_of_another_type_are_refused(
    script: str, no_yarn: None, args: object
) -> None:
    with pytest.raises(SpecError, match="args= must be a list of strings"):
        api.submit(script, args=args)
    with pytest.raises(SpecError, match="args= must be a list of strings"):
        JobSpec(script=script, args=args)  # type: ignore[arg-type]


def test_an_unbalanced_quote_is_refused(script: str, no_yarn: None) -> None:
    with pytest.raises(SpecError, match="does not split like a shell"):
        api.check(script, args="--name 'a b", cluster=False)


@pytest.mark.parametrize(
    "call",
    [
        lambda: api.submit(None),
        lambda: api.check(None, cluster=False),
        lambda: api.submit(42),
        lambda: api.status(None),
        lambda: api.kill(None),
        lambda: api.wait(None),
        lambda: api.logs(None),
        lambda: api.status(20240101),
        lambda: JobSpec(script=None),  # type: ignore[arg-type]
    ],
)
def test_none_and_wrong_types_are_tfyarn_errors(no_yarn: None, call: Any) -> None:
    with pytest.raises(TfyarnError) as err:
        call()
    msg = str(err.value)
    assert ("script" in msg or "app_id=" in msg) and "got" in msg, msg


def test_a_path_object_is_a_script(script: str) -> None:
    spec = api.check(Path(script), cluster=False)
    assert spec.script == script


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"num_worker": -1}, r"num_worker \(from the keyword arguments\)"),
        ({"num_ps": 1, "num_worker": 0}, r"set num_worker=N \(N >= 1\)"),
        ({"num_worker": 0}, r"set num_worker=N"),
        ({"legacy_flags": True, "num_chief": 1}, r"use num_chief=0"),
        ({"preimport": ["not a module"]}, r"or preimport=\[\] to import nothing"),
        ({"num_workers": 2}, "unknown config key.*did you mean 'num_worker'"),
    ],
)
def test_python_errors_speak_of_keywords_not_flags(
    script: str, no_yarn: None, options: dict[str, Any], expected: str
) -> None:
    with pytest.raises(SpecError, match=expected) as err:
        api.check(script, cluster=False, **options)
    msg = str(err.value)
    assert "--" not in msg and "command line" not in msg, msg


def test_python_fit_errors_speak_of_keywords(script: str) -> None:
    fake = FakeYarn(nodes=[(4096, 4, 0)])
    with pytest.raises(SpecError, match="worker_memory=8192 MiB is more") as err:
        api.submit(script, worker_memory="8g", client=fake)
    assert "--" not in str(err.value)
    assert fake.submitted == []
