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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from tfyarn.client import nmweb
from tfyarn.client.connection import yarn_errors

_STARTING = re.compile(r"\bStarting (container_\w+)")
# skein's Java AM writes this; the master (`python -m am`) writes application.driver.log.
AM_LOG = "application.master.log"
# A job with more master attempts than this is not a tfyarn job (max 2 by default).
MAX_ATTEMPTS = 10


def container_id(app_id: str, attempt: int, number: int) -> str:
    """``application_<ts>_<seq>`` -> ``container_<ts>_<seq>_<attempt:02>_<number:06>``."""
    _, ts, seq = app_id.split("_")
    return f"container_{ts}_{seq}_{attempt:02d}_{number:06d}"


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
    """(node, its files) of the first node holding ``container``."""
    for node in nodes:
        try:
            return node, nmweb.log_files(node, container)
        except nmweb.NotOnNode:
            continue
    return None


def containers(
    app_id: str, nodes: Sequence[str]
) -> list[tuple[str, str, dict[str, int]]]:
    """(container, node, files) of every container of the application the
    nodes still hold: each master attempt's, then the ones it started."""
    found: dict[str, tuple[str, dict[str, int]]] = {}
    for attempt in range(1, MAX_ATTEMPTS + 1):
        am = container_id(app_id, attempt, 1)
        where = find_node(am, nodes)
        if where is None:
            break
        found[am] = where
        node, files = where
        if AM_LOG not in files:
            continue
        _, text = nmweb.parse_tail(nmweb.raw_log(node, am, AM_LOG))
        for cid in dict.fromkeys(_STARTING.findall(text.decode(errors="replace"))):
            if cid not in found:
                hit = find_node(cid, nodes)
                if hit is not None:
                    found[cid] = hit
    return [(c, n, f) for c, (n, f) in found.items()]


def yarn_logs_text(app_id: str, yarn: Any) -> str:
    """Every retained container log of the application, in ``yarn logs``' layout.

    Empty if no node holds the application (unknown, or its logs deleted).
    """
    nodes = [n for n in node_addresses(yarn) if nmweb.has_app(n, app_id)]
    return "\n".join(_texts(containers(app_id, nodes)))


def _texts(found: Iterable[tuple[str, str, dict[str, int]]]) -> Iterable[str]:
    for cid, node, files in found:
        for name in files:
            try:
                yield nmweb.raw_log(node, cid, name).decode(errors="replace")
            except nmweb.NotOnNode:
                continue  # deleted between the listing and now
