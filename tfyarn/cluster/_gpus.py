"""GPUs of the local cluster, discovered by YARN's own GPU plugin.

``--gpus N`` gives every node N devices behind a stand-in ``nvidia-smi``
(``gpu_standin/nvidia_smi.py``, copied into ``<node dir>/gpu/``) and turns on
YARN's GPU resource plugin with the DefaultContainerExecutor: the NodeManager
runs the stand-in (``-q -x``) at start and every few seconds, and advertises
the devices it finds as ``yarn.io/gpu``. With the DefaultContainerExecutor
YARN goes no further (Hadoop 3.4): no device is assigned to a container and
the NodeManager's ``/ws/v1/node/resources/yarn.io%2Fgpu`` answers with an
error (``GpuResourcePlugin.getNMResourceInfo`` needs the
LinuxContainerExecutor's ``GpuResourceHandlerImpl``), so the job's master
assigns devices itself (``am/gpus.py``).

Tests set a device's utilisation and memory in use (:func:`set_figures`) or
make a node's ``nvidia-smi`` fail (:func:`set_failure`) through the node's
``state.json``, which the stand-in reads at every call.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from tfyarn.cluster._settings import ClusterSettings

STANDIN = Path(__file__).resolve().parent / "gpu_standin"
EXECUTABLE = "nvidia-smi"
STATE = "state.json"
# What the H200 the stand-in copies reports (tests/data/nvidia-h200/).
MEMORY_TOTAL_MIB = 143771
MEMORY_RESERVED_MIB = 616
MEMORY_FREE_IDLE_MIB = 143156
DRIVER_VERSION = "580.159.04"
CUDA_VERSION = "13.0"
# A real nvidia-smi that cannot reach the driver says this and exits 9.
DRIVER_FAILURE = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
    "driver. Make sure that the latest NVIDIA driver is installed and running."
)
# How long `tfyarn cluster status` waits for a node's nvidia-smi.
PROBE_TIMEOUT_S = 10.0
# The NodeManager's log lines about a failing GPU discovery (GpuDiscoverer,
# NodeResourceMonitorImpl, GpuNodeResourceUpdateHandler in Hadoop 3.4).
_NM_GPU_ERRORS = (
    "Get Node GPU Utilization error",
    "Failed to execute GPU device detection script",
    "Failed to discover GPU information from system",
    "automatically discovering GPU information failed",
    "could not find any usable GPUs",
)


def uses_plugin(settings: ClusterSettings) -> bool:
    """Whether the NodeManagers discover GPUs through YARN's plugin.

    Not with ``--container_executor``: the LinuxContainerExecutor would also
    run the plugin's resource handler, which isolates devices with cgroups
    this cluster does not set up; there the GPUs stay a count
    (``node-resources.xml``).
    """
    return settings.gpus > 0 and not settings.container_executor


def gpu_dir(node_dir: Path) -> Path:
    """Where a node's stand-in ``nvidia-smi`` and its state live."""
    return node_dir / "gpu"


def yarn_properties(settings: ClusterSettings, node_dir: Path) -> str:
    """yarn-site.xml properties of a node's GPU plugin ("" without one)."""
    if not uses_plugin(settings):
        return ""
    prefix = "yarn.nodemanager.resource-plugins"
    props = {
        prefix: "yarn.io/gpu",
        f"{prefix}.gpu.allowed-gpu-devices": "auto",
        # The directory, which every line looks into for nvidia-smi: 3.3's
        # GpuDiscoverer refuses a path that names nvidia-smi itself (its
        # check of the file name is inverted; 3.1 and 3.4 take either).
        f"{prefix}.gpu.path-to-discovery-executables": str(gpu_dir(node_dir)),
        # Hadoop stops calling a failing nvidia-smi after 10 errors; here it
        # keeps calling, so a node mended by a test is seen again.
        f"{prefix}.gpu.discovery-max-errors": "-1",
    }
    return "\n".join(
        f"  <property><name>{k}</name><value>{v}</value></property>"
        for k, v in props.items()
    )


def devices(node: str, count: int, *, seed: str = "") -> list[dict[str, Any]]:
    """``count`` devices of one node: their own minor numbers, UUIDs, bus ids."""
    out = []
    for index in range(count):
        digest = hashlib.sha256(f"{seed}/{node}/{index}".encode()).hexdigest()
        uuid = "-".join(
            (digest[:8], digest[8:12], digest[12:16], digest[16:20], digest[20:32])
        )
        slot = 6 + index  # the H200 sits at 00:06.0; the next ones after it
        out.append(
            {
                "index": index,
                "minor": index,
                "uuid": f"GPU-{uuid}",
                "serial": str(1653924042666 + int(digest[32:38], 16)),
                "pdi": "0x" + digest[38:54],
                "bus_id": f"00000000:00:{slot:02X}.0",
                "pci_device": f"{slot:02X}",
                "board_id": hex(slot),
                "module_id": index + 1,
                "memory_total": MEMORY_TOTAL_MIB,
                "memory_reserved": MEMORY_RESERVED_MIB,
                "memory_free_idle": MEMORY_FREE_IDLE_MIB,
                "memory_used": 0,
                "utilization": 0,
                "memory_utilization": 0,
            }
        )
    return out


