"""What a local cluster is: its size, its ports and where it lives."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tfyarn.cluster import _scheduler, _versions
from tfyarn.contract import local_cluster
from tfyarn.errors import ClusterError

# Hadoop's usual ports, so the web UIs are where a Hadoop user looks for them.
# name -> (default port, daemon that binds it, what it is)
PORTS: dict[str, tuple[int, str, str]] = {
    "namenode_rpc": (8020, "namenode", "NameNode RPC (fs.defaultFS)"),
    "namenode_http": (9870, "namenode", "NameNode web UI"),
    "datanode": (9866, "datanode", "DataNode data transfer"),
    "datanode_http": (9864, "datanode", "DataNode web UI"),
    "datanode_ipc": (9867, "datanode", "DataNode IPC"),
    "rm": (8032, "resourcemanager", "ResourceManager client RPC"),
    "rm_scheduler": (8030, "resourcemanager", "ResourceManager scheduler RPC"),
    "rm_tracker": (8031, "resourcemanager", "ResourceManager resource tracker"),
    "rm_admin": (8033, "resourcemanager", "ResourceManager admin RPC"),
    "rm_web": (8088, "resourcemanager", "ResourceManager web UI"),
    "nm": (8041, "nodemanager", "NodeManager container manager"),
    "nm_localizer": (8040, "nodemanager", "NodeManager localizer"),
    "nm_web": (8042, "nodemanager", "NodeManager web UI"),
    # Bound only by an HA cluster (``ha``): the second NameNode and
    # ResourceManager beside the first on the master address, and what
    # automatic failover needs.
    "namenode2_rpc": (8021, "namenode2", "NameNode nn2 RPC"),
    "namenode2_http": (9871, "namenode2", "NameNode nn2 web UI"),
    "journalnode_rpc": (8485, "journalnode", "JournalNode RPC (shared edits)"),
    "journalnode_http": (8480, "journalnode", "JournalNode web UI"),
    "zookeeper": (2181, "zookeeper", "ZooKeeper client port"),
    "zkfc": (8019, "zkfc", "failover controller of nn1"),
    "zkfc2": (8029, "zkfc2", "failover controller of nn2"),
    "rm2": (8132, "resourcemanager2", "ResourceManager rm2 client RPC"),
    "rm2_scheduler": (8130, "resourcemanager2", "ResourceManager rm2 scheduler RPC"),
    "rm2_tracker": (8131, "resourcemanager2", "ResourceManager rm2 resource tracker"),
    "rm2_admin": (8133, "resourcemanager2", "ResourceManager rm2 admin RPC"),
    "rm2_web": (8188, "resourcemanager2", "ResourceManager rm2 web UI"),
}

SETTINGS_FILE = "cluster.json"
# Below this the ResourceManager's token renewer would spin (it renews at 90%).
MIN_TOKEN_LIFETIME_S = 20


#: Where the cluster lives unless told otherwise: ``$TFYARN_CLUSTER_HOME``,
#: else ``$XDG_DATA_HOME/tfyarn/cluster``. The contract says it, because the
#: Hadoop configuration reader looks for the running cluster there too.
default_base_dir = local_cluster.default_home


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterSettings:
    """Size and ports of a local cluster.

    The defaults fit a 2 ps + 4 worker job of small TensorFlow tasks, or a dozen
    one-vcore tasks, on a 2-core, 24 GiB machine: vcores are a scheduling unit
    here, not a promise of cores.

    Parameters
    ----------
    nodes : int
        0 (the default): one NodeManager and DataNode on loopback in the root
        namespace. N >= 1: N hosts, each a network namespace with its own
        address and host name running a NodeManager and a DataNode with a plain
        environment (no client virtualenv on PATH); the master daemons bind the
        cluster's bridge address. Needs root and ``ip``.
    memory_mb : int
        Memory each NodeManager offers to containers, in MiB.
    vcores : int
        Virtual cores the NodeManager offers.
    gpus : int
        Count of ``yarn.io/gpu`` the NodeManager advertises (no devices behind
        it: it lets GPU scheduling be exercised on a CPU-only machine).
    port_offset : int
        Added to every default port, to run a second cluster beside the first.
    ports : mapping of str to int
        Explicit ports by name (see ``PORTS``); they win over the offset.
    min_allocation_mb : int
        YARN's smallest container; requests are rounded up to a multiple of it.
    am_max_attempts : int
        The most application-master attempts an application may ask for.
    max_am_resource_percent : float
        Share of the node application masters may hold together.
    secure : bool
        Kerberos: the cluster runs its own KDC on loopback and its daemons in
        secure mode (``tfyarn.cluster._secure``). Loopback only (``nodes=0``);
        with ``ha`` too.
    token_lifetime_s : int
        With ``secure``: delegation tokens' maximum lifetime in seconds (renew
        interval: half of it), to rehearse long jobs in minutes. 0: Hadoop's
        defaults (renew every day, at most 7 days).
    queues : mapping of str to float
        Capacity-scheduler leaf queues, name -> capacity in percent (adding up
        to 100). Empty: one queue ``default`` with the whole cluster.
    labels : mapping of str to str
        Node labels of a multi-host cluster, host name (``node1``) -> label
        (non-exclusive; see ``tfyarn.cluster._scheduler``).
    container_executor : str
        Path of Hadoop's ``container-executor`` binary: the NodeManager runs
        containers through the LinuxContainerExecutor with YARN's Docker
        runtime (``tfyarn.cluster._lce``). Empty: the DefaultContainerExecutor,
        no Docker. Loopback only, not with ``secure``.
    preemption : bool
        The capacity scheduler's preemption monitor, quick (see
        ``tfyarn.cluster._scheduler.PREEMPTION``): a queue starved below its
        capacity takes containers back from queues that borrowed. Off by default.
    ha : bool
        High availability (``tfyarn.cluster._ha``): two NameNodes behind the
        name service ``hdfs://tfyarn`` and two ResourceManagers, with a
        JournalNode, ZooKeeper and failover controllers. With ``secure`` every
        one of them runs with Kerberos. Not with ``container_executor``.
    hadoop_version : str
        The Hadoop release the daemons run, one of
        ``tfyarn.cluster._versions.KNOWN`` (default: the version pinned in
        ``conf/hadoop/pom.xml``). Each version's jars are fetched once and
        cached apart.
    """

    nodes: int = 0
    memory_mb: int = 16384
    vcores: int = 16
    gpus: int = 0
    port_offset: int = 0
    ports: Mapping[str, int] = dataclasses.field(default_factory=dict)
    min_allocation_mb: int = 128
    am_max_attempts: int = 8
    max_am_resource_percent: float = 0.5
    secure: bool = False
    token_lifetime_s: int = 0
    queues: Mapping[str, float] = dataclasses.field(default_factory=dict)
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)
    container_executor: str = ""
    preemption: bool = False
    ha: bool = False
    hadoop_version: str = _versions.DEFAULT_VERSION

    def __post_init__(self) -> None:
        for name in ("memory_mb", "vcores", "min_allocation_mb", "am_max_attempts"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ClusterError(f"{name} must be a positive integer, got {value!r}")
        if self.memory_mb < 1024:
            raise ClusterError(
                f"memory_mb={self.memory_mb} is too small for any job: give the "
                "NodeManager at least 1024 MiB"
            )
        if not isinstance(self.nodes, int) or not 0 <= self.nodes <= 200:
            raise ClusterError(
                f"nodes must be 0 (one node on loopback) to 200, got {self.nodes!r}"
            )
        if not isinstance(self.gpus, int) or self.gpus < 0:
            raise ClusterError(f"gpus must be 0 or more, got {self.gpus!r}")
        if not 0 < self.max_am_resource_percent <= 1:
            raise ClusterError(
                "max_am_resource_percent must be in (0, 1], got "
                f"{self.max_am_resource_percent!r}"
            )
        self._check_secure()
        entry = _versions.lookup(self.hadoop_version)
        object.__setattr__(self, "hadoop_version", entry.version)
        _scheduler.check_queues(dict(self.queues))
        _scheduler.check_labels(dict(self.labels), self.nodes)
        object.__setattr__(
            self, "queues", {k: float(v) for k, v in dict(self.queues).items()}
        )
        object.__setattr__(self, "labels", dict(self.labels))
        unknown = sorted(set(self.ports) - set(PORTS))
        if unknown:
            raise ClusterError(
                f"unknown port name(s) {', '.join(unknown)}; known: {', '.join(PORTS)}"
            )
        for name, port in self.resolved_ports().items():
            if not 1 <= port <= 65535:
                raise ClusterError(f"port {name}={port} is outside 1-65535")
        taken: dict[int, str] = {}
        for name, port in self.resolved_ports().items():
            if port in taken:
                raise ClusterError(
                    f"ports {taken[port]} and {name} are both {port}; give each its own"
                )
            taken[port] = name

    def _check_secure(self) -> None:
        if not isinstance(self.token_lifetime_s, int) or self.token_lifetime_s < 0:
            raise ClusterError(
                f"token_lifetime_s must be 0 (Hadoop's default) or more seconds, got "
                f"{self.token_lifetime_s!r}"
            )
        if self.token_lifetime_s and not self.secure:
            raise ClusterError(
                "--token_lifetime sets the delegation tokens of a secure cluster; "
                "add --secure (tokens do not exist without Kerberos)"
            )
        if 0 < self.token_lifetime_s < MIN_TOKEN_LIFETIME_S:
            raise ClusterError(
                f"--token_lifetime {self.token_lifetime_s} is too short: the "
                f"ResourceManager renews tokens before they expire, give at least "
                f"{MIN_TOKEN_LIFETIME_S} s"
            )
        if self.secure and self.multihost:
            raise ClusterError(
                "--secure runs on the single node on loopback; a secure cluster of "
                "several hosts (--nodes) is not supported yet: drop one of the two"
            )
        if self.ha and self.container_executor:
            raise ClusterError(
                "--ha runs on the DefaultContainerExecutor for now (not with "
                "--container_executor): drop one of the two"
            )
        if self.container_executor and (self.secure or self.multihost):
            raise ClusterError(
                "--container_executor runs on the single node on loopback without "
                "--secure (not yet with --nodes or --secure): drop one of them"
            )

    def resolved_ports(self) -> dict[str, int]:
        """Every port by name, after the offset and explicit choices."""
        return {
            name: int(self.ports.get(name, default + self.port_offset))
            for name, (default, _, _) in PORTS.items()
        }

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["ports"] = dict(self.ports)
        data["queues"] = dict(self.queues)
        data["labels"] = dict(self.labels)
        return data

    @property
    def multihost(self) -> bool:
        return self.nodes > 0

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClusterSettings:
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - fields)
        if unknown:
            raise ClusterError(f"unknown cluster setting(s): {', '.join(unknown)}")
        return cls(**data)

    def replace(self, **changes: Any) -> ClusterSettings:
        """A copy with the given (non-None) settings changed."""
        return dataclasses.replace(
            self, **{k: v for k, v in changes.items() if v is not None}
        )


def load_settings(base_dir: Path) -> ClusterSettings | None:
    """The settings a cluster was last started with, or None for a new cluster."""
    path = base_dir / SETTINGS_FILE
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ClusterError(
            f"cannot read the cluster settings in {path} ({exc}); fix or delete the "
            "file (or run `tfyarn cluster stop --wipe`) and start again"
        ) from exc
    return ClusterSettings.from_dict(data)


def save_settings(base_dir: Path, settings: ClusterSettings) -> None:
    path = base_dir / SETTINGS_FILE
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(settings.to_dict(), indent=2, sort_keys=True) + "\n")
    tmp.replace(path)


def describe_settings(settings: ClusterSettings) -> str:
    """A cluster's size and ports in one phrase, for messages."""
    return (
        f"Hadoop {settings.hadoop_version}, "
        + (f"{settings.nodes} hosts of " if settings.nodes else "")
        + f"{settings.memory_mb} MiB, {settings.vcores} vcores, {settings.gpus} GPUs, "
        f"port offset {settings.port_offset}"
        + (f", ports {dict(settings.ports)}" if settings.ports else "")
        + (", HA (two NameNodes, two ResourceManagers)" if settings.ha else "")
        + (", secure (Kerberos)" if settings.secure else "")
        + (
            f", container-executor {settings.container_executor}"
            if settings.container_executor
            else ""
        )
        + (
            ", queues " + ", ".join(f"{n}:{c:g}" for n, c in settings.queues.items())
            if settings.queues
            else ""
        )
        + (
            ", labels "
            + ", ".join(f"{n}={lab}" for n, lab in sorted(settings.labels.items()))
            if settings.labels
            else ""
        )
        + (
            f", token lifetime {settings.token_lifetime_s} s"
            if settings.token_lifetime_s
            else ""
        )
    )
