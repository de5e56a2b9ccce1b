"""High availability as production runs it, on the local cluster (``--ha``).

HDFS: two NameNodes, ``nn1`` and ``nn2``, behind the name service
``hdfs://tfyarn``. The active one writes its edits to a JournalNode (the
quorum journal Hadoop's HA guide describes; one here, since the rehearsals
kill NameNodes, not journals) and the standby tails them. A failover
controller (ZKFC) beside each NameNode watches its health and holds the
active lock in ZooKeeper: when the active NameNode dies, its controller
gives the lock up and the other makes its NameNode active. Fencing is
``shell(/bin/true)``: the journal itself refuses writes from an old active
(its epoch is stale), which is why Hadoop recommends no more with it.

YARN: two ResourceManagers, ``rm1`` and ``rm2``, elect the active one through
ZooKeeper (the embedded elector: no separate controller) and keep their
applications in ZooKeeper (``ZKRMStateStore``), so the one that takes over
recovers them, work-preserving, from where the other left them.

Both pairs run on the master address, on ports of their own (``PORTS`` in
``tfyarn.cluster._settings``); each member learns its id from its command
line (``-D dfs.ha.namenode.id=nn2``), so the pair shares one configuration.

With ``--secure`` every daemon of both pairs runs with Kerberos (the
principals are ``tfyarn.cluster._secure_conf``'s) and HDFS's web servers speak
HTTPS only: each NameNode and the JournalNode on a port of its own
(``tfyarn.cluster._secure.secure_ports``), which the probes here use.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

from tfyarn.cluster import _probe, _process
from tfyarn.cluster._process import Daemon
from tfyarn.cluster._secure import secure_ports
from tfyarn.cluster._settings import ClusterSettings
from tfyarn.cluster._status import Instance

#: The name service of an HA cluster: ``fs.defaultFS`` is ``hdfs://tfyarn``.
NAMESERVICE = "tfyarn"
#: The ResourceManagers' cluster id in ZooKeeper.
YARN_CLUSTER_ID = "tfyarn"
# How long a dead ResourceManager holds the active lock: its ZooKeeper
# session's timeout (Hadoop's default is 10 s; ZooKeeper grants at least two
# of its 1 s ticks).
RM_ZK_TIMEOUT_MS = 5000
#: Daemons an HA start runs before the NameNodes.
COORDINATORS = ("zookeeper", "journalnode")


@dataclasses.dataclass(frozen=True)
class Member:
    """One member of an HA pair: its id, its daemon's key and its ports' names
    (``web_https``: its web port on a secure cluster, one of ``secure_ports``).
    ``https``: whether the web port it comes with (``namenode_webs``) speaks
    HTTPS."""

    id: str
    key: str
    rpc: str
    web: str
    web_https: str = ""
    https: bool = False

    @property
    def scheme(self) -> str:
        """``https`` or ``http``: how to reach its web port."""
        return "https" if self.https else "http"


NAMENODES = (
    Member("nn1", "namenode", "namenode_rpc", "namenode_http", "namenode_https"),
    Member("nn2", "namenode2", "namenode2_rpc", "namenode2_http", "namenode2_https"),
)
RESOURCEMANAGERS = (
    Member("rm1", "resourcemanager", "rm", "rm_web"),
    Member("rm2", "resourcemanager2", "rm2", "rm2_web"),
)
# ResourceManager address keys -> the port names of rm1 (rm2's carry "rm2").
_RM_ADDRESS_KEYS = {
    "address": "rm",
    "scheduler.address": "rm_scheduler",
    "resource-tracker.address": "rm_tracker",
    "admin.address": "rm_admin",
    "webapp.address": "rm_web",
}


def _prop(name: str, value: object) -> str:
    return (
        f"  <property><name>{escape(name)}</name>"
        f"<value>{escape(str(value))}</value></property>"
    )


def _lines(props: Mapping[str, object]) -> str:
    return "\n".join(_prop(k, v) for k, v in props.items())


def _rm_port(member: Member, key: str) -> str:
    name = _RM_ADDRESS_KEYS[key]
    return name if member.id == "rm1" else name.replace("rm", "rm2", 1)


def default_fs(settings: ClusterSettings, master: str) -> str:
    """``fs.defaultFS``: the name service, or the one NameNode's address."""
    if settings.ha:
        return f"hdfs://{NAMESERVICE}"
    return f"hdfs://{master}:{settings.resolved_ports()['namenode_rpc']}"


