"""Whether a cluster's stop left any of its processes running.

A pid alone does not name a process for long here: the kernel hands out at
most 32768 of them, and a test run starts so many processes that the pids of
a cluster's daemons are reused by other lanes' processes minutes after the
daemons exit (a secure cluster's "left" DataNode, ResourceManager and
NodeManager were three other JVMs). So a process is named by its pid and its
start time.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tfyarn.cluster import _process
from tfyarn.contract.local_cluster import command_line


def start_time(pid: int) -> int | None:
    """When ``pid`` started (clock ticks after boot), or None if it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Fields after the name in (...), which may hold spaces: starttime is the 22nd.
    return int(stat.rsplit(")", 1)[1].split()[19])


def identities(pids: Iterable[int]) -> dict[int, int]:
    """The running processes among ``pids``, each with its start time."""
    found = {pid: start_time(pid) for pid in pids if pid}
    return {pid: started for pid, started in found.items() if started is not None}


def still_running(pid: int, began: int | None) -> bool:
    """Whether the process that started at ``began`` as ``pid`` still runs
    (a zombie does not; another process under the same pid does not count)."""
    return began is not None and not _process.is_gone(pid) and start_time(pid) == began


def left_running(started: dict[int, int], base_dir: Path) -> list[int]:
    """Those of ``started`` that still run as the same process, and any process
    the cluster in ``base_dir`` left behind (containers, strays)."""
    left = [pid for pid, began in started.items() if still_running(pid, began)]
    return left + [p for p in _process.strays(base_dir) if p not in left]


def describe(pids: Iterable[int]) -> str:
    """Each pid with its program and, for a JVM, its main class (the
    command line's start and end: the middle is the class path)."""
    parts = []
    for pid in pids:
        argv = command_line(pid)
        shown = (
            " ".join(argv) if len(argv) <= 4 else f"{argv[0]} ... {' '.join(argv[-3:])}"
        )
        parts.append(f"{pid} {shown[:300]}")
    return "; ".join(parts)
