"""Ask the running daemons how they are, over their loopback HTTP endpoints.

Cheaper than a Hadoop command line (no JVM start on a 2-core machine) and
every call has a timeout.
"""

from __future__ import annotations

import dataclasses
import json
import ssl
import urllib.error
import urllib.request
from typing import Any

TIMEOUT_S = 5.0


def _unverified() -> ssl.SSLContext:
    # The secure cluster's NameNode serves HTTPS only, with its own self-signed
    # certificate; a loopback health probe has nothing to verify it against.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def get_json(
    port: int,
    path: str,
    *,
    timeout: float = TIMEOUT_S,
    host: str = "127.0.0.1",
    https: bool = False,
) -> Any | None:
    """GET ``http(s)://host:port/path`` as JSON; None if it does not answer."""
    scheme = "https" if https else "http"
    request = urllib.request.Request(
        f"{scheme}://{host}:{port}{path}", headers={"Accept": "application/json"}
    )
    context = _unverified() if https else None
    try:
        with urllib.request.urlopen(
            request, timeout=timeout, context=context
        ) as response:
            return json.loads(response.read().decode())
    except (OSError, ValueError, urllib.error.URLError):
        return None


def jmx_bean(
    port: int,
    bean: str,
    *,
    host: str = "127.0.0.1",
    https: bool = False,
    timeout: float = TIMEOUT_S,
) -> dict[str, Any] | None:
    """The first bean a daemon's ``/jmx?qry=Hadoop:<bean>`` answers with;
    None if it does not answer or has no such bean."""
    data = get_json(
        port, f"/jmx?qry=Hadoop:{bean}", host=host, https=https, timeout=timeout
    )
    beans = data.get("beans") if isinstance(data, dict) else None
    return beans[0] if beans and isinstance(beans[0], dict) else None


def is_active(
    port: int,
    host: str = "127.0.0.1",
    *,
    https: bool = False,
    timeout: float = TIMEOUT_S,
) -> bool | None:
    """Whether the NameNode or ResourceManager on ``port`` is its pair's active
    member (Hadoop's ``/isActive``: 200 when active, 405 when standby); None
    when it does not answer.

    Hadoop 3.1 has no ``/isActive`` (404; a standby ResourceManager first
    redirects to the active one's): there the NameNode's JMX and the
    ResourceManager's cluster info say it (:func:`ha_state`).
    """
    scheme = "https" if https else "http"
    context = _unverified() if https else None
    try:
        with urllib.request.urlopen(
            f"{scheme}://{host}:{port}/isActive", timeout=timeout, context=context
        ) as response:
            return bool(response.status == 200)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            state = ha_state(port, host, https=https, timeout=timeout)
            return None if state is None else state == "active"
        return False if exc.code == 405 else None
    except (OSError, ValueError, urllib.error.URLError):
        return None


def ha_state(
    port: int,
    host: str = "127.0.0.1",
    *,
    https: bool = False,
    timeout: float = TIMEOUT_S,
) -> str | None:
    """``active``, ``standby`` (lower case) from the NameNode's
    ``NameNodeStatus`` bean or else the ResourceManager's cluster info; None
    when neither answers."""
    status = jmx_bean(
        port,
        "service=NameNode,name=NameNodeStatus",
        host=host,
        https=https,
        timeout=timeout,
    )
    if status is not None:
        return str(status.get("State", "")).lower() or None
    info = get_json(
        port, "/ws/v1/cluster/info", host=host, https=https, timeout=timeout
    )
    if isinstance(info, dict) and "clusterInfo" in info:
        return str(info["clusterInfo"].get("haState", "")).lower() or None
    return None


@dataclasses.dataclass(frozen=True)
class HdfsHealth:
    safe_mode: str  # "" when HDFS accepts writes
    live_datanodes: int
    capacity_bytes: int
    free_bytes: int

    @property
    def ready(self) -> bool:
        return not self.safe_mode and self.live_datanodes > 0