def zookeeper_address(settings: ClusterSettings, master: str) -> str:
    return f"{master}:{settings.resolved_ports()['zookeeper']}"


def core_properties(settings: ClusterSettings, master: str) -> str:
    """core-site.xml's HA keys: where the failover controllers find ZooKeeper."""
    if not settings.ha:
        return ""
    return _lines(
        {
            "ha.zookeeper.quorum": zookeeper_address(settings, master),
            # A failover controller checks its NameNode every second (Hadoop's
            # default): a dead NameNode loses the lock within about a second.
            "ha.health-monitor.check-interval.ms": 1000,
        }
    )


def hdfs_properties(settings: ClusterSettings, base_dir: Path, master: str) -> str:
    """hdfs-site.xml's NameNode keys: one NameNode's addresses, or the name
    service with both NameNodes, the journal and automatic failover."""
    ports = settings.resolved_ports()
    if not settings.ha:
        return _lines(
            {
                "dfs.namenode.rpc-address": f"{master}:{ports['namenode_rpc']}",
                "dfs.namenode.http-address": f"{master}:{ports['namenode_http']}",
            }
        )
    ns = NAMESERVICE
    props: dict[str, object] = {
        "dfs.nameservices": ns,
        f"dfs.ha.namenodes.{ns}": ",".join(m.id for m in NAMENODES),
    }
    for m, zkfc in zip(NAMENODES, ("zkfc", "zkfc2"), strict=True):
        props[f"dfs.namenode.rpc-address.{ns}.{m.id}"] = f"{master}:{ports[m.rpc]}"
        props[f"dfs.namenode.http-address.{ns}.{m.id}"] = f"{master}:{ports[m.web]}"
        props[f"dfs.namenode.name.dir.{ns}.{m.id}"] = name_dir(base_dir, m)
        props[f"dfs.ha.zkfc.port.{ns}.{m.id}"] = ports[zkfc]
    journal = f"{master}:{ports['journalnode_rpc']}"
    props.update(
        {
            "dfs.namenode.shared.edits.dir": f"qjournal://{journal}/{ns}",
            "dfs.journalnode.rpc-address": journal,
            "dfs.journalnode.http-address": f"{master}:{ports['journalnode_http']}",
            "dfs.journalnode.edits.dir": base_dir / "data" / "journal",
            f"dfs.client.failover.proxy.provider.{ns}": (
                "org.apache.hadoop.hdfs.server.namenode.ha."
                "ConfiguredFailoverProxyProvider"
            ),
            "dfs.ha.automatic-failover.enabled": "true",
            "dfs.ha.fencing.methods": "shell(/bin/true)",
            # The standby reads the journal every second (Hadoop: 60 s), so a
            # NameNode taking over has little to catch up on.
            "dfs.ha.tail-edits.period": "1s",
        }
    )
    if settings.secure:  # HTTPS_ONLY: the web servers above stay closed
        https = secure_ports(settings)
        for m in NAMENODES:
            address = f"{master}:{https[m.web_https]}"
            props[f"dfs.namenode.https-address.{ns}.{m.id}"] = address
        props["dfs.journalnode.https-address"] = (
            f"{master}:{https['journalnode_https']}"
        )
    return _lines(props)


