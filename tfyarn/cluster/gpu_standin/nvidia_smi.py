"""A stand-in ``nvidia-smi`` for machines without a GPU.

The local cluster copies this file, executable, as ``nvidia-smi`` into each
node's GPU directory, beside ``gpu.xml`` (one device's block of ``nvidia-smi -q
-x``) and ``state.json`` (the node's devices). YARN's GPU discovery runs it as
the real one (``-q -x``), tasks query it (``--query-gpu=... --format=csv``), and
people read its plain table. Its output has the exact layout of a real
``nvidia-smi`` 580 on an H200 (``tests/data/nvidia-h200/``), for as many
devices as ``state.json`` lists, each with its own minor number, UUID and bus
id; utilisation and memory in use are read from ``state.json`` at every call,
so tests can set them. ``state.json``'s ``fail`` (a message) makes every call
fail as a real one does when it cannot reach the driver: the message on
stderr, exit code ``fail_code`` (9: the driver is not loaded).

Standard library only: it runs with whatever Python starts the cluster, and
imports nothing of tfyarn.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from string import Template
from typing import Any

HERE = Path(__file__).resolve().parent
STATE = "state.json"
GPU_BLOCK = "gpu.xml"

# Exit codes of the real nvidia-smi.
EXIT_BAD_ARGUMENT = 2
EXIT_NO_DRIVER = 9

_HEADER = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v13.dtd">
<nvidia_smi_log>
\t<timestamp>{timestamp}</timestamp>
\t<driver_version>{driver}</driver_version>
\t<cuda_version>{cuda}</cuda_version>
\t<attached_gpus>{count}</attached_gpus>
"""

_BAR = "+" + "-" * 89 + "+"
_CELLS = "+" + "-" * 41 + "+" + "-" * 24 + "+" + "-" * 22 + "+"
_TABLE_HEAD = [
    (
        "| GPU  Name                 Persistence-M | Bus-Id          Disp.A |"
        " Volatile Uncorr. ECC |"
    ),
    (
        "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage |"
        " GPU-Util  Compute M. |"
    ),
    (
        "|                                         |                        |"
        "               MIG M. |"
    ),
    "|" + "=" * 41 + "+" + "=" * 24 + "+" + "=" * 22 + "|",
]
_PROCESSES = [
    _BAR,
    "| Processes:" + " " * 78 + "|",
    (
        "|  GPU   GI   CI              PID   Type   Process name"
        "                        GPU Memory |"
    ),
    "|        ID   ID" + " " * 63 + "Usage      |",
    "|" + "=" * 89 + "|",
    "|  No running processes found" + " " * 61 + "|",
    _BAR,
]

# --query-gpu fields: (CSV header, unit shown unless nounits, value of a device).
_FIELDS: dict[str, tuple[str, str, Any]] = {
    "index": ("index", "", lambda d, s: d["index"]),
    "uuid": ("uuid", "", lambda d, s: d["uuid"]),
    "name": ("name", "", lambda d, s: d.get("name", "NVIDIA H200")),
    "pci.bus_id": ("pci.bus_id", "", lambda d, s: d["bus_id"]),
    "gpu_bus_id": ("pci.bus_id", "", lambda d, s: d["bus_id"]),
    "serial": ("serial", "", lambda d, s: d["serial"]),
    "driver_version": ("driver_version", "", lambda d, s: s["driver_version"]),
    "count": ("count", "", lambda d, s: len(s["devices"])),
    "memory.total": ("memory.total [MiB]", " MiB", lambda d, s: d["memory_total"]),
    "memory.used": ("memory.used [MiB]", " MiB", lambda d, s: d["memory_used"]),
    "memory.free": ("memory.free [MiB]", " MiB", lambda d, s: _free(d)),
    "memory.reserved": (
        "memory.reserved [MiB]",
        " MiB",
        lambda d, s: d["memory_reserved"],
    ),
    "utilization.gpu": ("utilization.gpu [%]", " %", lambda d, s: d["utilization"]),
    "utilization.memory": (
        "utilization.memory [%]",
        " %",
        lambda d, s: d["memory_utilization"],
    ),
    "temperature.gpu": ("temperature.gpu", "", lambda d, s: 34),
}


def _free(device: dict[str, Any]) -> int:
    # What an idle device has free is not total - reserved to the MiB (the
    # driver rounds each): it is part of the device's description.
    return int(device["memory_free_idle"] - device["memory_used"])


def load_state(directory: Path = HERE) -> dict[str, Any]:
    state: dict[str, Any] = json.loads((directory / STATE).read_text())
    return state


def xml(state: dict[str, Any], *, directory: Path = HERE) -> str:
    """``nvidia-smi -q -x``."""
    block = Template((directory / GPU_BLOCK).read_text())
    out = [
        _HEADER.format(
            timestamp=_timestamp(state),
            driver=state["driver_version"],
            cuda=state["cuda_version"],
            count=len(state["devices"]),
        )
    ]
    for device in state["devices"]:
        values = {**device, "memory_free": _free(device)}
        out.append(block.substitute(values) + "\n")
    out.append("</nvidia_smi_log>\n")
    return "".join(out)


