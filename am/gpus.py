"""Which GPUs each task uses: what YARN exposes, else the master's own choice.

YARN grants ``yarn.io/gpu`` as a number. Which devices a container may use is
known only where the NodeManager assigns them, and that is the
LinuxContainerExecutor's resource handler chain alone
(``GpuResourceHandlerImpl.preStart`` → ``GpuResourceAllocator.assignGpus``,
then cgroups deny the other devices); with YARN's Docker runtime its
``NvidiaDockerV2CommandPlugin`` also puts their indices into the container's
``NVIDIA_VISIBLE_DEVICES``. With the DefaultContainerExecutor the GPU plugin
still discovers the node's devices (``nvidia-smi -q -x``) and the
NodeManager's ``/ws/v1/node/resources/yarn.io%2Fgpu`` lists them, but its
``totalGpuDevices`` and ``assignedGpuDevices`` stay empty: nothing is
assigned, every container sees every device.

So, for a task of a role with GPUs, once it registered, in this order:

1. ``NVIDIA_VISIBLE_DEVICES`` names devices (YARN's Docker runtime): those
   (source ``docker``);
2. the NodeManager lists devices assigned to the task's container: those
   (source ``yarn``);
3. else the master picks free devices of the node (its NodeManager's list,
   or indices 0.. when the NodeManager does not answer), disjoint among this
   job's tasks on the node (source ``master``). Other jobs' containers on the
   same node are invisible to it.

The choice reaches the task as a ``Devices`` event on its stream, before the
ClusterSpec; the runtime sets ``CUDA_VISIBLE_DEVICES`` from it before the
script's interpreter starts. A task's devices belong to its container: a
restart in place keeps them, a new container gets a new choice, and they are
free again once YARN says the old container ended. Runtimes report each
device's utilisation and memory (``nvidia-smi --query-gpu``) with their
heartbeats, and a node whose ``nvidia-smi`` fails is named in the status and
in the diagnostics of tasks waiting for GPUs.
"""

from __future__ import annotations

import asyncio
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from am.decisions import Decision, Note
from am.launcher import ContainerInfo
from am.model import Task, Watcher
from am.view import key_of
from tfyarn._proto import master_pb2 as pb
from tfyarn.spec import JobSpec, Role


class _Dirty(Protocol):
    dirty: bool  # the status changed: publish it


class Job(Protocol):
    """What the ledger needs of the job: its tasks and containers, a note in a
    task's history (through the applier), the status to refresh."""

    @property
    def spec(self) -> JobSpec: ...
    @property
    def tasks(self) -> Mapping[tuple[Role, int], Task]: ...
    @property
    def containers(self) -> Mapping[str, ContainerInfo]: ...
    @property
    def publisher(self) -> _Dirty: ...

    def apply(self, decisions: Iterable[Decision]) -> None: ...
    def poke(self) -> None: ...


log = logging.getLogger(__name__)

HTTP_TIMEOUT = 5.0
RESOURCE_PATH = "/ws/v1/node/resources/yarn.io%2Fgpu"
# NVIDIA_VISIBLE_DEVICES values that name no particular device.
_NOT_A_LIST = frozenset({"", "all", "none", "void"})

# (the NodeManager's answer, why there is none) for one node's http address.
Fetch = Callable[[str], Awaitable[tuple[str, str]]]


@dataclass(frozen=True)
class Gpu:
    """One device of a node: nvidia-smi's index, its UUID and minor number."""

    index: int
    uuid: str = ""
    minor: int = -1

    def to_pb(self) -> pb.Gpu:
        return pb.Gpu(index=self.index, uuid=self.uuid, minor=self.minor)


@dataclass(frozen=True)
class NodeGpus:
    """What a NodeManager says of its GPUs (``/ws/v1/node/resources/yarn.io%2Fgpu``).

    ``devices`` in nvidia-smi's order (the index is the position, as in
    ``GpuDiscoverer``); ``allowed``: the indexes YARN may assign (empty: not
    bootstrapped, i.e. no LinuxContainerExecutor); ``assigned``: YARN
    container id -> the indexes YARN assigned to it.
    """

    devices: tuple[Gpu, ...] = ()
    allowed: tuple[int, ...] = ()
    assigned: Mapping[str, tuple[int, ...]] = field(default_factory=dict)

    def by_index(self, index: int) -> Gpu:
        found = next((g for g in self.devices if g.index == index), None)
        return found or Gpu(index)


