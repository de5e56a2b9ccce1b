"""Crash or restart one daemon of a running local cluster, to rehearse what
a job lives through on a production cluster (``tfyarn cluster kill|restart
namenode|resourcemanager|nodemanager``).

The YARN daemons run with recovery on (``conf/hadoop/yarn-site.xml``): a
ResourceManager restarted takes its applications back from its store and the
running containers from the NodeManagers; a NodeManager restarted takes its
containers back from its own store. A NameNode restarted reads its image and
edits again (with HA its partner is active meanwhile). A crash is a SIGKILL of
the daemon's JVM alone: its containers keep running, as they do when a
daemon dies.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import time
from pathlib import Path

from tfyarn.cluster import _ha, _messages, _netns, _probe, _process
from tfyarn.cluster._settings import ClusterSettings
from tfyarn.cluster._status import Instance, host_statuses, instances
from tfyarn.errors import ClusterError

#: The daemons ``kill`` and ``restart`` act on.
REHEARSED = ("namenode", "resourcemanager", "nodemanager")
#: How long ``restart`` waits for the daemon to be back, by default.
RESTART_WAIT_S = 180.0
# What a NodeManager logs once the ResourceManager accepted it
# (NodeStatusUpdaterImpl); the RM's node list alone would still show the
# killed one RUNNING until its liveness expires.
REGISTERED = "Registered with ResourceManager as "
# How long a SIGKILLed JVM may take to be gone.
KILL_WAIT_S = 10.0


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What ``kill`` or ``restart`` did: the daemon, the pid killed (None if it
    was not running), the pid started (``restart``) and the seconds it took."""

    title: str
    killed: int | None
    started: int | None
    seconds: float

    def summary(self, action: str) -> str:
        """One line for a person."""
        killed = (
            f"killed pid {self.killed} (SIGKILL)"
            if self.killed
            else "it was not running"
        )
        if action == "kill":
            return (
                f"Killed the {self.title} (pid {self.killed}, SIGKILL); it stays "
                f"down until `tfyarn cluster restart` or `tfyarn cluster start` "
                f"({self.seconds:.1f} s)."
            )
        if self.title.startswith("ResourceManager"):
            back = "its NodeManagers re-registered"
        elif self.title.startswith("NameNode"):
            back = "HDFS is served by an active NameNode"
        else:
            back = "the ResourceManager lists it RUNNING"
        return (
            f"Restarted the {self.title}: {killed}, started pid {self.started}; "
            f"it is back and {back} ({self.seconds:.1f} s)."
        )


def check_daemon(daemon: str) -> None:
    """Refuse a daemon ``kill``/``restart`` does not act on."""
    if daemon not in REHEARSED:
        raise ClusterError(
            f"unknown daemon {daemon!r}: `tfyarn cluster kill|restart` takes "
            f"{' or '.join(REHEARSED)}"
        )


def pick(
    base_dir: Path,
    settings: ClusterSettings,
    lay: _netns.Layout | None,
    daemon: str,
    name: str | None,
    *,
    master: str = "127.0.0.1",
) -> Instance:
    """The daemon instance ``daemon`` [``name``] designates.

    Raises
    ------
    ClusterError
        An unknown daemon or node, a node name where none is taken, or none
        where several NodeManagers run.
    """
    check_daemon(daemon)
    found = {i.key: i for i in instances(settings, lay)}
    if daemon in ("namenode", "resourcemanager"):
        return found[_pair_member(base_dir, settings, daemon, name, master)]
    if settings.multihost and lay is not None:
        hosts = ", ".join(h.name for h in lay.hosts)
        if not name:
            raise ClusterError(
                f"the cluster in {base_dir} runs a NodeManager on each of its "
                f"hosts ({hosts}): name one, e.g. `tfyarn cluster restart "
                f"nodemanager {lay.hosts[0].name}`"
            )
        return found[f"nodemanager-{lay.host(name).name}"]
    if name and name not in ("local", "localhost", "127.0.0.1"):
        raise ClusterError(
            f"the cluster in {base_dir} runs one NodeManager, on loopback "
            f"(host 'local'); drop {name!r}"
        )
    return found["nodemanager"]


def _pair_member(
    base_dir: Path,
    settings: ClusterSettings,
    daemon: str,
    name: str | None,
    master: str,
) -> str:
    """The key of the NameNode or ResourceManager ``name`` (an HA id), or of the
    active one (the only one without HA)."""
    title = "NameNode" if daemon == "namenode" else "ResourceManager"
    webs = (
        _ha.namenode_webs(settings) if daemon == "namenode" else _ha.rm_webs(settings)
    )
    if not settings.ha:
        if name:
            raise ClusterError(
                f"the cluster in {base_dir} has one {title}, on its master; drop "
                f"{name!r} (two run with `tfyarn cluster start --ha`)"
            )
        return webs[0][0].key
    ids = [m.id for m, _ in webs]
    if name:
        for member, _ in webs:
            if member.id == name:
                return member.key
        raise ClusterError(
            f"unknown {title} {name!r}: the cluster in {base_dir} has "
            f"{' and '.join(ids)}"
        )
    states = _ha.states(webs, master)
    for member, _ in webs:
        if states[member.id] == "active":
            return member.key
    raise ClusterError(
        f"no {title} of the cluster in {base_dir} is active ("
        + ", ".join(f"{i} {s}" for i, s in states.items())
        + f"): name the one to act on ({' or '.join(ids)})"
    )


