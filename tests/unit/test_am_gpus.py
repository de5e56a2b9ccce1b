"""Which GPUs the master gives each task (am/gpus.py), YARN faked.

The NodeManager's answer is the one a Hadoop 3.4.3 NodeManager gave with the
DefaultContainerExecutor (tests/data/nodemanager/): devices listed, none
assigned.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from _am_support import HOSTILE, snapshot
from _state_support import Clock, run

from am import gpus, status_page
from am.gpus import Choice, Gpu, NodeGpus, choose, parse_node_gpus
from am.launcher import FakeLauncher
from am.metrics import JobMetrics
from am.model import Watcher
from am.state import JobState
from tfyarn._proto import master_pb2 as pb
from tfyarn.client import narrator
from tfyarn.contract.status import JobStatus, JobSummary, Phase
from tfyarn.spec import JobSpec, Role

ANSWER = (
    Path(__file__).resolve().parents[1]
    / "data"
    / "nodemanager"
    / "gpu-resources-default-executor.json"
).read_text()
UUID0 = "GPU-242a6481-23b7-1822-356b-42b75150e788"
UUID1 = "GPU-a67fe5ce-370c-26f2-f366-153a4a7e722c"
NODE = parse_node_gpus(ANSWER)


def test_the_nodemanagers_answer_lists_devices_and_assigns_none() -> None:
    assert NODE.devices == (Gpu(0, UUID0, 0), Gpu(1, UUID1, 1))
    assert NODE.allowed == () and NODE.assigned == {}
    # The same classes by their JAXB names, wrapped, one element unlisted.
    jaxb = {
        "nmGpuResourceInfo": {
            "gpuDeviceInformation": {"gpu": {"uuid": UUID1, "minor_number": 3}},
            "totalGpuDevices": {"index": 0, "minorNumber": 3},
            "assignedGpuDevices": [
                {"index": 0, "minorNumber": 3, "containerId": "container_1"}
            ],
        }
    }
    other = parse_node_gpus(json.dumps(jaxb))
    assert other.devices == (Gpu(0, UUID1, 3),)
    assert other.allowed == (0,) and other.assigned == {"container_1": (0,)}
    with pytest.raises(ValueError, match="gpuDeviceInformation"):
        parse_node_gpus('{"nmResourceInfo": {}}')


def test_the_master_picks_free_devices_disjoint_within_the_job() -> None:
    first = choose(1, container="c1", visible="", node=NODE, held={})
    assert (first.gpus, first.source) == ((Gpu(0, UUID0, 0),), "master")
    assert "no LinuxContainerExecutor" in first.note
    second = choose(1, container="c2", visible="all", node=NODE, held={0: "w:0"})
    assert second.gpus == (Gpu(1, UUID1, 1),)
    both = choose(2, container="c3", visible="", node=NODE, held={})
    assert both.cuda_visible_devices() == (f"{UUID0},{UUID1}", False)
    # Too few free: shared, and said.
    crowded = choose(1, container="c4", visible="", node=NODE, held={0: "a", 1: "b"})
    assert crowded.gpus == (Gpu(0, UUID0, 0),)
    assert "shared with a (GPU 0)" in crowded.note


def test_what_yarn_assigned_or_exposed_wins() -> None:
    lce = NodeGpus(NODE.devices, (0, 1), {"container_7": (1,), "container_8": (0,)})
    mine = choose(1, container="container_7", visible="", node=lce, held={})
    assert (mine.gpus, mine.source) == ((Gpu(1, UUID1, 1),), "yarn")
    # Another app's container holds device 0: ours, unassigned, gets 1.
    lce = NodeGpus(NODE.devices, (0, 1), {"container_8": (0,)})
    other = choose(1, container="container_9", visible="", node=lce, held={})
    assert other.gpus == (Gpu(1, UUID1, 1),) and "shared" not in other.note
    # ... and when this job holds 1 too, it shares its own device first.
    full = choose(1, container="container_9", visible="", node=lce, held={1: "w:1"})
    assert full.gpus == (Gpu(1, UUID1, 1),) and "shared with w:1 (GPU 1)" in full.note
    docker = choose(2, container="x", visible="1,0", node=NODE, held={0: "w:0"})
    assert docker.source == "docker"
    assert docker.gpus == (Gpu(1, UUID1, 1), Gpu(0, UUID0, 0))
    # In Docker without UUIDs the container counts its own devices from 0.
    blind = choose(2, container="x", visible="2,3", node=None, held={})
    assert blind.cuda_visible_devices() == ("0,1", False)


def test_without_the_nodemanagers_list_indices_count_as_nvidia_smi_does() -> None:
    choice = choose(
        1, container="c", visible="", node=None, held={0: "w:0"}, node_error="HTTP 500"
    )
    assert choice.gpus == (Gpu(1),)
    assert choice.cuda_visible_devices() == ("1", True)  # + CUDA_DEVICE_ORDER
    assert "did not list the node's GPUs (HTTP 500)" in choice.note
    event = pb.ClusterEvent.FromString(choice.event())
    assert event.devices.cuda_visible_devices == "1"
    assert event.devices.pci_bus_order and event.devices.source == "master"


# -- the master, YARN faked ------------------------------------------------------


def gpu_job(**kwargs: Any) -> JobSpec:
    """A parameter-server job whose workers ask for 1 GPU each (the chief and
    the ps for none)."""
    tasks = {
        "chief": {"count": 1, "memory_mib": 512},
        "ps": {"count": 1, "memory_mib": 512},
        "worker": {"count": 2, "memory_mib": 512, "gpus": 1},
    }
    tasks.update(kwargs.pop("tasks", {}))
    defaults = {"max_restarts": 2, "preimport": (), "registration_timeout": 30.0}
    return JobSpec(script="train.py", tasks=tasks, **{**defaults, **kwargs})


class Node:
    """A fake NodeManager web service: its answer, counted."""

    def __init__(self, answer: str = ANSWER, error: str = "") -> None:
        self.answer, self.error, self.asked = answer, error, 0

    async def __call__(self, node: str) -> tuple[str, str]:
        self.asked += 1
        return ("", self.error) if self.error else (self.answer, "")


def join(state: JobState, role: str, index: int, *, attempt: int = 0) -> Watcher:
    """Register a task as the servicer does, and open its stream."""
    task = state.tasks[(Role(role), index)]
    req = pb.RegisterTaskRequest(
        task=pb.TaskKey(role=role, index=index),
        attempt=attempt,
        host="node1",
        port=3000 + index,  # a replacement comes back at its address
        container_id=task.container_id or "",
    )
    state.register(req)
    state.gpus.registered(req)
    watcher = state.watch(role, index, attempt, 0)
    state.gpus.watching(watcher)
    return watcher


def devices_of(watcher: Watcher) -> list[pb.Devices]:
    """The Devices events queued on a stream so far (others left out)."""
    seen = []
    queue = watcher._queue
    kept = []
    while not queue.empty():
        raw = queue.get_nowait()
        kept.append(raw)
        if raw is not None:
            event = pb.ClusterEvent.FromString(raw)
            if event.HasField("devices"):
                seen.append(event.devices)
    for raw in kept:
        queue.put_nowait(raw)
    return seen


async def settle(state: JobState, clock: Clock, passes: int = 2) -> None:
    for _ in range(passes):
        clock.now += 1
        await state.reconcile_once()


def test_two_one_gpu_workers_get_different_devices_and_a_ps_none() -> None:
    node = Node()
    seen: dict[str, Any] = {}

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        state.gpus.fetch = node
        for cid in list(launcher.containers):
            launcher.grant(cid)
        await settle(state, clock)  # the master sees the containers' node
        streams = {
            f"{role}:{index}": join(state, role, index)
            for role, index in (("chief", 0), ("ps", 0), ("worker", 0), ("worker", 1))
        }
        await settle(state, clock)
        for key, watcher in streams.items():
            seen[key] = devices_of(watcher)
        # The heartbeat carries nvidia-smi's figures of the task's device.
        reading = pb.GpuReading(
            index=1,
            uuid=UUID1,
            utilization=87,
            memory_used_mib=4096,
            memory_total_mib=143771,
        )
        state.gpus.heartbeat(
            pb.HeartbeatRequest(
                task=pb.TaskKey(role="worker", index=1), attempt=0, gpus=[reading]
            )
        )
        seen["status"] = JobStatus.from_dict(state.snapshot())
        seen["metrics"] = JobMetrics(state.snapshot).exposition().decode()
        state.request_kill("test over")

    state, _ = run(gpu_job(), scenario)
    assert state.phase is Phase.KILLED
    assert seen["chief:0"] == [] and seen["ps:0"] == []
    (w0,), (w1,) = seen["worker:0"], seen["worker:1"]
    assert [g.uuid for g in w0.gpus] == [UUID0] and w0.source == "master"
    assert [g.uuid for g in w1.gpus] == [UUID1]
    assert w0.cuda_visible_devices == UUID0 and w1.cuda_visible_devices == UUID1
    assert node.asked >= 1
    status = seen["status"]
    task = status.task("worker:1")
    assert task is not None and task.gpu_source == "master"
    assert task.gpus == [
        {
            "index": 1,
            "uuid": UUID1,
            "minor": 1,
            "utilization": 87.0,
            "memory_used_mib": 4096.0,
            "memory_total_mib": 143771.0,
        }
    ]
    ps = status.task("ps:0")
    assert ps is not None and ps.gpus == []
    metrics = seen["metrics"]
    labels = f'gpu="1",role="worker",task="worker:1",uuid="{UUID1}"'
    assert f"tfyarn_task_gpu_utilization_percent{{{labels}}} 87.0" in metrics
    # 4096 MiB in bytes.
    assert f"tfyarn_task_gpu_memory_used_bytes{{{labels}}} 4.294967296e+09" in metrics
    # worker:0 reported nothing (no nvidia-smi there): no series of it.
    assert 'task="worker:0"' not in metrics.split("tfyarn_task_gpu_", 1)[1]


def test_a_replaced_task_gets_a_free_device_and_a_restart_in_place_keeps_its_own() -> (
    None
):
    seen: dict[str, Any] = {}

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        state.gpus.fetch = Node()
        for cid in list(launcher.containers):
            launcher.grant(cid)
        await settle(state, clock)
        for key in ("chief:0", "ps:0", "worker:0", "worker:1"):
            role, index = key.split(":")
            join(state, role, int(index))
        await settle(state, clock)
        worker0 = state.tasks[(Role.WORKER, 0)]
        seen["before"] = state.gpus.status_of(worker0)["gpus"][0]["index"]
        # worker:0's container is lost: a new container, a new choice.
        launcher.end("worker_0", "FAILED", "lost")
        for _ in range(40):
            await settle(state, clock, 1)
            if launcher.started:
                break
        (cid, _env), *_ = launcher.started
        assert worker0 not in state.gpus.held  # freed with its container
        launcher.grant(cid)
        await settle(state, clock)
        stream = join(state, "worker", 0, attempt=worker0.attempt)
        await settle(state, clock)
        (event,) = devices_of(stream)
        seen["after"] = [g.index for g in event.gpus]
        seen["note"] = "\n".join(worker0.history)
        # The same container registering again (a restart in place): the
        # same device, sent on its new stream at once.
        worker1 = state.tasks[(Role.WORKER, 1)]
        before = state.gpus.held[worker1].choice
        worker1.attempt += 1
        again = join(state, "worker", 1, attempt=worker1.attempt)
        seen["kept"] = (before, devices_of(again))
        state.request_kill("test over")

    run(gpu_job(), scenario)
    assert seen["before"] == 0
    assert seen["after"] == [0]  # worker:1 holds 1; 0 was freed
    assert "GPU 0 free again (worker_0 ended)" in seen["note"]
    before, (event,) = seen["kept"]
    assert isinstance(before, Choice)
    assert [g.index for g in event.gpus] == [g.index for g in before.gpus] == [1]


def test_a_node_whose_gpus_fail_is_named() -> None:
    seen: dict[str, Any] = {}
    failure = (
        "Failed to execute GPU device detection script (/x/nvidia-smi)! Exception "
        "message: NVIDIA-SMI has failed because it couldn't communicate with the "
        "NVIDIA driver."
    )

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        state.gpus.fetch = Node(error=failure)
        launcher.grant("worker_0")
        await settle(state, clock)
        join(state, "worker", 0)
        await settle(state, clock)
        worker0 = state.tasks[(Role.WORKER, 0)]
        # The NodeManager could not say: indices, CUDA counting as nvidia-smi.
        choice = state.gpus.held[worker0].choice
        seen["fallback"] = choice.cuda_visible_devices()
        # The task's own nvidia-smi fails too, and says so with its heartbeat.
        state.gpus.heartbeat(
            pb.HeartbeatRequest(
                task=pb.TaskKey(role="worker", index=0),
                attempt=0,
                gpu_error="nvidia-smi exited 9: NVIDIA-SMI has failed",
            )
        )
        seen["status"] = JobStatus.from_dict(state.snapshot())
        # worker:1 never gets a container: the timeout names the node.
        clock.now += 40
        await state.reconcile_once()

    state, _ = run(gpu_job(max_restarts=0), scenario)
    assert seen["fallback"] == ("0", True)
    task = seen["status"].task("worker:0")
    assert task.gpu_error == "nvidia-smi exited 9: NVIDIA-SMI has failed"
    assert state.phase is Phase.FAILED
    assert "worker:1 waiting for a container of 512 MiB, 1 vcores, 1 GPUs" in (
        state.diagnostics
    )
    assert "GPUs fail on node1: nvidia-smi failed: nvidia-smi exited 9" in (
        state.diagnostics
    )


def test_the_nodemanagers_refusal_is_read_from_its_answer() -> None:
    body = json.dumps(
        {"RemoteException": {"exception": "YarnException", "message": "Failed\nto run"}}
    )
    assert gpus._remote_message(body) == "Failed to run"
    assert gpus._remote_message("<html>") == ""
    assert asyncio.run(gpus.node_resources("127.0.0.1:1"))[1].startswith(
        "not reachable"
    )


# -- what readers see --------------------------------------------------------------


def gpu_snapshot() -> dict[str, Any]:
    """A snapshot whose chief holds two GPUs, one with nvidia-smi's figures,
    and whose worker's node fails its nvidia-smi."""
    snap = snapshot()
    chief, _ps, worker = snap["tasks"]
    chief.update(
        gpus=[
            {"index": 0, "uuid": UUID0, "minor": 0},
            {
                "index": 1,
                "uuid": UUID1,
                "minor": 1,
                "utilization": 87.0,
                "memory_used_mib": 4096.0,
                "memory_total_mib": 143771.0,
            },
        ],
        gpu_source="master",
    )
    worker.update(gpu_error=f"nvidia-smi exited 9 {HOSTILE}")
    return snap


def test_status_lists_each_tasks_gpus_index_and_uuid() -> None:
    status = JobStatus.from_dict(gpu_snapshot())
    assert narrator.gpu_lines(status) == [
        "gpus:",
        f"  chief:0: 0 {UUID0}; 1 {UUID1} (87% busy, 4096/143771 MiB) [master]",
        f"  worker:0: none; nvidia-smi fails: nvidia-smi exited 9 {HOSTILE}",
    ]
    assert narrator.gpu_lines(JobStatus.from_dict(snapshot())) == []
    # A follower sees a new snapshot when a task's GPUs change.
    before = JobSummary.of(snapshot()).digest
    assert JobSummary.of(gpu_snapshot()).digest != before


def test_the_tracking_page_shows_gpus_with_their_uuids_escaped() -> None:
    html = status_page.render(gpu_snapshot(), now=1_800_000_100.0)
    assert "<th>gpus</th>" in html
    assert f"<span title='{UUID1}'>1 87% 4096 MiB</span>" in html
    assert f"<span title='{UUID0}'>0</span>" in html
    assert "nvidia-smi fails: nvidia-smi exited 9" in html
    assert HOSTILE not in html