@dataclass(frozen=True)
class Choice:
    """A task's devices and who chose them (see the module's docstring)."""

    gpus: tuple[Gpu, ...]
    source: str
    note: str = ""

    def cuda_visible_devices(self) -> tuple[str, bool]:
        """CUDA_VISIBLE_DEVICES, and whether CUDA must count in PCI bus order.

        UUIDs when every one is known: they name a device whatever the
        container sees. Otherwise indices: on the node's numbering (in PCI
        bus order, as nvidia-smi counts) when the container sees every
        device, else 0..n-1 (the container sees its own only).
        """
        if self.gpus and all(g.uuid for g in self.gpus):
            return ",".join(g.uuid for g in self.gpus), False
        if self.source == "master":
            return ",".join(str(g.index) for g in self.gpus), True
        return ",".join(str(i) for i in range(len(self.gpus))), False

    def event(self) -> bytes:
        """The serialized ``ClusterEvent`` carrying it."""
        visible, pci = self.cuda_visible_devices()
        devices = pb.Devices(
            gpus=[g.to_pb() for g in self.gpus],
            source=self.source,
            cuda_visible_devices=visible,
            pci_bus_order=pci,
            note=self.note,
        )
        return pb.ClusterEvent(devices=devices).SerializeToString()


def parse_node_gpus(text: str) -> NodeGpus:
    """The NodeManager's answer (``NMGpuResourceInfo`` as JSON) as :class:`NodeGpus`.

    Hadoop 3.4 writes the bean names (``gpuDeviceInformation.gpus[].uuid``,
    ``minorNumber``, ``totalGpuDevices[].index``, ``assignedGpuDevices[].
    containerId``); the JAXB names of the same classes (``gpu``,
    ``minor_number``) and a root element around it are read too.

    Raises
    ------
    ValueError
        Not such an answer.
    """
    raw = json.loads(text)
    root = raw.get("nmGpuResourceInfo", raw) if isinstance(raw, dict) else {}
    info = root.get("gpuDeviceInformation") if isinstance(root, dict) else None
    if not info:
        raise ValueError("no gpuDeviceInformation in the NodeManager's answer")
    devices = []
    for i, gpu in enumerate(_list(info.get("gpus", info.get("gpu")))):
        minor = gpu.get("minorNumber", gpu.get("minor_number", -1))
        devices.append(Gpu(i, str(gpu.get("uuid") or ""), int(minor)))
    allowed = tuple(int(d["index"]) for d in _list(root.get("totalGpuDevices")))
    assigned: dict[str, tuple[int, ...]] = {}
    for d in _list(root.get("assignedGpuDevices")):
        cid = str(d.get("containerId") or "")
        assigned[cid] = (*assigned.get(cid, ()), int(d["index"]))
    return NodeGpus(tuple(devices), allowed, assigned)


def _list(value: Any) -> list[dict[str, Any]]:
    # One element may come as an object rather than a list of one.
    if isinstance(value, dict):
        return [value]
    return [v for v in value or [] if isinstance(v, dict)]


def parse_visible(value: str) -> tuple[str, ...]:
    """The devices an ``NVIDIA_VISIBLE_DEVICES`` value names (indices or
    UUIDs); () for ``all``, ``none``, ``void`` or nothing."""
    if value.strip().lower() in _NOT_A_LIST:
        return ()
    return tuple(v.strip() for v in value.split(",") if v.strip())


def choose(
    wanted: int,
    *,
    container: str,
    visible: str,
    node: NodeGpus | None,
    held: Mapping[int, str],
    node_error: str = "",
) -> Choice:
    """A task's devices (pure; see the module's docstring for the order).

    ``held``: index -> the task of this job holding it on the same node.
    """
    names = parse_visible(visible)
    if names:
        gpus = tuple(_named(name, node) for name in names)
        return Choice(
            gpus, "docker", "YARN's Docker runtime set NVIDIA_VISIBLE_DEVICES"
        )
    mine = node.assigned.get(container) if node else None
    if node and mine:
        gpus = tuple(node.by_index(i) for i in sorted(mine))
        return Choice(gpus, "yarn", "the NodeManager assigned them to the container")
    others: dict[int, str] = {}
    if node and node.devices:
        pool = [g.index for g in node.devices]
        if node.allowed:
            pool = [i for i in pool if i in node.allowed]
        others = {i: f"YARN's {cid}" for cid, ids in node.assigned.items() for i in ids}
        why = "the NodeManager assigns none (no LinuxContainerExecutor)"
    else:
        pool = list(range(max(wanted, 0) + len(held)))
        why = "the NodeManager did not list the node's GPUs" + (
            f" ({node_error})" if node_error else ""
        )
    taken = {**others, **held}
    # Free ones first; too few (a node busier than YARN's count says): shared,
    # this job's own before other containers'.
    ranked = [i for i in pool if i not in taken]
    ranked += [i for i in pool if i in held] + [i for i in pool if i in others]
    picked = ranked[:wanted]
    note = f"chosen by the master: {why}"
    shared = [i for i in picked if i in taken]
    if shared:
        note += "; too few free, shared with " + ", ".join(
            f"{taken[i]} (GPU {i})" for i in shared
        )
    gpus = tuple(node.by_index(i) if node else Gpu(i) for i in sorted(picked))
    return Choice(gpus, "master", note)


