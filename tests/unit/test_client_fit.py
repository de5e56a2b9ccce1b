"""Whether a job's requests fit the cluster's nodes (tfyarn.client.fit).

Node labels and queues' default labels are covered in test_queues_labels.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tfyarn import _surface
from tfyarn.client.fit import check_fits
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


NODES = {"n1": (4096, 4, 0), "n2": (8192, 2, 1)}


def test_accepts_what_the_largest_node_has(script: str) -> None:
    spec = JobSpec(
        script=script,
        tasks={
            Role.PS: TaskGroup(count=1, memory_mib=8192, vcores=4),
            Role.WORKER: TaskGroup(count=3, memory_mib=1024, gpus=1),
        },
    )
    check_fits(spec, NODES)


@pytest.mark.parametrize(
    ("group", "option", "largest"),
    [
        (
            TaskGroup(count=1, memory_mib=9000),
            "worker_memory=9000 MiB",
            "8192 MiB memory",
        ),
        (TaskGroup(count=1, vcores=5), "worker_vcores=5", "4 vcores"),
        (TaskGroup(count=1, gpus=2), "worker_gpus=2", "1 gpus"),
    ],
)
def test_refuses_more_than_any_node(
    script: str, group: TaskGroup, option: str, largest: str
) -> None:
    spec = JobSpec(script=script, tasks={Role.WORKER: group})
    with pytest.raises(SpecError) as err:
        check_fits(spec, NODES)
    assert option in str(err.value) and largest in str(err.value)
    assert "or less" in str(err.value) and "--" not in str(err.value)
    flag = "--" + option.replace("=", " ")
    with _surface.command_line(), pytest.raises(SpecError, match=flag):
        check_fits(spec, NODES)


def test_ignores_roles_with_no_tasks(script: str) -> None:
    spec = JobSpec(
        script=script,
        tasks={
            Role.WORKER: TaskGroup(count=1),
            Role.EVALUATOR: TaskGroup(count=0, memory_mib=100_000),
        },
    )
    check_fits(spec, NODES)


def test_no_running_node_is_refused(script: str) -> None:
    with pytest.raises(SpecError, match="no running NodeManager"):
        check_fits(job(script, worker=1), {})


def test_more_gpus_per_task_than_any_node_has_names_the_largest(script: str) -> None:
    spec = JobSpec(script=script, tasks={Role.WORKER: TaskGroup(count=2, gpus=3)})
    nodes = {"n1:8041": (8192, 8, 1), "n2:8041": (8192, 8, 2)}
    labels: dict[str, set[str]] = {n: set() for n in nodes}
    with pytest.raises(SpecError) as err:
        check_fits(spec, nodes, labels=labels)  # as tfyarn submit checks
    assert str(err.value) == (
        "worker_gpus=3 is more than any node offers: the largest, n2:8041, has 2 "
        "gpus in total, so YARN could never grant it; use worker_gpus=2 or less, "
        "or add a node with GPUs"
    )