def yarn_properties(settings: ClusterSettings, master: str, leveldb_store: Path) -> str:
    """yarn-site.xml's ResourceManager keys: one ResourceManager with a
    LevelDB store, or the pair with ZooKeeper for election and state."""
    ports = settings.resolved_ports()
    recovery = {
        "yarn.resourcemanager.recovery.enabled": "true",
        "yarn.resourcemanager.work-preserving-recovery.enabled": "true",
    }
    if not settings.ha:
        props: dict[str, object] = {"yarn.resourcemanager.hostname": master}
        for key, port in _RM_ADDRESS_KEYS.items():
            props[f"yarn.resourcemanager.{key}"] = f"{master}:{ports[port]}"
        return _lines(
            {
                **props,
                **recovery,
                "yarn.resourcemanager.store.class": (
                    "org.apache.hadoop.yarn.server.resourcemanager.recovery."
                    "LeveldbRMStateStore"
                ),
                "yarn.resourcemanager.leveldb-state-store.path": leveldb_store,
            }
        )
    props = {
        "yarn.resourcemanager.ha.enabled": "true",
        "yarn.resourcemanager.ha.rm-ids": ",".join(m.id for m in RESOURCEMANAGERS),
        "yarn.resourcemanager.cluster-id": YARN_CLUSTER_ID,
    }
    for m in RESOURCEMANAGERS:
        props[f"yarn.resourcemanager.hostname.{m.id}"] = master
        for key in _RM_ADDRESS_KEYS:
            number = ports[_rm_port(m, key)]
            props[f"yarn.resourcemanager.{key}.{m.id}"] = f"{master}:{number}"
    return _lines(
        {
            **props,
            **recovery,
            "yarn.resourcemanager.store.class": (
                "org.apache.hadoop.yarn.server.resourcemanager.recovery.ZKRMStateStore"
            ),
            "hadoop.zk.address": zookeeper_address(settings, master),
            "hadoop.zk.timeout-ms": RM_ZK_TIMEOUT_MS,
            "yarn.resourcemanager.zk-timeout-ms": RM_ZK_TIMEOUT_MS,
        }
    )


def zoo_cfg(settings: ClusterSettings, base_dir: Path, master: str) -> str:
    """ZooKeeper's configuration: one server, its data under the cluster's."""
    port = settings.resolved_ports()["zookeeper"]
    return "\n".join(
        [
            "# tfyarn local cluster: one ZooKeeper server for the failover",
            "# controllers and the ResourceManagers (generated; do not edit).",
            "tickTime=1000",
            f"dataDir={zookeeper_dir(base_dir)}",
            f"clientPort={port}",
            f"clientPortAddress={master}",
            "maxClientCnxns=0",
            # Its admin web server would take port 8080 from everyone else.
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr",
            "",
        ]
    )


def name_dir(base_dir: Path, member: Member) -> Path:
    """Where NameNode ``member`` keeps its image."""
    suffix = "" if member.id == "nn1" else "2"
    return base_dir / "data" / f"namenode{suffix}"


def zookeeper_dir(base_dir: Path) -> Path:
    """ZooKeeper's data: the election locks and the ResourceManagers' state."""
    return base_dir / "data" / "zookeeper"


def zoo_cfg_path(conf_dir: Path) -> Path:
    return conf_dir / "zoo.cfg"


def daemon_args(daemon: Daemon, conf_dir: Path) -> list[str]:
    """What follows a daemon's main class: ZooKeeper's configuration file, or
    the member id of a NameNode, failover controller or ResourceManager."""
    if daemon.name == "zookeeper":
        return [str(zoo_cfg_path(conf_dir))]
    return list(daemon.args)


# -- which member is active ------------------------------------------------------

# What a failover controller logs when its NameNode's health changes
# (ZKFailoverController): a NameNode is a failover target once HEALTHY.
_HEALTH_LINE = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),\d+ .*Local service NameNode at \S+ "
    r"entered state: (\w+)",
    re.MULTILINE,
)
_HEALTHY = "SERVICE_HEALTHY"


