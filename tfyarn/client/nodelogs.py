"""A job's logs read from the NodeManagers, for clusters without log aggregation.

There ``yarn logs`` finds nothing, but each NodeManager keeps the files of the
containers it ran (``yarn.nodemanager.log.retain-seconds``) and serves them
over its web service, finished containers included (:mod:`nmweb`). What is
missing is the list of containers: YARN forgets an ended application's
containers. skein's application master logs ``Starting container_...`` for
each one it launches, and its own container is ``..._<attempt>_000001``, so:
the nodes that hold the application, then each master attempt's log, then
every container it names. The result has ``yarn logs``' layout, which
:func:`tfyarn.client.tasklogs.split` already parses.

A secure NodeManager without Hadoop's native library (``libhadoop.so``; the
secure local cluster) lists a container's files but fails to open them
(HTTP 500, ``NoClassDefFoundError: SecureIOUtils``, measured on 3.4.3): then,
when the client runs on that node, the files are read from the NodeManager's
log dirs (``yarn.nodemanager.log-dirs``) directly.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from tfyarn.client import nmweb
from tfyarn.client.connection import yarn_errors
from tfyarn.contract.hadoop_conf import HadoopConf, explicit_conf_dir

_STARTING = re.compile(r"\bStarting (container_\w+)")
# skein's Java AM writes this; the master (`python -m am`) writes application.driver.log.
AM_LOG = "application.master.log"
# A job with more master attempts than this is not a tfyarn job (max 2 by default).
MAX_ATTEMPTS = 10
# The highest ResourceManager epoch (restarts and failovers with recovery)
# tried for a master container's id.
MAX_EPOCH = 32


def container_id(app_id: str, attempt: int, number: int, epoch: int = 0) -> str:
    """``application_<ts>_<seq>`` -> ``container_[e<epoch>_]<ts>_<seq>_<attempt>_<number>``.

    A ResourceManager that restarted or took over with its state recovered
    counts an epoch, and names the containers it grants with it.

    Examples
    --------
    >>> container_id("application_1700000000000_0007", 1, 1)
    'container_1700000000000_0007_01_000001'
    >>> container_id("application_1700000000000_0007", 2, 1, epoch=1)
    'container_e01_1700000000000_0007_02_000001'
    """
    _, ts, seq = app_id.split("_")
    mark = f"e{epoch:02d}_" if epoch else ""
    return f"container_{mark}{ts}_{seq}_{attempt:02d}_{number:06d}"


def node_addresses(yarn: Any) -> list[str]:
    """Every NodeManager's web address (``host:port``) the ResourceManager knows."""
    # Not only RUNNING: a node that went down after the job may come back.
    states = ["RUNNING", "UNHEALTHY", "DECOMMISSIONING", "LOST", "SHUTDOWN"]
    with yarn_errors():
        nodes = yarn.get_nodes(states=states)
    found = (getattr(n, "http_address", None) for n in nodes)
    return sorted({str(a) for a in found if a})


def find_node(
    container: str, nodes: Sequence[str]
) -> tuple[str, dict[str, int]] | None:
    """(node, its files) of the first node holding ``container``.

    A NodeManager asked for a container of an application it knows but never
    ran lists no files (Hadoop 3.1, not an error): not held either. Every
    container it ran has some (``launch_container.sh`` at least).
    """
    for node in nodes:
        try:
            files = nmweb.log_files(node, container)
        except nmweb.NotOnNode:
            continue
        if files:
            return node, files
    return None


def containers(
    app_id: str, nodes: Sequence[str]
) -> list[tuple[str, str, dict[str, int]]]:
    """(container, node, files) of every container of the application the
    nodes still hold: each master attempt's, then the ones it started."""
    found: dict[str, tuple[str, dict[str, int]]] = {}
    epoch = 0
    for attempt in range(1, MAX_ATTEMPTS + 1):
        located = _find_master(app_id, attempt, nodes, epoch)
        if located is None:
            break
        am, epoch, where = located
        found[am] = where
        node, files = where
        if AM_LOG not in files:
            continue
        text = read_log(app_id, node, am, AM_LOG)
        for cid in dict.fromkeys(_STARTING.findall(text)):
            if cid not in found:
                hit = find_node(cid, nodes)
                if hit is not None:
                    found[cid] = hit
    return [(c, n, f) for c, (n, f) in found.items()]


def _find_master(
    app_id: str, attempt: int, nodes: Sequence[str], since_epoch: int
) -> tuple[str, int, tuple[str, dict[str, int]]] | None:
    """(container, epoch, (node, files)) of the attempt's master container.

    Its id is not known, only guessed: the epoch is tried from the earlier
    attempt's up (epochs only grow), to ``MAX_EPOCH``.
    """
    for epoch in range(since_epoch, MAX_EPOCH + 1):
        am = container_id(app_id, attempt, 1, epoch)
        where = find_node(am, nodes)
        if where is not None:
            return am, epoch, where
    return None


def yarn_logs_text(app_id: str, yarn: Any) -> str:
    """Every retained container log of the application, in ``yarn logs``' layout.

    Empty if no node holds the application (unknown, or its logs deleted).
    """
    nodes = [n for n in node_addresses(yarn) if nmweb.has_app(n, app_id)]
    return "\n".join(_texts(app_id, containers(app_id, nodes)))


def _texts(
    app_id: str, found: Iterable[tuple[str, str, dict[str, int]]]
) -> Iterable[str]:
    for cid, node, files in found:
        for name in files:
            try:
                yield read_log(app_id, node, cid, name, layout=True)
            except nmweb.NotOnNode:
                continue  # deleted between the listing and now


def read_log(
    app_id: str, node: str, container: str, name: str, *, layout: bool = False
) -> str:
    """One file's text (in ``yarn logs``' layout with ``layout``), from the
    node's web service or, if that cannot open it, the local log dirs."""
    try:
        raw = nmweb.raw_log(node, container, name)
    except nmweb.NotOnNode:
        raise
    except nmweb.NodeLogsError:
        data = local_copy(app_id, container, name)
        if data is None:
            raise
        if not layout:
            return data.decode(errors="replace")
        return (
            f"Container: {container} on {node}\nLogAggregationType: LOCAL\n"
            f"LogType:{name}\nLogLength:{len(data)}\nLogContents:\n"
            f"{data.decode(errors='replace')}End of LogType:{name}\n"
        )
    if layout:
        return raw.decode(errors="replace")
    return nmweb.parse_tail(raw)[1].decode(errors="replace")


def log_dirs() -> list[Path]:
    """The NodeManagers' ``yarn.nodemanager.log-dirs`` per the client's config."""
    conf = explicit_conf_dir()
    if not conf:
        return []
    value = HadoopConf(conf).yarn.get("yarn.nodemanager.log-dirs", "")
    return [Path(d.strip().removeprefix("file://")) for d in value.split(",") if d]


def local_path(app_id: str, container: str, name: str) -> Path | None:
    """Where the node keeps this file, if it is on this machine."""
    for d in log_dirs():
        path = d / app_id / container / name
        if path.is_file():
            return path
    return None


def local_copy(app_id: str, container: str, name: str) -> bytes | None:
    path = local_path(app_id, container, name)
    try:
        return path.read_bytes() if path else None
    except OSError:
        return None
