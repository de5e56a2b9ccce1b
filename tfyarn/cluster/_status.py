"""What a local cluster is made of and what ``tfyarn cluster status`` reports."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tfyarn.cluster import _gpus, _hadoop, _netns, _probe
from tfyarn.cluster._process import DAEMONS, HA_DAEMONS, Daemon, log_file
from tfyarn.cluster._secure import KerberosStatus
from tfyarn.cluster._settings import ClusterSettings
from tfyarn.errors import ClusterError


@dataclasses.dataclass(frozen=True)
class Instance:
    """One daemon process of the cluster: ``key`` names its pid and log files
    (``namenode``, or ``nodemanager-node2`` on a host of a multi-host cluster)."""

    key: str
    daemon: Daemon
    host: _netns.Host | None = None


def instances(
    settings: ClusterSettings, layout: _netns.Layout | None
) -> list[Instance]:
    """Every daemon of a cluster, in start order: on a multi-host cluster the
    master's daemons on the bridge, then each host's DataNode and NodeManager."""
    daemons = HA_DAEMONS if settings.ha else DAEMONS
    if not settings.multihost or layout is None:
        return [Instance(d.name, d) for d in daemons]
    per_host = ("datanode", "nodemanager")
    found = [Instance(d.name, d) for d in daemons if d.name not in per_host]
    for h in layout.hosts:
        for d in daemons:
            if d.name in per_host:
                found.append(Instance(f"{d.name}-{h.name}", d, h))
    return found


@dataclasses.dataclass(frozen=True)
class HostStatus:
    """One worker host as ``tfyarn cluster status`` lists it."""

    name: str
    host: str
    address: str
    netns: str | None
    partitioned: bool
    nodemanager_pid: int | None
    datanode_pid: int | None
    state: str  # the NodeManager's state in the ResourceManager, or "" if unknown
    memory_mb: int
    vcores: int
    gpus: int
    labels: tuple[str, ...]
    # The host's GPU discovery (``--gpus``): its nvidia-smi's answer, and the
    # NodeManager's words when it fails; "" without GPUs.
    gpu_discovery: str = ""


def host_statuses(
    settings: ClusterSettings,
    lay: _netns.Layout | None,
    pids: dict[str, int | None],
    nodes: list[_probe.NodeReport] | None,
    *,
    base_dir: Path | None = None,
) -> list[HostStatus]:
    """Every worker host (the one loopback node, or each namespace host) with
    its daemons' pids and what the ResourceManager reports of it (and, given
    ``base_dir``, how its GPU discovery fares)."""
    by_host = {n.host: n for n in nodes or []}
    hosts: list[tuple[tuple[str, str, str, str | None], str, bool]]
    if not settings.multihost or lay is None:
        hosts = [(("local", "127.0.0.1", "127.0.0.1", None), "", False)]
    else:
        hosts = [
            (
                (h.name, h.host, h.address, h.netns),
                f"-{h.name}",
                _netns.is_partitioned(h),
            )
            for h in lay.hosts
        ]
    out = []
    for (name, host, address, netns), suffix, cut in hosts:
        report = by_host.get(host) or by_host.get(address)
        if report is None and not settings.multihost and len(by_host) == 1:
            report = next(iter(by_host.values()))
        out.append(
            HostStatus(
                name=name,
                host=host,
                address=address,
                netns=netns,
                partitioned=cut,
                nodemanager_pid=pids.get("nodemanager" + suffix),
                datanode_pid=pids.get("datanode" + suffix),
                state=report.state if report else "",
                memory_mb=report.memory_mb if report else 0,
                vcores=report.vcores if report else 0,
                gpus=report.gpus if report else 0,
                labels=report.labels if report else (),
                gpu_discovery=_gpu_discovery(settings, base_dir, name, suffix),
            )
        )
    return out


def _gpu_discovery(
    settings: ClusterSettings, base_dir: Path | None, name: str, suffix: str
) -> str:
    if base_dir is None or not _gpus.uses_plugin(settings):
        return ""
    node_dir = base_dir if not suffix else base_dir / "nodes" / name
    return _gpus.discovery_status(node_dir, log_file(base_dir, "nodemanager" + suffix))


def jdk_description(pids: dict[str, int | None]) -> str:
    """The JDK the cluster runs on: a running daemon's (its JVM's own
    executable), else the one a start would pick, said so; "" if neither."""
    home = next(
        (
            found
            for pid in pids.values()
            if pid is not None
            for found in [_hadoop.process_java_home(pid)]
            if found is not None
        ),
        None,
    )
    note = ""
    if home is None:
        try:
            home = _hadoop.find_java_home()
        except ClusterError:
            return ""
        note = ", for the next start"
    release = _hadoop.java_release(home) or "of unknown version"
    return f"{release} ({home}{note})"


@dataclasses.dataclass(frozen=True)
class DaemonStatus:
    """One daemon: its pid (None when not running), ports and log file."""

    name: str
    title: str
    pid: int | None
    ports: dict[str, int]
    log: Path
    host: str | None = None


@dataclasses.dataclass(frozen=True)
class ClusterStatus:
    """What ``tfyarn cluster status`` shows.

    ``state`` is ``running`` (every daemon up), ``stopped`` (none) or
    ``partial``; ``nodes`` and ``hdfs`` are None when the daemon did not answer.
    """

    base_dir: Path
    state: str
    daemons: list[DaemonStatus]
    settings: ClusterSettings
    nodes: list[_probe.NodeReport] | None
    hdfs: _probe.HdfsHealth | None
    web_uis: dict[str, str]
    already_running: bool = False
    hosts: list[HostStatus] = dataclasses.field(default_factory=list)
    kerberos: KerberosStatus | None = None  # a secure cluster's realm
    # An HA cluster's pairs: {"namenode": {"nn1": "active", "nn2": "standby"},
    # "resourcemanager": {...}}; each member active, standby or down.
    ha: dict[str, dict[str, str]] = dataclasses.field(default_factory=dict)
    jdk: str = ""  # "17.0.15 (/usr/lib/jvm/...)", see jdk_description

    @property
    def running(self) -> bool:
        return self.state == "running"

    def format(self) -> str:
        """Human-readable report."""
        lines = [f"Local cluster in {self.base_dir}: {self.state}"]
        jdk = f" on JDK {self.jdk}" if self.jdk else ""
        lines.append(f"  Hadoop {self.settings.hadoop_version}{jdk}")
        for d in self.daemons:
            ports = ", ".join(f"{p}" for p in d.ports.values())
            pid = f"pid {d.pid}" if d.pid else "not running"
            where = f" on {d.host}" if getattr(d, "host", None) else ""
            lines.append(f"  {d.title:<16} {pid:<14} ports {ports}{where}")
        for h in self.hosts:
            cut = " PARTITIONED" if h.partitioned else ""
            labels = ",".join(h.labels) or "-"
            lines.append(
                f"  host {h.name:<6} {h.host} {h.address} netns {h.netns or '-'}: "
                f"NodeManager {h.state or 'unknown'}{cut}, {h.memory_mb} MiB, "
                f"{h.vcores} vcores, {h.gpus} GPUs, labels {labels}"
            )
            if h.gpu_discovery:
                lines.append(f"    GPU discovery: {h.gpu_discovery}")
        if self.nodes:
            for node in self.nodes:
                lines.append(
                    f"  node {node.node_id} {node.state}: {node.memory_mb} MiB, "
                    f"{node.vcores} vcores, {node.gpus} GPUs "
                    f"(in use: {node.used_memory_mb} MiB, {node.used_vcores} vcores)"
                )
                if node.health:
                    lines.append(f"    health: {node.health}")
        elif self.state != "stopped":
            lines.append("  no node registered with the ResourceManager")
        if self.hdfs is not None:
            safe = (
                f"safe mode: {self.hdfs.safe_mode}" if self.hdfs.safe_mode else "ready"
            )
            lines.append(
                f"  HDFS {safe}; {self.hdfs.live_datanodes} live DataNode(s), "
                f"{self.hdfs.free_bytes / 2**30:.1f} GiB free"
            )
        for pair, members in self.ha.items():
            title = "NameNodes" if pair == "namenode" else "ResourceManagers"
            active = [m for m, state in members.items() if state == "active"]
            lines.append(
                f"  {title}: "
                + ", ".join(f"{m} {state}" for m, state in members.items())
                + ("" if active else " (none active)")
            )
        if self.kerberos is not None:
            k = self.kerberos
            kdc = f"pid {k.kdc_pid}" if k.kdc_pid else "not running"
            lines.append(f"  Kerberos realm {k.realm}, KDC {k.kdc} ({kdc})")
            lines.append(
                f"    you are {k.user_principal}: keytab {k.user_keytab}, "
                f"ticket cache {k.ticket_cache}"
            )
        if self.state != "stopped":
            for name, url in self.web_uis.items():
                lines.append(f"  {name + ' UI':<20} {url}")
        lines.append(f"  config  {self.base_dir / 'conf'}")
        lines.append(f"  data    {self.base_dir / 'data'}")
        lines.append(
            f"  logs    {self.base_dir / 'logs'} (containers: logs/containers)"
        )
        return "\n".join(lines)
