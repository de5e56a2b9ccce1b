"""Waiting until a starting local cluster is usable: HDFS out of safe mode
with its DataNodes, every NodeManager RUNNING, and the node labels on their
hosts; or until one restarted host's NodeManager is RUNNING again."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from tfyarn.cluster import _ha, _messages, _netns, _probe, _process, _scheduler
from tfyarn.cluster._process import DAEMONS_BY_NAME
from tfyarn.cluster._secure import bound_ports
from tfyarn.cluster._settings import ClusterSettings
from tfyarn.cluster._status import Instance
from tfyarn.errors import ClusterError

# What the NameNode's safe-mode status says when its disk is too full
# (FSNamesystem: "Resources are low on NN. Please add or free up more resources...").
LOW_RESOURCES = "Resources are low on NN"
# How long the ResourceManager may take to report labels `yarn rmadmin` set.
LABELS_WAIT_S = 60.0
# How long ZooKeeper and the JournalNode may take to listen.
LISTEN_WAIT_S = 90.0
Log = Callable[[str], None]


def wait_ready(
    base_dir: Path,
    settings: ClusterSettings,
    found: list[Instance],
    started: Mapping[str, subprocess.Popen[bytes]],
    *,
    master: str,
    log_offsets: Mapping[str, int],
    timeout: float,
    log: Log,
) -> None:
    """Return once HDFS and YARN are up with every node of ``settings``.

    ``found``: every daemon of the cluster; ``started``: those this start
    spawned, by key (empty: check that all of them run); ``log_offsets``:
    where each daemon's log stood when it was spawned, so a death shows this
    start's errors only.

    Raises
    ------
    ClusterError
        A daemon died, the NameNode's disk is full, or ``timeout`` passed.
    """
    deadline = time.monotonic() + timeout
    hdfs: _probe.HdfsHealth | None = None
    nodes: list[_probe.NodeReport] | None = None
    hdfs_logged = yarn_logged = False
    want = max(1, settings.nodes)  # DataNodes and NodeManagers to wait for
    while True:
        for inst in found:
            proc = started.get(inst.key)
            died = proc is not None and proc.poll() is not None
            if died or (
                not started
                and _process.running_pid(base_dir, inst.daemon, inst.key) is None
            ):
                raise ClusterError(
                    _messages.daemon_died(
                        base_dir,
                        inst.daemon,
                        proc,
                        inst.key,
                        since=log_offsets.get(inst.key, 0),
                    )
                )
        if hdfs is None or not hdfs.ready or hdfs.live_datanodes < want:
            # With HA: the active NameNode's view (there is none until the
            # failover controllers elected one).
            nn_web, https = _ha.active_namenode_web(settings, master)
            hdfs = _probe.hdfs_health(nn_web, master, https=https)
            if hdfs is not None and LOW_RESOURCES in hdfs.safe_mode:
                raise ClusterError(
                    _messages.disk_full(base_dir, base_dir / "data", hdfs)
                )
        if (
            not hdfs_logged
            and hdfs is not None
            and hdfs.ready
            and hdfs.live_datanodes >= want
            and _datanodes_registered(settings, found, started, master)
        ):
            log(
                f"HDFS is up (out of safe mode, {hdfs.live_datanodes} DataNode(s) live)."
            )
            hdfs_logged = True
        nodes = _probe.yarn_nodes(_ha.active_rm_web(settings, master), master)
        yarn_ready = sum(n.state == "RUNNING" for n in nodes or []) >= want
        if yarn_ready and not yarn_logged:
            log(f"YARN is up ({want} NodeManager(s) RUNNING).")
            yarn_logged = True
        if hdfs_logged and yarn_ready:
            return
        if time.monotonic() > deadline:
            raise ClusterError(_messages.not_ready(base_dir, timeout, hdfs, nodes))
        time.sleep(0.5)


def _datanodes_registered(
    settings: ClusterSettings,
    found: list[Instance],
    started: Mapping[str, subprocess.Popen[bytes]],
    master: str,
) -> bool:
    """Whether every DataNode this start spawned has registered with its
    NameNode (the live count alone would pass on a killed one's record)."""
    web = bound_ports(settings)["datanode_http"]
    return all(
        _probe.datanode_registered(
            web, inst.host.host if inst.host else master, https=settings.secure
        )
        for inst in found
        if inst.daemon.name == "datanode" and inst.key in started
    )


def wait_node_running(
    base_dir: Path,
    settings: ClusterSettings,
    host: _netns.Host,
    started: Mapping[str, subprocess.Popen[bytes]],
    *,
    master: str,
    log_offsets: Mapping[str, int],
    timeout: float,
) -> None:
    """Return once ``host``'s NodeManager is RUNNING again (after
    ``started``, its daemons spawned anew, by key).

    Raises
    ------
    ClusterError
        One of ``started`` died, or ``timeout`` passed.
    """
    deadline = time.monotonic() + timeout
    while True:
        rm_web = _ha.active_rm_web(settings, master)
        for key, proc in started.items():
            if proc.poll() is not None:
                raise ClusterError(
                    _messages.daemon_died(
                        base_dir,
                        DAEMONS_BY_NAME[key.split("-")[0]],
                        proc,
                        key,
                        since=log_offsets.get(key, 0),
                    )
                )
        nodes = _probe.yarn_nodes(rm_web, master) or []
        if any(n.host == host.host and n.state == "RUNNING" for n in nodes):
            return
        if time.monotonic() > deadline:
            raise ClusterError(
                f"the NodeManager on {host.host} was not RUNNING after "
                f"{timeout:.0f} s; its log: "
                f"{_process.log_file(base_dir, 'nodemanager-' + host.name)}"
            )
        time.sleep(0.5)


def apply_labels(
    base_dir: Path,
    settings: ClusterSettings,
    lay: _netns.Layout,
    *,
    master: str,
    env: Mapping[str, str],
    log: Log,
) -> None:
    """Create the node labels and put each on its host (``yarn rmadmin``, run
    with ``env``), then wait until the ResourceManager reports them.

    Raises
    ------
    ClusterError
        ``yarn rmadmin`` failed or hung, or the labels never showed.
    """
    host_of = {h.name: h.host for h in lay.hosts}
    commands = _scheduler.rmadmin_commands(settings.labels, host_of)
    if not commands:
        return
    log(
        "Labelling hosts: "
        + ", ".join(f"{n}={lab}" for n, lab in sorted(settings.labels.items()))
    )
    for args in commands:
        try:
            done = subprocess.run(
                [str(base_dir / "bin" / "yarn"), *args],
                env=dict(env),
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"`yarn {' '.join(args)}` took more than 120 s") from exc
        if done.returncode != 0:
            raise ClusterError(
                f"`yarn {' '.join(args)}` failed (exit {done.returncode}): "
                f"{(done.stderr or done.stdout).strip()[-1500:]}"
            )
    want = {host_of[n]: lab for n, lab in settings.labels.items()}
    deadline = time.monotonic() + LABELS_WAIT_S
    while True:
        nodes = _probe.yarn_nodes(_ha.active_rm_web(settings, master), master) or []
        have = {n.host: n.labels for n in nodes}
        if all(lab in have.get(h, ()) for h, lab in want.items()):
            return
        if time.monotonic() > deadline:
            raise ClusterError(
                f"the ResourceManager does not report the node labels {want} "
                f"{LABELS_WAIT_S:.0f} s after `yarn rmadmin` set them (it reports "
                f"{have}); see {_process.log_file(base_dir, 'resourcemanager')}"
            )
        time.sleep(0.5)


def wait_listening(
    base_dir: Path,
    settings: ClusterSettings,
    found: list[Instance],
    started: Mapping[str, subprocess.Popen[bytes]],
    *,
    master: str,
    log_offsets: Mapping[str, int],
    timeout: float = LISTEN_WAIT_S,
) -> None:
    """Return once every port of the daemons ``found`` is listening.

    Raises
    ------
    ClusterError
        One of ``started`` died, or ``timeout`` passed (naming the port).
    """
    ports = bound_ports(settings)  # a secure JournalNode's web port: HTTPS
    deadline = time.monotonic() + timeout
    while True:
        for inst in found:
            proc = started.get(inst.key)
            if proc is not None and proc.poll() is not None:
                raise ClusterError(
                    _messages.daemon_died(
                        base_dir,
                        inst.daemon,
                        proc,
                        inst.key,
                        since=log_offsets.get(inst.key, 0),
                    )
                )
        closed = [
            (inst, name)
            for inst in found
            for name in inst.daemon.ports
            if not _process.port_in_use(ports[name], master)
        ]
        if not closed:
            return
        if time.monotonic() > deadline:
            inst, name = closed[0]
            raise ClusterError(
                f"the {inst.daemon.title} did not listen on {master}:{ports[name]} "
                f"({name}) within {timeout:.0f} s; its log: "
                f"{_process.log_file(base_dir, inst.key)}"
            )
        time.sleep(0.3)