def write_standin(
    node_dir: Path, node: str, count: int, *, seed: str = "", python: str = ""
) -> Path:
    """Write a node's stand-in ``nvidia-smi`` for ``count`` devices; its path.

    ``seed`` makes the UUIDs of two clusters differ (the base dir).
    """
    where = gpu_dir(node_dir)
    where.mkdir(parents=True, exist_ok=True)
    source = (STANDIN / "nvidia_smi.py").read_text()
    executable = where / EXECUTABLE
    _write(executable, f"#!{python or sys.executable}\n{source}")
    executable.chmod(0o755)
    shutil.copyfile(STANDIN / "gpu.xml", where / "gpu.xml")
    state = {
        "node": node,
        "driver_version": DRIVER_VERSION,
        "cuda_version": CUDA_VERSION,
        "fail": "",
        "fail_code": 9,
        "devices": devices(node, count, seed=seed),
    }
    _write(where / STATE, json.dumps(state, indent=1) + "\n")
    return executable


def read_state(node_dir: Path) -> dict[str, Any]:
    state: dict[str, Any] = json.loads((gpu_dir(node_dir) / STATE).read_text())
    return state


def set_figures(
    node_dir: Path,
    index: int,
    *,
    utilization: int | None = None,
    memory_used: int | None = None,
) -> None:
    """Set what a node's device ``index`` reports as busy (percent, MiB)."""
    state = read_state(node_dir)
    device = next((d for d in state["devices"] if d["index"] == index), None)
    if device is None:
        raise ValueError(f"the node in {node_dir} has no GPU {index}")
    if utilization is not None:
        device["utilization"] = int(utilization)
        device["memory_utilization"] = int(utilization) // 2
    if memory_used is not None:
        device["memory_used"] = int(memory_used)
    _write(gpu_dir(node_dir) / STATE, json.dumps(state, indent=1) + "\n")


def set_failure(node_dir: Path, message: str | None = DRIVER_FAILURE) -> None:
    """Make a node's ``nvidia-smi`` fail with ``message`` (None: work again)."""
    state = read_state(node_dir)
    state["fail"] = message or ""
    _write(gpu_dir(node_dir) / STATE, json.dumps(state, indent=1) + "\n")


def probe(node_dir: Path) -> tuple[int | None, str]:
    """Run a node's discovery executable as the NodeManager does (``-q -x``):
    (how many devices it lists, "") or (None, why it failed)."""
    executable = gpu_dir(node_dir) / EXECUTABLE
    if not executable.is_file():
        return None, f"{executable} is missing"
    try:
        done = subprocess.run(
            [str(executable), "-q", "-x"],
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{executable} did not run: {exc}"
    if done.returncode != 0:
        words = (done.stderr or done.stdout).strip().splitlines()
        return None, (
            f"{executable} -q -x exited {done.returncode}: "
            + (words[-1] if words else "no output")
        )
    return done.stdout.count("<gpu id="), ""


def nodemanager_gpu_error(log: Path, *, tail_bytes: int = 256 * 1024) -> str:
    """The NodeManager's latest words about a failing GPU discovery in its log
    (its last lines only), "" if none."""
    try:
        with open(log, "rb") as stream:
            stream.seek(max(0, os.path.getsize(log) - tail_bytes))
            text = stream.read().decode(errors="replace")
    except OSError:
        return ""
    for line in reversed(text.splitlines()):
        if any(words in line for words in _NM_GPU_ERRORS):
            return line.strip()[:400]
    return ""


def discovery_status(node_dir: Path, nm_log: Path) -> str:
    """One line for ``tfyarn cluster status``: the node's GPU discovery."""
    found, problem = probe(node_dir)
    if not problem:
        return f"nvidia-smi lists {found} GPU(s)"
    said = nodemanager_gpu_error(nm_log)
    return f"nvidia-smi FAILS: {problem}" + (
        f"; the NodeManager logs: {said}" if said else ""
    )


def _write(path: Path, text: str) -> None:
    # The NodeManager and tasks read it at any moment: never half written.
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)