def controller_missing(base_dir: Path, namenode: Instance, since: float) -> str | None:
    """None once ``namenode``'s failover controller found it healthy at or
    after ``since`` (epoch seconds; a NameNode just restarted answers on the
    web before its controller would hand it the active role); else what is
    missing."""
    zkfc = "zkfc" if namenode.key == "namenode" else "zkfc2"
    log = _process.log_file(base_dir, zkfc)
    try:
        with open(log, "rb") as stream:
            stream.seek(max(0, _process.log_size(log) - 65536))
            tail = stream.read().decode(errors="replace")
    except OSError:
        return f"no log of its failover controller ({log})"
    # The log's times are local, to the second.
    floor = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(int(since)))
    states = [state for stamp, state in _HEALTH_LINE.findall(tail) if stamp >= floor]
    if states and states[-1] == _HEALTHY:
        return None
    last = states[-1] if states else "no health check since the restart"
    return f"its failover controller does not see it healthy yet ({last})"


def namenode_webs(settings: ClusterSettings) -> list[tuple[Member, int]]:
    """Each NameNode with its web port (one, ``nn1``, without HA): its HTTPS
    port on a secure cluster (HTTPS_ONLY), the member marked ``https``."""
    members = NAMENODES if settings.ha else NAMENODES[:1]
    if settings.secure:
        https = secure_ports(settings)
        return [
            (dataclasses.replace(m, https=True), https[m.web_https]) for m in members
        ]
    ports = settings.resolved_ports()
    return [(m, ports[m.web]) for m in members]


def rm_webs(settings: ClusterSettings) -> list[tuple[Member, int]]:
    """Each ResourceManager with its web port (one, ``rm1``, without HA)."""
    ports = settings.resolved_ports()
    members = RESOURCEMANAGERS if settings.ha else RESOURCEMANAGERS[:1]
    return [(m, ports[m.web]) for m in members]


def web_uis(settings: ClusterSettings, master: str) -> dict[str, str]:
    """The web UI of each member of both pairs, by title (a secure cluster's
    NameNodes: HTTPS)."""
    return {
        **{
            f"ResourceManager {m.id}": f"http://{master}:{port}"
            for m, port in rm_webs(settings)
        },
        **{
            f"NameNode {m.id}": f"{m.scheme}://{master}:{port}"
            for m, port in namenode_webs(settings)
        },
    }


def is_active(member: Member, port: int, master: str) -> bool | None:
    """Whether ``member`` (on web ``port``) is its pair's active one; None
    when it does not answer."""
    return _probe.is_active(port, master, https=member.https)


def states(webs: list[tuple[Member, int]], master: str) -> dict[str, str]:
    """Each member's HA state by id: ``active``, ``standby`` or ``down``."""
    out = {}
    for member, port in webs:
        answer = is_active(member, port, master)
        out[member.id] = "down" if answer is None else "active" if answer else "standby"
    return out


def active_namenode_web(settings: ClusterSettings, master: str) -> tuple[int, bool]:
    """The web port of the NameNode to ask about HDFS (the active one; nn1's
    while none is) and whether it speaks HTTPS (a secure cluster's do)."""
    webs = namenode_webs(settings)
    return active_web(webs, master) or webs[0][1], webs[0][0].https


def active_rm_web(settings: ClusterSettings, master: str) -> int:
    """The web port of the ResourceManager to ask about YARN (the active one;
    rm1's while none is)."""
    webs = rm_webs(settings)
    return active_web(webs, master) or webs[0][1]


def active_web(webs: list[tuple[Member, int]], master: str) -> int | None:
    """The web port of the active member (the only one without HA), or None."""
    if len(webs) == 1:
        return webs[0][1]
    for member, port in webs:
        if is_active(member, port, master):
            return port
    return None
