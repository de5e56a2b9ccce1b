"""The task's GPUs: its script's CUDA variables, and nvidia-smi's figures.

The master says which devices a task of a role with GPUs uses (a ``Devices``
event, ``am/gpus.py``); the runtime waits for it before the script's
interpreter starts, so ``CUDA_VISIBLE_DEVICES`` is set before TensorFlow (or
CUDA) loads. A task of a role without GPUs gets ``CUDA_VISIBLE_DEVICES=""``:
a parameter server on a GPU node then never takes GPU memory. A job that sets
``CUDA_VISIBLE_DEVICES`` itself (``--env``) keeps its value, with a warning.

While the script runs, every heartbeat carries what ``nvidia-smi
--query-gpu`` says of the task's devices where ``nvidia-smi`` exists (nothing
where it does not), or why it failed.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Mapping

from tfyarn._proto import master_pb2 as pb
from tfyarn.contract import docker as _docker

log = logging.getLogger("tfyarn.runtime")

CUDA_VISIBLE = "CUDA_VISIBLE_DEVICES"
CUDA_ORDER = "CUDA_DEVICE_ORDER"
# Set by YARN's Docker runtime (nvidia-docker-v2 plugin) or --docker_runtime.
NVIDIA_VISIBLE = _docker.NVIDIA_VISIBLE_DEVICES
QUERY = "index,uuid,utilization.gpu,memory.used,memory.total"
QUERY_TIMEOUT_S = 5.0


def script_env(
    base_env: Mapping[str, str], wanted: int, devices: pb.Devices | None, *, task: str
) -> dict[str, str]:
    """The script's GPU variables (``base_env``: the container's environment).

    ``wanted``: the GPUs the task's role asks for; ``devices``: what the
    master chose (needed when ``wanted``).
    """
    if wanted and devices is None:
        raise ValueError(f"{task} asks for {wanted} GPU(s) but has no devices yet")
    value = devices.cuda_visible_devices if wanted and devices else ""
    if CUDA_VISIBLE in base_env:
        if base_env[CUDA_VISIBLE] != value:
            log.warning(
                "%s: %s=%r from the job's environment wins over %r, the GPUs "
                "chosen for this task%s",
                task,
                CUDA_VISIBLE,
                base_env[CUDA_VISIBLE],
                value,
                "" if wanted else " (none: its role asks for no GPU)",
            )
        return {}
    env = {CUDA_VISIBLE: value}
    # Devices named by index count as nvidia-smi does; the job's own order wins.
    pci = wanted and devices is not None and devices.pci_bus_order
    if pci and CUDA_ORDER not in base_env:
        env[CUDA_ORDER] = "PCI_BUS_ID"
    return env


def describe(devices: pb.Devices) -> str:
    """One line for the log: which devices, who chose them."""
    shown = ", ".join(f"{g.index} {g.uuid}".strip() for g in devices.gpus)
    return f"GPU {shown} ({devices.source}: {devices.note})"


def read(
    devices: pb.Devices, *, path: str | None = None
) -> tuple[list[pb.GpuReading], str]:
    """What nvidia-smi says of these devices now: (readings, "") or ([], why
    it failed); ([], "") where there is no nvidia-smi."""
    executable = shutil.which("nvidia-smi", path=path)
    if executable is None:
        return [], ""
    try:
        done = subprocess.run(
            [executable, f"--query-gpu={QUERY}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=QUERY_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return [], f"{executable} did not answer: {exc}"
    if done.returncode != 0:
        words = (done.stderr or done.stdout).strip().splitlines()
        said = words[-1] if words else "no output"
        return [], f"{executable} exited {done.returncode}: {said}"
    return mine(parse(done.stdout), devices), ""


def parse(text: str) -> list[pb.GpuReading]:
    """Rows of ``--query-gpu=index,uuid,utilization.gpu,memory.used,memory.total
    --format=csv,noheader,nounits``; a figure nvidia-smi cannot give
    (``[N/A]``) is 0."""
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.split(",")]
        if len(cells) != 5 or not cells[0].isdigit():
            continue
        rows.append(
            pb.GpuReading(
                index=int(cells[0]),
                uuid=cells[1],
                utilization=_number(cells[2]),
                memory_used_mib=_number(cells[3]),
                memory_total_mib=_number(cells[4]),
            )
        )
    return rows


def mine(rows: list[pb.GpuReading], devices: pb.Devices) -> list[pb.GpuReading]:
    """The rows of the task's own devices, in the order the master named them.

    By UUID where known; else by index, unless the container sees its own
    devices only (YARN assigned or exposed them), where every row is its.
    """
    uuids = [g.uuid for g in devices.gpus]
    if all(uuids):
        by_uuid = {r.uuid: r for r in rows}
        return [by_uuid[u] for u in uuids if u in by_uuid]
    if devices.source in ("yarn", "docker"):
        return rows
    by_index = {r.index: r for r in rows}
    return [by_index[g.index] for g in devices.gpus if g.index in by_index]


def _number(cell: str) -> float:
    try:
        return float(cell)
    except ValueError:
        return 0.0