def title(inst: Instance) -> str:
    """``ResourceManager`` (``ResourceManager rm2``), ``NodeManager`` or
    ``NodeManager on <host>``."""
    return inst.daemon.title + (f" on {inst.host.host}" if inst.host else "")


def crash(base_dir: Path, inst: Instance) -> int | None:
    """SIGKILL the daemon's JVM alone (its containers live on); the pid killed,
    None when it was not running.

    Raises
    ------
    ClusterError
        It outlived the SIGKILL (it is stuck in the kernel).
    """
    pid = _process.running_pid(base_dir, inst.daemon, inst.key)
    if pid is None:
        return None
    _process._signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT_S
    while not _process.is_gone(pid):
        if time.monotonic() > deadline:
            raise ClusterError(
                f"the {title(inst)} (pid {pid}) is still there {KILL_WAIT_S:.0f} s "
                f"after SIGKILL; see `ps -o stat,wchan -p {pid}`"
            )
        time.sleep(0.1)
    return pid


def wait_back(
    base_dir: Path,
    settings: ClusterSettings,
    lay: _netns.Layout | None,
    inst: Instance,
    proc: subprocess.Popen[bytes],
    *,
    master: str,
    log_offset: int,
    timeout: float,
    since: float = 0.0,
) -> None:
    """Return once the restarted daemon is back: a NameNode answering, with
    HDFS served by an active NameNode out of safe mode; a ResourceManager
    answering, with every running, reachable NodeManager RUNNING in the active
    one; a NodeManager registered anew and RUNNING in the ResourceManager.

    ``since``: when the daemon was killed (epoch seconds), for an HA
    NameNode's failover controller to have seen it healthy after.

    Raises
    ------
    ClusterError
        The daemon died, or ``timeout`` passed (naming what is missing).
    """
    log = _process.log_file(base_dir, inst.key)
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise ClusterError(
                _messages.daemon_died(
                    base_dir, inst.daemon, proc, inst.key, since=log_offset
                )
            )
        if inst.daemon.main_class == _process.DAEMONS_BY_NAME["namenode"].main_class:
            missing = _namenode_missing(settings, inst, master) or (
                _ha.controller_missing(base_dir, inst, since) if settings.ha else None
            )
        else:
            missing = _yarn_missing(
                base_dir, settings, lay, inst, master, log, log_offset
            )
        if missing is None:
            return
        if time.monotonic() > deadline:
            raise ClusterError(
                f"the {title(inst)} was not back {timeout:.0f} s after its restart "
                f"({missing}); its log: {log}. It keeps starting in the "
                "background; `tfyarn cluster status` shows when it is up."
            )
        time.sleep(0.5)


def _own_web(settings: ClusterSettings, inst: Instance) -> int:
    for member, port in [*_ha.namenode_webs(settings), *_ha.rm_webs(settings)]:
        if member.key == inst.key:
            return port
    raise KeyError(inst.key)


def _namenode_missing(
    settings: ClusterSettings, inst: Instance, master: str
) -> str | None:
    """What a restarted NameNode still lacks, or None once it is back."""
    if not settings.ha:
        web, https = _ha.active_namenode_web(settings, master)
    else:
        https = settings.secure  # a secure cluster's NameNodes: HTTPS only
        if _probe.is_active(_own_web(settings, inst), master, https=https) is None:
            return "its web endpoint did not answer"
        web, https = _ha.active_namenode_web(settings, master)
        if not _probe.is_active(web, master, https=https):
            return "no NameNode is active yet"
    health = _probe.hdfs_health(web, master, https=https)
    if health is None:
        return "the NameNode's web endpoint did not answer"
    if not health.ready:
        return f"HDFS is not ready: safe mode {health.safe_mode or 'off'}, " + (
            f"{health.live_datanodes} live DataNode(s)"
        )
    return None


def _yarn_missing(
    base_dir: Path,
    settings: ClusterSettings,
    lay: _netns.Layout | None,
    inst: Instance,
    master: str,
    log: Path,
    log_offset: int,
) -> str | None:
    """What a restarted ResourceManager or NodeManager still lacks, or None."""
    own_rm = settings.ha and inst.daemon.name.startswith("resourcemanager")
    if own_rm and _probe.is_active(_own_web(settings, inst), master) is None:
        return "its web endpoint did not answer"
    nodes = _probe.yarn_nodes(_ha.active_rm_web(settings, master), master)
    if nodes is None:
        return "no ResourceManager answers as the active one"
    pids = {
        i.key: _process.running_pid(base_dir, i.daemon, i.key)
        for i in instances(settings, lay)
    }
    hosts = host_statuses(settings, lay, pids, nodes)
    if inst.host is not None:
        hosts = [h for h in hosts if h.host == inst.host.host]
    waiting = [
        h.name
        for h in hosts
        if h.nodemanager_pid and not h.partitioned and h.state != "RUNNING"
    ]
    if waiting:
        return f"NodeManager(s) not RUNNING yet: {', '.join(waiting)}"
    if inst.daemon.name == "nodemanager" and REGISTERED not in _since(log, log_offset):
        return "the NodeManager has not registered with the ResourceManager"
    return None


def _since(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as stream:
            stream.seek(offset if offset <= _process.log_size(path) else 0)
            return stream.read().decode(errors="replace")
    except OSError:
        return ""