def hdfs_health(
    namenode_web: int, host: str = "127.0.0.1", *, https: bool = False
) -> HdfsHealth | None:
    """HDFS's state from the NameNode's JMX (``https``: a secure cluster's
    HTTPS_ONLY NameNode)."""
    info = jmx_bean(
        namenode_web, "service=NameNode,name=NameNodeInfo", host=host, https=https
    )
    if info is None:
        return None
    try:
        live = len(json.loads(info.get("LiveNodes") or "{}"))
    except ValueError:
        live = 0
    return HdfsHealth(
        safe_mode=str(info.get("Safemode") or ""),
        live_datanodes=live,
        capacity_bytes=int(info.get("Total") or 0),
        free_bytes=int(info.get("Free") or 0),
    )


def datanode_registered(
    web: int, host: str = "127.0.0.1", *, https: bool = False
) -> bool:
    """Whether the DataNode whose web port is ``web`` has registered with its
    NameNode(s). The NameNode goes on counting a killed DataNode live for
    minutes, so its count cannot tell that a restarted one is back."""
    info = jmx_bean(web, "service=DataNode,name=DataNodeInfo", host=host, https=https)
    if info is None:
        return False
    try:
        actors = json.loads(info.get("BPServiceActorInfo") or "[]")
    except ValueError:
        return False
    return any(isinstance(a, dict) and a.get("ActorState") == "RUNNING" for a in actors)


@dataclasses.dataclass(frozen=True)
class NodeReport:
    node_id: str
    state: str
    memory_mb: int
    vcores: int
    gpus: int
    used_memory_mb: int
    used_vcores: int
    health: str
    labels: tuple[str, ...] = ()

    @property
    def host(self) -> str:
        return self.node_id.rsplit(":", 1)[0]


def _gpus(resource: dict[str, Any]) -> int:
    infos = (resource.get("resourceInformations") or {}).get("resourceInformation")
    for info in infos or []:
        if info.get("name") == "yarn.io/gpu":
            return int(info.get("value") or 0)
    return 0


def _resources(resource: dict[str, Any]) -> tuple[int, int, int]:
    """(memory MiB, vcores, GPUs) of one of a node report's resource objects."""
    return (
        int(resource.get("memory") or 0),
        int(resource.get("vCores") or 0),
        _gpus(resource),
    )


def _node_resources(node: dict[str, Any]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A node's (total, used) resources, each (memory MiB, vcores, GPUs).

    ``totalResource`` exists from Hadoop 3.3 on; before, the total is what is
    used plus what is available (``usedResource``/``availableResource``, or in
    Hadoop 3.0 only the flat ``usedMemoryMB``/``availMemoryMB`` fields).
    """
    if "usedResource" in node:
        used = _resources(node["usedResource"])
    else:
        used = (
            int(node.get("usedMemoryMB") or 0),
            int(node.get("usedVirtualCores") or 0),
            0,
        )
    if "totalResource" in node:
        return _resources(node["totalResource"]), used
    if "availableResource" in node:
        free = _resources(node["availableResource"])
    else:
        free = (
            int(node.get("availMemoryMB") or 0),
            int(node.get("availableVirtualCores") or 0),
            0,
        )
    return tuple(u + f for u, f in zip(used, free, strict=True)), used


def yarn_nodes(rm_web: int, host: str = "127.0.0.1") -> list[NodeReport] | None:
    """Every node the ResourceManager knows; None if the RM does not answer."""
    data = get_json(
        rm_web,
        "/ws/v1/cluster/nodes?states=NEW,RUNNING,UNHEALTHY,LOST,SHUTDOWN",
        host=host,
    )
    if data is None:
        return None
    nodes = ((data.get("nodes") or {}) or {}).get("node") or []
    reports = []
    for node in nodes:
        total, used = _node_resources(node)
        reports.append(
            NodeReport(
                node_id=str(node.get("id", "")),
                state=str(node.get("state", "")),
                memory_mb=total[0],
                vcores=total[1],
                gpus=total[2],
                used_memory_mb=used[0],
                used_vcores=used[1],
                health=str(node.get("healthReport") or ""),
                labels=tuple(node.get("nodeLabels") or ()),
            )
        )
    return reports
