"""The layered config: shipped defaults, user file, command line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

from tfyarn import _paths
from tfyarn.client import config
from tfyarn.errors import SpecError
from tfyarn.spec import Role


def test_every_default_key_is_in_the_schema_and_vice_versa() -> None:
    defaults = yaml.safe_load((_paths.conf_dir() / config.DEFAULTS_FILE).read_text())
    schema = config.schema()
    assert sorted(defaults) == sorted(schema)
    for key, rule in schema.items():
        assert rule["type"] in config.TYPES, key
        assert rule.get("help"), f"{key} has no help text"


def test_shipped_defaults_pass_their_own_schema() -> None:
    cfg = config.defaults()
    assert cfg["num_worker"] == 1
    assert cfg["worker_memory"] == 2048


@pytest.fixture
def no_user_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path


def test_user_file_then_command_line_win(no_user_file: Path) -> None:
    user = config.user_config_path()
    user.parent.mkdir(parents=True)
    user.write_text("num_ps: 2\nworker_memory: 3 GiB\nenv: {A: '1', B: '2'}\n")
    cfg = config.load(overrides={"num_ps": 1, "env": ["B=3"], "queue": None})
    assert cfg["num_ps"] == 1  # command line beats the user file
    assert cfg["worker_memory"] == 3072  # user file beats the defaults
    assert cfg["env"] == {"A": "1", "B": "3"}  # env accumulates, later wins
    assert cfg["queue"] == "default"  # None means "not given"


def test_explicit_config_file_replaces_the_user_file(no_user_file: Path) -> None:
    user = config.user_config_path()
    user.parent.mkdir(parents=True)
    user.write_text("num_ps: 2\n")
    other = no_user_file / "job.yaml"
    other.write_text("num_worker: 4\nfiles: [a.txt]\n")
    cfg = config.load(other, {"files": ["b.txt"]})
    assert cfg["num_ps"] == 0 and cfg["num_worker"] == 4
    assert cfg["files"] == ["a.txt", "b.txt"]


def test_missing_explicit_config_file_is_refused(no_user_file: Path) -> None:
    with pytest.raises(SpecError, match="config file not found"):
        config.load(no_user_file / "nope.yaml")


def test_unknown_key_names_the_source_and_suggests(no_user_file: Path) -> None:
    bad = no_user_file / "bad.yaml"
    bad.write_text("num_workers: 2\n")
    with pytest.raises(SpecError) as err:
        config.load(bad)
    msg = str(err.value)
    assert (
        "num_workers" in msg and str(bad) in msg and "did you mean 'num_worker'" in msg
    )


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"num_ps": -1}, "num_ps .*must be at least 0, got -1"),
        ({"num_chief": 2}, "num_chief .*between 0 and 1"),
        ({"num_evaluator": 3}, "num_evaluator .*between 0 and 1"),
        ({"worker_memory": "lots"}, "worker_memory .*expected memory like '2g'"),
        ({"worker_memory": "64 MiB"}, "worker_memory .*at least 128 MiB"),
        ({"ps_vcores": 0}, "ps_vcores .*at least 1"),
        ({"num_worker": "two"}, "num_worker .*expected a whole number"),
        ({"detach": "maybe"}, "detach .*expected true or false"),
        ({"env": ["NOEQUALS"]}, "env .*expected K=V"),
        ({"env": ["1X=2"]}, "not a valid environment variable name"),
        ({"registration_timeout": 0}, "registration_timeout .*at least 1"),
    ],
)
def test_invalid_values_say_what_would_be_right(
    no_user_file: Path, overrides: dict[str, object], expected: str
) -> None:
    with pytest.raises(SpecError, match=expected):
        config.load(overrides=overrides)


def test_not_a_mapping_is_refused(no_user_file: Path) -> None:
    bad = no_user_file / "list.yaml"
    bad.write_text("- a\n- b\n")
    with pytest.raises(SpecError, match="must hold a mapping"):
        config.load(bad)


def test_invalid_yaml_is_refused(no_user_file: Path) -> None:
    bad = no_user_file / "broken.yaml"
    bad.write_text("num_ps: [1\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        config.load(bad)


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        (512, 512),
        ("512", 512),
        ("2 GiB", 2048),
        ("2GiB", 2048),
        ("2g", 2048),
        ("512 MiB", 512),
        ("1.5 GiB", 1536),
        ("1 GB", 1024),  # binary, as spark-submit and YARN read it
        ("1024 KiB", 1),
    ],
)
def test_parse_memory(text: object, mib: int) -> None:
    assert config.parse_memory(text) == mib


@pytest.mark.parametrize("text", ["", "GiB", "2 parsecs", "-1", True, [1]])
def test_parse_memory_refuses_nonsense(text: object) -> None:
    with pytest.raises(SpecError):
        config.parse_memory(text)


def test_to_spec_maps_every_role(no_user_file: Path) -> None:
    cfg = config.load(
        overrides={
            "num_chief": 1,
            "num_ps": 2,
            "num_worker": 3,
            "num_evaluator": 1,
            "ps_memory": "1 GiB",
            "worker_gpus": 1,
            "chief_vcores": 2,
            "max_restarts": 2,
        }
    )
    spec = config.to_spec("train.py", ["--x", "1"], cfg)
    assert spec.count(Role.CHIEF) == 1 and spec.count(Role.PS) == 2
    assert spec.count(Role.WORKER) == 3 and spec.count(Role.EVALUATOR) == 1
    assert spec.group(Role.PS).memory_mib == 1024
    assert spec.group(Role.WORKER).gpus == 1
    assert spec.group(Role.CHIEF).vcores == 2
    assert spec.max_restarts == 2
    assert spec.args == ("--x", "1")
    assert spec.python == sys.executable  # empty python means this interpreter


def test_role_keys_exist_in_schema() -> None:
    for role in Role:
        for key in config.role_keys(role):
            assert key in config.schema()
