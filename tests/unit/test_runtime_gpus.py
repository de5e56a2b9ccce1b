"""A task's GPUs in its runtime: CUDA variables before the script, nvidia-smi's figures.

Against a live master (real TLS, fake YARN) whose node answers like a Hadoop
NodeManager with the DefaultContainerExecutor, and the local cluster's
stand-in nvidia-smi on the tasks' PATH.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from _am_support import LiveMaster, task_env

from tfyarn._proto import master_pb2 as pb
from tfyarn.cluster import _gpus as cluster_gpus
from tfyarn.contract.status import Phase
from tfyarn.runtime import Runtime, TaskContext, gpus
from tfyarn.spec import JobSpec, Role

# Records the CUDA variables it starts with; a worker then waits for the file
# WAIT_FOR (the test's go, once heartbeats carried its GPU's figures).
SCRIPT = r"""
import json, os, time
role, index = os.environ["TFYARN_ROLE"], os.environ["TFYARN_TASK_INDEX"]
seen = {k: os.environ.get(k) for k in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
with open(f"{role}_{index}.json", "w") as f:
    json.dump(seen, f)
if role == "ps":
    time.sleep(60)
while os.environ.get("WAIT_FOR") and not os.path.exists(os.environ["WAIT_FOR"]):
    time.sleep(0.1)
"""


def node_answer(node_dir: Path) -> str:
    """What the NodeManager of a node with this stand-in would answer."""
    state = cluster_gpus.read_state(node_dir)
    listed = [
        {"uuid": d["uuid"], "minorNumber": d["minor"], "productName": "NVIDIA H200"}
        for d in state["devices"]
    ]
    return json.dumps(
        {
            "gpuDeviceInformation": {"gpus": listed},
            "totalGpuDevices": [],
            "assignedGpuDevices": [],
        }
    )


def run_job(
    spec: JobSpec,
    credentials: tuple[bytes, bytes],
    workdir: Path,
    answer: tuple[str, str],
    while_running: Callable[[LiveMaster], None] = lambda master: None,
    **extra: str,
) -> tuple[LiveMaster, dict[str, int]]:
    (workdir / spec.script_name).write_text(SCRIPT)
    master = LiveMaster(spec, credentials).start()

    async def fetch(node: str) -> tuple[str, str]:
        return answer

    def use_fake_node() -> None:
        assert master.state is not None
        master.state.gpus.fetch = fetch

    master.call(use_fake_node)
    master.grant_all()
    codes: dict[str, int] = {}

    def one(role: str, index: int) -> None:
        env = task_env(spec, master, role, index, **extra)
        rt = Runtime(
            TaskContext.from_env(env), credentials=credentials, workdir=workdir, env=env
        )
        codes[f"{role}:{index}"] = rt.run()

    threads = [
        threading.Thread(target=one, args=(role.value, index))
        for role, index in spec.task_keys()
    ]
    for t in threads:
        t.start()
    while_running(master)
    for t in threads:
        t.join(60)
    return master, codes


def gpu_spec(**kwargs: Any) -> JobSpec:
    tasks = {
        "ps": {"count": 1, "memory_mib": 512},
        "worker": {"count": 2, "memory_mib": 512, "gpus": 1},
    }
    options = {
        "script": "train.py",
        "max_restarts": 0,
        "preimport": (),
        "registration_timeout": 30.0,
        "worker_grace": 5,
        "stop_grace": 2,
        "heartbeat_interval": 0.2,
        **kwargs,
    }
    return JobSpec(tasks=tasks, **options)


@pytest.mark.parametrize("preimport", [(), ("json",)])
def test_each_script_starts_with_its_own_devices_and_a_ps_with_none(
    credentials: tuple[bytes, bytes], tmp_path: Path, preimport: tuple[str, ...]
) -> None:
    node_dir = tmp_path / "node"
    cluster_gpus.write_standin(node_dir, "node1", 2)
    cluster_gpus.set_figures(node_dir, 0, utilization=35, memory_used=1024)
    cluster_gpus.set_figures(node_dir, 1, utilization=70, memory_used=2048)
    uuids = [d["uuid"] for d in cluster_gpus.read_state(node_dir)["devices"]]
    path = f"{node_dir / 'gpu'}:/usr/bin:/bin"
    go = tmp_path / "go"
    got: dict[str, Any] = {}

    def figures(master: LiveMaster) -> None:
        """Each worker's GPU as the master shows it, once heartbeats carried
        the stand-in's figures; then the workers may end."""
        state = master.state
        assert state is not None

        def read() -> dict[str, Any]:
            return {
                t.key: (state.gpus.status_of(t).get("gpus") or [{}])[0]
                for t in state.tasks.values()
                if t.role is Role.WORKER
            }

        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got.update(master.call(read))
            if all("utilization" in g for g in got.values()):
                break
            time.sleep(0.2)
        go.write_text("")

    spec = gpu_spec(preimport=preimport)
    master, codes = run_job(
        spec,
        credentials,
        tmp_path,
        (node_answer(node_dir), ""),
        figures,
        PATH=path,
        WAIT_FOR=str(go),
    )
    phase, diagnostics = master.wait_done()
    assert phase is Phase.SUCCEEDED, diagnostics
    assert codes["worker:0"] == 0 and codes["worker:1"] == 0
    seen = {
        key: json.loads((tmp_path / f"{key.replace(':', '_')}.json").read_text())
        for key in ("ps:0", "worker:0", "worker:1")
    }
    assert seen["ps:0"] == {"CUDA_VISIBLE_DEVICES": "", "CUDA_DEVICE_ORDER": None}
    visible = {seen[k]["CUDA_VISIBLE_DEVICES"] for k in ("worker:0", "worker:1")}
    assert visible == set(uuids)  # one device each, by UUID, different
    # Each heartbeat carried the stand-in's figures of the worker's device.
    for key in ("worker:0", "worker:1"):
        index = uuids.index(seen[key]["CUDA_VISIBLE_DEVICES"])
        assert got[key]["uuid"] == uuids[index]
        assert got[key]["utilization"] == [35.0, 70.0][index]
        assert got[key]["memory_used_mib"] == [1024.0, 2048.0][index]
        assert got[key]["memory_total_mib"] == 143771.0


def test_without_the_nodemanagers_list_devices_go_by_index_in_bus_order(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    spec = gpu_spec()
    master, _ = run_job(spec, credentials, tmp_path, ("", "HTTP 503"))
    phase, diagnostics = master.wait_done()
    assert phase is Phase.SUCCEEDED, diagnostics
    seen = [json.loads((tmp_path / f"worker_{i}.json").read_text()) for i in (0, 1)]
    assert sorted(s["CUDA_VISIBLE_DEVICES"] for s in seen) == ["0", "1"]
    assert {s["CUDA_DEVICE_ORDER"] for s in seen} == {"PCI_BUS_ID"}


def test_a_job_that_sets_cuda_visible_devices_keeps_it_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    devices = pb.Devices(
        gpus=[pb.Gpu(index=3)], source="master", cuda_visible_devices="3"
    )
    env = {"CUDA_VISIBLE_DEVICES": "0,1"}
    with caplog.at_level(logging.WARNING, logger="tfyarn.runtime"):
        assert gpus.script_env(env, 1, devices, task="worker:0") == {}
        assert gpus.script_env(env, 0, None, task="ps:0") == {}
    assert "CUDA_VISIBLE_DEVICES='0,1' from the job's environment wins over '3'" in (
        caplog.text
    )
    assert "(none: its role asks for no GPU)" in caplog.text
    # Set by nobody: the task's own, and CUDA counting as nvidia-smi does
    # unless the job chose its order.
    by_index = pb.Devices(
        gpus=[pb.Gpu(index=3)], cuda_visible_devices="3", pci_bus_order=True
    )
    assert gpus.script_env({}, 1, by_index, task="w") == {
        "CUDA_VISIBLE_DEVICES": "3",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    }
    ordered = {"CUDA_DEVICE_ORDER": "FASTEST_FIRST"}
    assert gpus.script_env(ordered, 1, by_index, task="w") == {
        "CUDA_VISIBLE_DEVICES": "3"
    }
    assert gpus.script_env({}, 0, None, task="ps:0") == {"CUDA_VISIBLE_DEVICES": ""}
    with pytest.raises(ValueError, match="no devices yet"):
        gpus.script_env({}, 1, None, task="worker:0")


def test_nvidia_smis_answer_is_read_for_the_tasks_own_devices(tmp_path: Path) -> None:
    cluster_gpus.write_standin(tmp_path, "n", 3)
    cluster_gpus.set_figures(tmp_path, 2, utilization=50, memory_used=10)
    state = cluster_gpus.read_state(tmp_path)
    path = str(tmp_path / "gpu")
    by_uuid = pb.Devices(gpus=[pb.Gpu(index=2, uuid=state["devices"][2]["uuid"])])
    (reading,), error = gpus.read(by_uuid, path=path)
    assert error == ""
    assert (reading.index, reading.utilization, reading.memory_used_mib) == (2, 50, 10)
    by_index = pb.Devices(gpus=[pb.Gpu(index=1), pb.Gpu(index=2)], source="master")
    assert [r.index for r in gpus.read(by_index, path=path)[0]] == [1, 2]
    # A container that sees its own devices only: every row is its.
    docker = pb.Devices(gpus=[pb.Gpu(index=7)], source="docker")
    assert len(gpus.read(docker, path=path)[0]) == 3
    assert gpus.parse("0, GPU-x, [N/A], [N/A], 80\nnot a row\n") == [
        pb.GpuReading(index=0, uuid="GPU-x", memory_total_mib=80)
    ]
    # No nvidia-smi: nothing to say. A failing one: why.
    assert gpus.read(by_uuid, path=str(tmp_path / "nowhere")) == ([], "")
    cluster_gpus.set_failure(tmp_path)
    readings, error = gpus.read(by_uuid, path=path)
    assert readings == []
    assert "exited 9: NVIDIA-SMI has failed" in error