def _named(name: str, node: NodeGpus | None) -> Gpu:
    devices = node.devices if node else ()
    if name.isdigit():
        return node.by_index(int(name)) if node else Gpu(int(name))
    found = next((g for g in devices if g.uuid == name), None)
    return found or Gpu(-1, uuid=name)


async def node_resources(node: str) -> tuple[str, str]:
    """GET the NodeManager's GPU resource info: (its JSON, "") or ("", why not)."""
    return await asyncio.to_thread(_get, node)


def _get(node: str) -> tuple[str, str]:
    base = node if node.startswith(("http://", "https://")) else f"http://{node}"
    request = urllib.request.Request(
        base + RESOURCE_PATH, headers={"Accept": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT) as reply:
            return bytes(reply.read()).decode(errors="replace"), ""
    except urllib.error.HTTPError as exc:
        body = exc.read().decode(errors="replace")
        return "", _remote_message(body) or f"HTTP {exc.code} {exc.reason}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return "", f"not reachable: {exc}"


def _remote_message(body: str) -> str:
    """The message of a Hadoop web service's ``RemoteException`` answer."""
    try:
        message = json.loads(body)["RemoteException"]["message"]
    except (ValueError, KeyError, TypeError):
        return ""
    return " ".join(str(message).split())


@dataclass
class _Held:
    """A task's devices in one container."""

    container: str  # skein's container id
    node: str
    choice: Choice
    event: bytes


class GpuLedger:
    """The job's GPU assignments, node troubles and devices' latest figures.

    ``JobState.gpus``. The servicer tells it of registrations, streams and
    heartbeats once JobState accepted them, the reconcile loop calls
    :meth:`reconcile` every pass, the snapshot :meth:`status_of`.
    """

    def __init__(self, state: Job, fetch: Fetch = node_resources) -> None:
        self.state = state
        self.fetch = fetch
        self.held: dict[Task, _Held] = {}
        self.pending: dict[Task, str] = {}  # task -> its NVIDIA_VISIBLE_DEVICES
        self.readings: dict[Task, list[dict[str, Any]]] = {}
        self.task_errors: dict[Task, str] = {}
        # Node (host) -> why its GPUs could not be read (NodeManager or nvidia-smi).
        self.node_errors: dict[str, str] = {}

    def wanted(self, task: Task) -> int:
        return self.state.spec.group(task.role).gpus or 0

    # -- what the servicer calls, after JobState ------------------------------

    def _current(self, key: pb.TaskKey, attempt: int) -> Task | None:
        """The task a call names, if the call is from its current attempt."""
        try:
            task = self.state.tasks.get((Role(key.role), key.index))
        except ValueError:  # no such role: JobState refused the call already
            return None
        return task if task is not None and task.attempt == attempt else None

    def registered(self, req: pb.RegisterTaskRequest) -> None:
        """A task registered: keep its devices (same container) or choose anew."""
        task = self._current(req.task, req.attempt)
        if task is None or not self.wanted(task) or not task.state.is_registered():
            return
        held = self.held.get(task)
        if held is not None and held.container == task.container_id:
            return  # a restart in place, or a repeat: its container's devices
        if held is not None:
            self.release(task)
        self.pending[task] = req.nvidia_visible_devices
        self.state.poke()

    def watching(self, watcher: Watcher) -> None:
        """A new stream of the task's current attempt: its devices, if chosen."""
        task = watcher.task
        held = self.held.get(task)
        if (
            held is not None
            and watcher.attempt == task.attempt
            and held.container == task.container_id
        ):
            watcher.put(held.event)

    def heartbeat(self, request: pb.HeartbeatRequest) -> None:
        """What the task's runtime read of its GPUs (nvidia-smi), or why not."""
        if not request.gpus and not request.gpu_error:
            return  # a task without GPUs, or no nvidia-smi: nothing to keep
        task = self._current(request.task, request.attempt)
        if task is None or task not in self.held:
            return
        if request.gpus:
            self.readings[task] = [
                {
                    "index": r.index,
                    "uuid": r.uuid,
                    "utilization": r.utilization,
                    "memory_used_mib": r.memory_used_mib,
                    "memory_total_mib": r.memory_total_mib,
                }
                for r in request.gpus
            ]
            self.state.publisher.dirty = True
        error = request.gpu_error
        if error != self.task_errors.get(task, ""):
            self.task_errors[task] = error
            host = _host(task)
            if error:
                self.node_errors[host] = f"nvidia-smi failed: {error}"
                self.state.apply(
                    [Note(key_of(task), f"nvidia-smi fails on {host}: {error}")]
                )
            elif self.node_errors.get(host, "").startswith("nvidia-smi"):
                del self.node_errors[host]
            self.state.publisher.dirty = True

    def release(self, task: Task) -> None:
        held = self.held.pop(task, None)
        self.readings.pop(task, None)
        self.task_errors.pop(task, None)
        if held is not None:
            gpus = ", ".join(str(g.index) for g in held.choice.gpus)
            self.state.apply(
                [Note(key_of(task), f"GPU {gpus} free again ({held.container} ended)")]
            )

    # -- the reconcile loop ---------------------------------------------------

    async def reconcile(self) -> None:
        """Free the devices of ended containers; choose for registered tasks."""
        state = self.state
        for task, held in list(self.held.items()):
            info = state.containers.get(held.container)
            if info is not None and info.ended:
                self.release(task)
        ready = {
            t: v for t, v in self.pending.items() if t.node and t.state.is_registered()
        }
        for task in [t for t in self.pending if t.state.is_terminal()]:
            del self.pending[task]
        if not ready:
            return
        nodes = sorted({t.node or "" for t in ready})
        answers = await asyncio.gather(*(self._node(n) for n in nodes))
        known = dict(zip(nodes, answers, strict=True))
        # What this job holds on each node: index -> task.
        holding: dict[str, dict[int, str]] = {}
        for other, h in self.held.items():
            for g in h.choice.gpus:
                holding.setdefault(h.node, {})[g.index] = other.key
        for task, visible in ready.items():
            if self.pending.pop(task, None) is None:
                continue  # released meanwhile
            node, why = known[task.node or ""]
            on_node = holding.setdefault(task.node or "", {})
            choice = self._assign(task, visible, node, why, on_node)
            on_node.update({g.index: task.key for g in choice.gpus})

    async def _node(self, node: str) -> tuple[NodeGpus | None, str]:
        text, why = await self.fetch(node)
        host = node.split(":")[0]
        if not text:
            if "GPU device detection script" in why:
                self.node_errors[host] = (
                    f"the NodeManager's GPU discovery failed: {why}"
                )
            return None, why
        try:
            parsed = parse_node_gpus(text)
        except (ValueError, KeyError, TypeError) as exc:
            return None, f"unreadable answer ({exc})"
        if self.node_errors.get(host, "").startswith("the NodeManager"):
            del self.node_errors[host]
        return parsed, ""

    def _assign(
        self,
        task: Task,
        visible: str,
        node: NodeGpus | None,
        why: str,
        held: Mapping[int, str],
    ) -> Choice:
        choice = choose(
            self.wanted(task),
            container=task.yarn_container_id or "",
            visible=visible,
            node=node,
            held=held,
            node_error=why,
        )
        event = choice.event()
        self.held[task] = _Held(task.container_id or "", task.node or "", choice, event)
        shown = ", ".join(_describe(g) for g in choice.gpus)
        self.state.apply(
            [Note(key_of(task), f"GPU {shown} ({choice.source}: {choice.note})")]
        )
        for watcher in task.watchers:
            watcher.put(event)
        self.state.publisher.dirty = True
        return choice

    # -- what readers see -------------------------------------------------------

    def status_of(self, task: Task) -> dict[str, Any]:
        """The task's GPU fields of the published status (TaskStatus)."""
        held = self.held.get(task)
        if held is None:
            return {}
        readings = self.readings.get(task, [])
        gpus = []
        for n, g in enumerate(held.choice.gpus):
            seen = next((r for r in readings if g.uuid and r["uuid"] == g.uuid), None)
            if seen is None and len(readings) == len(held.choice.gpus):
                seen = readings[n]  # as the runtime matched them, in order
            gpus.append(
                {
                    "index": g.index,
                    "uuid": g.uuid or (seen or {}).get("uuid", ""),
                    "minor": g.minor,
                    **{
                        k: v
                        for k, v in (seen or {}).items()
                        if k not in ("index", "uuid")
                    },
                }
            )
        return {
            "gpus": gpus,
            "gpu_source": held.choice.source,
            "gpu_error": self.task_errors.get(task, ""),
        }

    def trouble(self, hosts: Iterable[str] | None = None) -> str:
        """Nodes whose GPUs could not be read, in words ("" if none)."""
        wanted = None if hosts is None else set(hosts)
        parts = [
            f"{host}: {why}"
            for host, why in sorted(self.node_errors.items())
            if wanted is None or host in wanted
        ]
        return "; ".join(parts)


def _host(task: Task) -> str:
    return task.host or (task.node or "").split(":")[0]


def _describe(gpu: Gpu) -> str:
    return f"{gpu.index} {gpu.uuid}".strip() if gpu.index >= 0 else gpu.uuid
