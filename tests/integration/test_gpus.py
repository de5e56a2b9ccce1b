"""GPUs end to end on the local cluster: YARN's GPU plugin, the stand-in
nvidia-smi, the master's choice of devices and the runtimes' reports.

The plain tier's cluster gives its node two devices behind the stand-in
nvidia-smi (tests/integration/conftest.py, ``gpus=2``), which the
NodeManager's GPU plugin discovers. With the DefaultContainerExecutor YARN
assigns no device, so the master does (am/gpus.py): two one-GPU workers get
different devices, a replaced worker gets the free one, a two-GPU task both,
a ps none (``CUDA_VISIBLE_DEVICES=""``). The scripts import no TensorFlow;
what they start with is read from ``/proc/<pid>/environ``.
"""

from __future__ import annotations

import signal
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from _faults import kill_task, retry_until, task_process
from helpers import run_cli, running_job
from prometheus_client.parser import text_string_to_metric_families

from tfyarn import client
from tfyarn.cluster import LocalCluster, _gpus
from tfyarn.contract.status import JobStatus

pytestmark = [pytest.mark.yarn, pytest.mark.gpu, pytest.mark.slow]

# Every task waits: the chief (the lead) for the test's go in the key-value
# store, the others until the master stops them.
SCRIPT = """\
import os, time
print("CUDA_VISIBLE_DEVICES=%r" % os.environ.get("CUDA_VISIBLE_DEVICES"), flush=True)
if os.environ["TFYARN_ROLE"] == "chief":
    import skein
    skein.ApplicationClient.from_current().kv.wait("test.go")
else:
    time.sleep(600)
"""
QUICK: dict[str, Any] = {
    "preimport": [],
    "chief_memory": "256 MiB",
    "ps_memory": "256 MiB",
    "worker_memory": "256 MiB",
    "heartbeat_interval": 1,
    "registration_timeout": 120,
    "stop_grace": 2,
    "worker_grace": 2,
    "max_restarts": 2,
}


@pytest.fixture
def node(local_cluster: LocalCluster) -> Iterator[Path]:
    """The loopback node's directory (its stand-in nvidia-smi's), its devices
    idle and working again after the test."""
    node_dir = local_cluster.base_dir
    if not (_gpus.gpu_dir(node_dir) / _gpus.EXECUTABLE).is_file():
        pytest.skip("the cluster's GPUs are not behind the stand-in nvidia-smi")
    yield node_dir
    _gpus.set_failure(node_dir, None)
    for index in range(local_cluster.settings().gpus):
        _gpus.set_figures(node_dir, index, utilization=0, memory_used=0)


def wait_for(
    job: Any, what: str, ok: Callable[[JobStatus], bool], timeout: float = 120
) -> JobStatus:
    deadline = time.monotonic() + timeout
    while True:
        status = client.status(job.app_id, client=job.yarn)
        assert not status.done, f"the job ended: {status.diagnostics}"
        if status.master is not None and ok(status.master):
            return status.master
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not within {timeout:.0f} s: {status.master}")
        time.sleep(1)


def visible(app_id: str, task: str, timeout: float = 60) -> str | None:
    """CUDA_VISIBLE_DEVICES the task's script started with.

    Waited for: a task is RUNNING once it received the cluster, and its
    runtime starts the script only then (seconds later under load).
    """
    script = retry_until(
        f"the script of {task}", lambda: task_process(app_id, task), timeout
    )
    return script.env.get("CUDA_VISIBLE_DEVICES")


def indices(status: JobStatus, task: str) -> list[int]:
    found = status.task(task)
    return [g["index"] for g in found.gpus] if found else []


