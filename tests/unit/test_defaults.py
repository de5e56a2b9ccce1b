"""One home for defaults and bounds: a job made in Python is the job the CLI makes."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
from _fake_yarn import FakeYarn

import tfyarn
from tfyarn import _options
from tfyarn.cli import main
from tfyarn.client import config, connection
from tfyarn.errors import SpecError
from tfyarn.spec import ROLES, JobSpec, Role, TaskGroup


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))  # no user file
    path = tmp_path / "train.py"
    path.write_text("")
    return str(path)


def submitted_by_cli(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> JobSpec:
    fake = FakeYarn()
    monkeypatch.setattr(connection, "connect", lambda: fake)
    assert main(["submit", "--detach", *argv]) == 0
    (app,) = fake.submitted
    return JobSpec.from_env(app.master.env["TFYARN_JOB"])


def test_python_and_cli_make_the_same_job_field_by_field(
    script: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_python = JobSpec(script=script)
    from_cli = submitted_by_cli(monkeypatch, [script])
    fake = FakeYarn()
    tfyarn.submit(script, client=fake)
    (app,) = fake.submitted
    from_api = JobSpec.from_env(app.master.env["TFYARN_JOB"])
    for f in dataclasses.fields(JobSpec):
        want = getattr(in_python, f.name)
        assert getattr(from_cli, f.name) == want, f.name
        assert getattr(from_api, f.name) == want, f.name
    # The values the CLI and JobSpec once disagreed on, as shipped:
    assert in_python.max_restarts == 3 and in_python.max_am_attempts == 2
    assert in_python.preimport == ("tensorflow",)
    assert in_python.group(Role.PS).memory_mib == 1024
    assert in_python.python == sys.executable
    assert in_python.count(Role.WORKER) == 1


def test_a_group_left_without_resources_takes_its_roles_defaults(script: str) -> None:
    spec = JobSpec(script=script, tasks={"ps": {"count": 1}, Role.WORKER: TaskGroup()})
    shipped = _options.defaults()
    for role in ROLES:
        memory, vcores, gpus = spec.group(role).resources()
        assert memory == shipped[f"{role.value}_memory"], role
        assert (vcores, gpus) == (shipped[f"{role.value}_vcores"], 0), role
    assert spec.count(Role.PS) == 1 and spec.count(Role.WORKER) == 0
    assert spec.count(Role.CHIEF) == 0  # given tasks, a role left out has none


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("registration_timeout", 0.5, "registration_timeout must be at least 1"),
        ("heartbeat_interval", 0.01, "heartbeat_interval must be at least 0.1"),
        ("am_memory_mib", 64, "am_memory must be at least 128 MiB, got 64"),
        ("max_restarts", -1, "max_restarts must be at least 0, got -1"),
        ("max_am_attempts", 0, "max_am_attempts must be at least 1"),
    ],
)
def test_jobspec_bounds_are_the_schemas(
    script: str, field: str, value: float, message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        JobSpec(script=script, **{field: value})
    with pytest.raises(SpecError, match="must be at least"):
        config.load(overrides={_options_key(field): value})


def test_role_bounds_are_the_schemas(script: str) -> None:
    with pytest.raises(SpecError, match="ps_memory must be at least 128 MiB"):
        JobSpec(script=script, tasks={"ps": {"count": 1, "memory_mib": 64}})
    with pytest.raises(SpecError, match="worker_vcores must be at least 1"):
        JobSpec(script=script, tasks={"worker": {"count": 1, "vcores": 0}})


def test_every_job_option_is_a_jobspec_field_and_client_options_are_not() -> None:
    fields = {f.name for f in dataclasses.fields(JobSpec)}
    role_keys = {k for role in ROLES for k in config.role_keys(role)}
    client = set(_options.client_keys())
    assert client == {
        "detach",
        "poll_interval",
        "principal",
        "keytab",
        "python_env_compression",
        "mlflow",
        "mlflow_experiment",
        "mlflow_parent",
    }
    for key in _options.schema():
        if key in client:
            assert key not in fields, key
        elif key not in role_keys:
            assert _field(key) in fields, f"option {key} has no JobSpec field"
    assert fields - {_field(k) for k in _options.schema()} == {
        "script",
        "args",
        "tasks",
        "servers",  # set by `tfyarn servers`, never by a job's options
        "lease",
    }


def _field(key: str) -> str:
    return {"am_memory": "am_memory_mib", "docker_mount": "docker_mounts"}.get(key, key)


def _options_key(field: str) -> str:
    return {"am_memory_mib": "am_memory", "docker_mounts": "docker_mount"}.get(
        field, field
    )