def table(state: dict[str, Any]) -> str:
    """Plain ``nvidia-smi``."""
    driver, cuda = state["driver_version"], state["cuda_version"]
    lines = [
        _timestamp(state) + " " * 7,
        _BAR,
        (
            f"| NVIDIA-SMI {driver:<23}Driver Version: {driver:<15}"
            f"CUDA Version: {cuda:<9}|"
        ),
        _CELLS,
        *_TABLE_HEAD,
    ]
    for d in state["devices"]:
        name = d.get("name", "NVIDIA H200")
        lines += [
            f"|{d['index']:>4}  {name:<31}On  |{d['bus_id']:>19} Off |{0:>21} |",
            (
                f"| N/A   34C    P0            122W /  700W |{d['memory_used']:>8}MiB / "
                f"{d['memory_total']:>6}MiB |{d['utilization']:>7}%      Default |"
            ),
            (
                "|                                         |                        |"
                "             Disabled |"
            ),
            _CELLS,
        ]
    lines += ["", *_PROCESSES]
    return "\n".join(lines) + "\n"


def query(state: dict[str, Any], fields: list[str], fmt: list[str]) -> str:
    """``--query-gpu=FIELDS --format=csv[,noheader][,nounits]``."""
    out = []
    if "noheader" not in fmt:
        out.append(", ".join(_FIELDS[f][0] for f in fields))
    units = "nounits" not in fmt
    for d in state["devices"]:
        values = []
        for name in fields:
            _, unit, value = _FIELDS[name]
            values.append(f"{value(d, state)}{unit if units else ''}")
        out.append(", ".join(values))
    return "\n".join(out) + "\n"


def listing(state: dict[str, Any]) -> str:
    """``nvidia-smi -L``."""
    return "".join(
        f"GPU {d['index']}: {d.get('name', 'NVIDIA H200')} (UUID: {d['uuid']})\n"
        for d in state["devices"]
    )


def select(state: dict[str, Any], ids: str) -> dict[str, Any]:
    """``-i ID[,ID]``: devices by index, UUID or bus id."""
    wanted = [i.strip() for i in ids.split(",") if i.strip()]
    chosen = [
        d
        for d in state["devices"]
        if {str(d["index"]), d["uuid"], d["bus_id"]} & set(wanted)
    ]
    if len(chosen) != len(wanted):
        raise LookupError("No devices were found")
    return {**state, "devices": chosen}


def _timestamp(state: dict[str, Any]) -> str:
    when = state.get("timestamp")
    if when:
        return str(when)
    return time.strftime("%a %b %d %H:%M:%S %Y", time.localtime())


def _option(args: list[str], *names: str) -> str | None:
    """The value of ``--name=V``, ``--name V`` or ``-n V``; None if absent."""
    for i, arg in enumerate(args):
        for name in names:
            if arg.startswith(name + "="):
                return arg.split("=", 1)[1]
            if arg == name and i + 1 < len(args):
                return args[i + 1]
    return None


def main(argv: list[str], directory: Path = HERE) -> int:
    args = argv[1:]
    state = load_state(directory)
    if state.get("fail"):
        sys.stderr.write(str(state["fail"]).rstrip("\n") + "\n")
        return int(state.get("fail_code") or EXIT_NO_DRIVER)
    ids = _option(args, "--id", "-i")
    if ids is not None:
        try:
            state = select(state, ids)
        except LookupError as exc:
            sys.stdout.write(f"{exc}\n")
            return 6
    fields = _option(args, "--query-gpu")
    if fields is not None:
        names = [f.strip() for f in fields.split(",") if f.strip()]
        unknown = [f for f in names if f not in _FIELDS]
        if unknown:
            sys.stdout.write(f'Field "{unknown[0]}" is not a valid field to query.\n')
            return EXIT_BAD_ARGUMENT
        fmt = (_option(args, "--format") or "").split(",")
        if "csv" not in fmt:
            sys.stdout.write('"--format" must be given with "csv"\n')
            return EXIT_BAD_ARGUMENT
        sys.stdout.write(query(state, names, fmt))
        return 0
    flags = {a for a in args if a.startswith("-")} - {"-i", "--id"}
    flags = {f for f in flags if not f.startswith(("--id=", "-i="))}
    if flags in ({"-q", "-x"}, {"--query", "--xml-format"}, {"-q", "--xml-format"}):
        sys.stdout.write(xml(state, directory=directory))
        return 0
    if flags in ({"-L"}, {"--list-gpus"}):
        sys.stdout.write(listing(state))
        return 0
    if not flags:
        sys.stdout.write(table(state))
        return 0
    sys.stderr.write(
        f"this stand-in nvidia-smi (tfyarn's local cluster) knows -q -x, -L, "
        f"--query-gpu=... --format=csv[,noheader][,nounits], -i and no "
        f"arguments, not {' '.join(args)}\n"
    )
    return EXIT_BAD_ARGUMENT


if __name__ == "__main__":
    sys.exit(main(sys.argv))