def metrics(job: Any) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    tracking = str(job.yarn.application_report(job.app_id).tracking_url)
    url = tracking.rstrip("/") + "/pages/tfyarn/metrics"
    with urllib.request.urlopen(url, timeout=30) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def test_one_gpu_workers_get_their_own_devices_and_a_replaced_one_a_free_one(
    skein_client: Any, local_cluster: LocalCluster, node: Path, tmp_path: Path
) -> None:
    uuids = [d["uuid"] for d in _gpus.read_state(node)["devices"]]
    _gpus.set_figures(node, 0, utilization=35, memory_used=1024)
    _gpus.set_figures(node, 1, utilization=70, memory_used=2048)
    script = tmp_path / "gpu_probe.py"
    script.write_text(SCRIPT)
    options = {"num_chief": 1, "num_ps": 1, "num_worker": 2, "worker_gpus": 1}
    with running_job(skein_client, script, **options, **QUICK) as job:
        status = wait_for(
            job,
            "both workers running with a GPU each",
            lambda s: (
                all(
                    t.state.value == "RUNNING" and (t.role != "worker" or t.gpus)
                    for t in s.tasks
                )
                and len(s.tasks) == 4
            ),
        )
        mine = {w: indices(status, w) for w in ("worker:0", "worker:1")}
        assert sorted(mine.values()) == [[0], [1]], mine
        for worker, (index,) in mine.items():
            task = status.task(worker)
            assert task is not None and task.gpu_source == "master"
            assert task.gpus[0]["uuid"] == uuids[index]
            # The script started with its device, named by UUID.
            assert visible(job.app_id, worker) == uuids[index]
        assert visible(job.app_id, "ps:0") == ""
        assert visible(job.app_id, "chief:0") == ""

        # tfyarn status shows the mapping.
        shown = run_cli("status", job.app_id, timeout=120).stdout
        for worker, (index,) in mine.items():
            assert f"  {worker}: {index} {uuids[index]}" in shown, shown

        # /metrics carries what the stand-in reports of each worker's device.
        deadline = time.monotonic() + 60
        while True:
            seen = metrics(job)
            busy = {
                dict(labels)["task"]: value
                for (name, labels), value in seen.items()
                if name == "tfyarn_task_gpu_utilization_percent"
            }
            if len(busy) == 2:
                break
            assert time.monotonic() < deadline, busy
            time.sleep(2)
        for worker, (index,) in mine.items():
            assert busy[worker] == [35.0, 70.0][index]
            labels = frozenset(
                {
                    "task": worker,
                    "role": "worker",
                    "gpu": str(index),
                    "uuid": uuids[index],
                }.items()
            )
            used = seen[("tfyarn_task_gpu_memory_used_bytes", labels)]
            assert used == [1024, 2048][index] * 2**20

        # The node's nvidia-smi fails: named in the job's status and the cluster's.
        _gpus.set_failure(node)
        failing = wait_for(
            job,
            "nvidia-smi's failure in the status",
            lambda s: bool((s.task("worker:0") or s.tasks[0]).gpu_error),
            timeout=30,
        )
        assert "NVIDIA driver" in (failing.task("worker:0")).gpu_error  # type: ignore[union-attr]
        cluster = local_cluster.status()
        assert "nvidia-smi FAILS" in cluster.hosts[0].gpu_discovery
        assert "GPU discovery: nvidia-smi FAILS" in cluster.format()
        _gpus.set_failure(node, None)
        wait_for(
            job,
            "nvidia-smi working again",
            lambda s: not (s.task("worker:0") or s.tasks[0]).gpu_error,
            timeout=30,
        )

        # worker:0 loses its container: its device is freed and the new
        # container gets a free one, not worker:1's.
        (held,) = mine["worker:0"]
        kill_task(job.app_id, "worker:0", signal.SIGKILL, script=False)
        replaced = wait_for(
            job,
            "worker:0 back in a new container with a GPU",
            lambda s: (
                (t := s.task("worker:0")) is not None
                and t.attempt > 0
                and t.state.value == "RUNNING"
                and bool(t.gpus)
            ),
        )
        worker0 = replaced.task("worker:0")
        assert worker0 is not None
        assert indices(replaced, "worker:0") == [held] != indices(replaced, "worker:1")
        assert any(f"GPU {held} free again" in line for line in worker0.history)
        assert visible(job.app_id, "worker:0") == uuids[held]

        job.yarn.connect(job.app_id).kv["test.go"] = b"1"
        final = job.wait(timeout=120)
    assert final.final_status == "SUCCEEDED", final.diagnostics


def test_a_two_gpu_task_gets_both(
    skein_client: Any, node: Path, tmp_path: Path
) -> None:
    uuids = [d["uuid"] for d in _gpus.read_state(node)["devices"]]
    script = tmp_path / "gpu_probe.py"
    script.write_text(SCRIPT)
    with running_job(
        skein_client, script, num_chief=1, chief_gpus=2, num_worker=0, **QUICK
    ) as job:
        status = wait_for(
            job,
            "the chief running with its GPUs",
            lambda s: bool(
                s.tasks and s.tasks[0].gpus and s.tasks[0].state.value == "RUNNING"
            ),
        )
        assert indices(status, "chief:0") == [0, 1]
        assert visible(job.app_id, "chief:0") == ",".join(uuids)
        job.yarn.connect(job.app_id).kv["test.go"] = b"1"
        final = job.wait(timeout=120)
    assert final.final_status == "SUCCEEDED", final.diagnostics
