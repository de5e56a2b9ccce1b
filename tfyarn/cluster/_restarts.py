"""Crash or restart one YARN daemon of a running local cluster, to rehearse
what a job lives through on a production cluster (``tfyarn cluster
kill|restart resourcemanager|nodemanager``).

Both daemons run with recovery on (``conf/hadoop/yarn-site.xml``): a
ResourceManager restarted takes its applications back from its store and the
running containers from the NodeManagers; a NodeManager restarted takes its
containers back from its own store. A crash is a SIGKILL of the daemon's JVM
alone: its containers keep running, as they do when a daemon dies.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import time
from pathlib import Path

from tfyarn.cluster import _messages, _netns, _probe, _process
from tfyarn.cluster._settings import ClusterSettings
from tfyarn.cluster._status import Instance, host_statuses, instances
from tfyarn.errors import ClusterError

#: The daemons ``kill`` and ``restart`` act on.
REHEARSED = ("resourcemanager", "nodemanager")
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
        back = (
            "its NodeManagers re-registered"
            if self.title == "ResourceManager"
            else "the ResourceManager lists it RUNNING"
        )
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
    if daemon == "resourcemanager":
        if name:
            raise ClusterError(
                f"a cluster has one ResourceManager, on its master; drop {name!r}"
            )
        return found["resourcemanager"]
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


def title(inst: Instance) -> str:
    """``ResourceManager``, ``NodeManager`` or ``NodeManager on <host>``."""
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
) -> None:
    """Return once the restarted daemon is back: a ResourceManager answers on
    its web port with every running, reachable NodeManager RUNNING again; a
    NodeManager registered anew and is RUNNING in the ResourceManager.

    Raises
    ------
    ClusterError
        The daemon died, or ``timeout`` passed (naming what is missing).
    """
    rm_web = settings.resolved_ports()["rm_web"]
    log = _process.log_file(base_dir, inst.key)
    deadline = time.monotonic() + timeout
    missing = "it did not answer"
    while True:
        if proc.poll() is not None:
            raise ClusterError(
                _messages.daemon_died(
                    base_dir, inst.daemon, proc, inst.key, since=log_offset
                )
            )
        nodes = _probe.yarn_nodes(rm_web, master)
        if nodes is None:
            missing = "the ResourceManager's web endpoint did not answer"
        else:
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
            registered = inst.daemon.name != "nodemanager" or REGISTERED in _since(
                log, log_offset
            )
            if not waiting and registered:
                return
            missing = (
                f"NodeManager(s) not RUNNING yet: {', '.join(waiting)}"
                if waiting
                else "the NodeManager has not registered with the ResourceManager"
            )
        if time.monotonic() > deadline:
            raise ClusterError(
                f"the {title(inst)} was not back {timeout:.0f} s after its restart "
                f"({missing}); its log: {log}. It keeps starting in the "
                "background; `tfyarn cluster status` shows when it is up."
            )
        time.sleep(0.5)


def _since(path: Path, offset: int) -> str:
    try:
        with open(path, "rb") as stream:
            stream.seek(offset if offset <= _process.log_size(path) else 0)
            return stream.read().decode(errors="replace")
    except OSError:
        return ""
