"""JobSpec: field checks, cross-field rules, round trips."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfyarn import _surface
from tfyarn.errors import SpecError
from tfyarn.spec import JobSpec, Role, TaskGroup


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "train.py"
    path.write_text("print('hi')\n")
    return str(path)


def job(script: str, **tasks: int) -> JobSpec:
    return JobSpec(
        script=script, tasks={Role(k): TaskGroup(count=v) for k, v in tasks.items()}
    )


def test_valid_layouts(script: str) -> None:
    for layout in (
        {"worker": 1},
        {"ps": 1, "worker": 2},
        {"chief": 1, "ps": 2, "worker": 2, "evaluator": 1},
        {"chief": 1},
    ):
        spec = job(script, **layout)
        spec.validate()
        assert {r.value: g.count for r, g in spec.tasks.items() if g.count} == layout


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ({"ps": 2}, "parameter-server job needs workers: got num_ps=2"),
        ({}, "no chief and no worker"),
        ({"chief": 2, "worker": 1}, "num_chief must be between 0 and 1, got 2"),
        ({"worker": 1, "evaluator": 2}, "num_evaluator must be between 0 and 1, got 2"),
    ],
)
def test_bad_layouts(script: str, layout: dict[str, int], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        job(script, **layout).validate()


def test_negative_count_is_refused() -> None:
    with pytest.raises(SpecError, match="count must not be negative, got -1"):
        TaskGroup(count=-1)


def test_legacy_flags_refuse_a_chief(script: str) -> None:
    spec = JobSpec(
        script=script,
        legacy_flags=True,
        tasks={Role.CHIEF: TaskGroup(count=1), Role.WORKER: TaskGroup(count=1)},
    )
    # From Python the fix is a keyword; on the command line, a flag.
    with pytest.raises(SpecError, match=r"legacy_flags describes.*use num_chief=0"):
        spec.validate()
    with _surface.command_line(), pytest.raises(SpecError, match="--num_chief 0"):
        spec.validate()


def test_missing_script_and_files(script: str, tmp_path: Path) -> None:
    with pytest.raises(SpecError, match=r"script not found: .*nope\.py"):
        job(str(tmp_path / "nope.py"), worker=1).validate()
    spec = JobSpec(
        script=script,
        files=(str(tmp_path / "gone.txt"),),
        tasks={Role.WORKER: TaskGroup(count=1)},
    )
    with pytest.raises(SpecError, match=r"file not found: .*gone\.txt"):
        spec.validate()
    # hdfs:// files are not checked locally; a directory is not a script
    JobSpec(
        script=script,
        files=("hdfs:///data/x",),
        tasks={Role.WORKER: TaskGroup(count=1)},
    ).validate()
    with pytest.raises(SpecError, match="not a regular file"):
        job(str(tmp_path), worker=1).validate()


def test_shipped_names_must_be_unique(script: str, tmp_path: Path) -> None:
    other = tmp_path / "sub"
    other.mkdir()
    (other / "train.py").write_text("")
    spec = JobSpec(
        script=script,
        files=(str(other / "train.py"),),
        tasks={Role.WORKER: TaskGroup(count=1)},
    )
    with pytest.raises(SpecError, match="share the name"):
        spec.validate()


def test_round_trips(script: str) -> None:
    spec = JobSpec(
        script=script,
        args=("--lr", "0.1"),
        env={"A": "1"},
        files=("hdfs:///x",),
        tasks={
            Role.PS: TaskGroup(count=1, memory_mib=512),
            Role.WORKER: TaskGroup(count=2),
        },
        max_restarts=2,
    )
    assert JobSpec.from_dict(spec.to_dict()) == spec
    assert JobSpec.from_yaml(spec.to_yaml()) == spec
    assert JobSpec.from_env(spec.to_env()) == spec


def test_unknown_keys_are_listed() -> None:
    with pytest.raises(SpecError, match=r"unknown job spec keys \['bogus'\]"):
        JobSpec.from_dict({"script": "x.py", "bogus": 1})


def test_lead_task(script: str) -> None:
    assert job(script, worker=2).lead_task() == (Role.WORKER, 0)
    assert job(script, chief=1, worker=2).lead_task() == (Role.CHIEF, 0)
