"""The four daemon processes: command lines, pid files, ports, stopping.

A daemon is ours when its pid file names a live process whose command line
carries ``-Dtfyarn.cluster.home=<base_dir>``; a recycled pid never matches.
Those rules are :mod:`tfyarn.contract.local_cluster`'s, which the Hadoop
configuration reader shares to find the running NameNode.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tfyarn.cluster._settings import PORTS
from tfyarn.contract import local_cluster
from tfyarn.contract.local_cluster import home_marker, pid_file
from tfyarn.errors import ClusterError


@dataclasses.dataclass(frozen=True)
class Daemon:
    """One kind of daemon: ``args`` follow its main class (Hadoop's generic
    ``-D key=value`` options, which say which member of an HA pair it is)."""

    name: str
    main_class: str
    heap: str
    title: str
    args: tuple[str, ...] = ()

    @property
    def ports(self) -> list[str]:
        return [port for port, (_, daemon, _) in PORTS.items() if daemon == self.name]


# Start order; stop runs in reverse. Heaps keep an idle cluster near 1 GiB of RSS.
DAEMONS = (
    Daemon(
        "namenode",
        local_cluster.NAMENODE_MAIN_CLASS,
        "384m",
        "NameNode",
    ),
    Daemon(
        "datanode",
        "org.apache.hadoop.hdfs.server.datanode.DataNode",
        "256m",
        "DataNode",
    ),
    Daemon(
        "resourcemanager",
        "org.apache.hadoop.yarn.server.resourcemanager.ResourceManager",
        "512m",
        "ResourceManager",
    ),
    Daemon(
        "nodemanager",
        "org.apache.hadoop.yarn.server.nodemanager.NodeManager",
        "512m",
        "NodeManager",
    ),
)

_NAMENODE, _DATANODE, _RM, _NM = DAEMONS
# An HA cluster, in start order: ZooKeeper and the JournalNode before the
# NameNodes (a NameNode's format writes to the JournalNode), each NameNode's
# failover controller after it. A pair's members share a configuration and
# learn their id from the command line, as Hadoop's generic options allow.
HA_DAEMONS = (
    Daemon(
        "zookeeper",
        "org.apache.zookeeper.server.ZooKeeperServerMain",
        "128m",
        "ZooKeeper",
    ),
    Daemon(
        "journalnode",
        "org.apache.hadoop.hdfs.qjournal.server.JournalNode",
        "128m",
        "JournalNode",
    ),
    dataclasses.replace(
        _NAMENODE, title="NameNode nn1", args=("-D", "dfs.ha.namenode.id=nn1")
    ),
    dataclasses.replace(
        _NAMENODE,
        name="namenode2",
        title="NameNode nn2",
        args=("-D", "dfs.ha.namenode.id=nn2"),
    ),
    Daemon(
        "zkfc",
        "org.apache.hadoop.hdfs.tools.DFSZKFailoverController",
        "128m",
        "ZKFC nn1",
        ("-D", "dfs.ha.namenode.id=nn1"),
    ),
    Daemon(
        "zkfc2",
        "org.apache.hadoop.hdfs.tools.DFSZKFailoverController",
        "128m",
        "ZKFC nn2",
        ("-D", "dfs.ha.namenode.id=nn2"),
    ),
    _DATANODE,
    dataclasses.replace(
        _RM, title="ResourceManager rm1", args=("-D", "yarn.resourcemanager.ha.id=rm1")
    ),
    dataclasses.replace(
        _RM,
        name="resourcemanager2",
        title="ResourceManager rm2",
        args=("-D", "yarn.resourcemanager.ha.id=rm2"),
    ),
    _NM,
)
# By name; ``namenode`` and ``resourcemanager`` are the plain cluster's.
DAEMONS_BY_NAME = {**{d.name: d for d in HA_DAEMONS}, **{d.name: d for d in DAEMONS}}

# Small heaps and a single-threaded collector: on a 2-core machine the cluster's
# JVMs must leave CPU to the TensorFlow tasks they host. Without the perf-data
# counters (jstat's) an idle JVM's periodic thread costs 0.02 CPU-s a minute
# instead of 0.1 (measured here), for each of a test run's thirty JVMs.
DAEMON_JVM_FLAGS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xss512k",
    "-XX:-UsePerfData",
)


def log_file(base_dir: Path, name: str) -> Path:
    return base_dir / "logs" / f"{name}.log"


def out_file(base_dir: Path, name: str) -> Path:
    return base_dir / "logs" / f"{name}.out"


def java_command(
    main_class: str,
    *,
    java_home: Path,
    base_dir: Path,
    classpath: str,
    heap: str,
    module_flags: Sequence[str],
    log_name: str,
    args: Sequence[str] = (),
    archive_options: Sequence[str] = (),
) -> list[str]:
    logs = base_dir / "logs"
    return [
        str(java_home / "bin" / "java"),
        f"-Xmx{heap}",
        *DAEMON_JVM_FLAGS,
        *archive_options,
        *module_flags,
        home_marker(base_dir),
        f"-Dproc_{log_name}",
        f"-Dhadoop.log.dir={logs}",
        f"-Dhadoop.log.file={log_name}.log",
        f"-Dyarn.log.dir={logs}",
        f"-Dyarn.log.file={log_name}.log",
        "-Dhadoop.root.logger=INFO,RFA",
        "-Djava.net.preferIPv4Stack=true",
        "-cp",
        classpath,
        main_class,
        *args,
    ]


def spawn(
    daemon: Daemon,
    command: Sequence[str],
    *,
    base_dir: Path,
    env: Mapping[str, str],
    key: str | None = None,
) -> subprocess.Popen[bytes]:
    """Start a daemon detached from our session, and record its pid."""
    out = out_file(base_dir, key or daemon.name)
    out.parent.mkdir(parents=True, exist_ok=True)
    pid_path = pid_file(base_dir, key or daemon.name)
    pid_path.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as stream:
        # A new session: Ctrl-C in the starting shell must not kill the cluster.
        proc = subprocess.Popen(
            list(command),
            stdin=subprocess.DEVNULL,
            stdout=stream,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=base_dir,
            start_new_session=True,
        )
    pid_path.write_text(f"{proc.pid}\n")
    return proc


def running_pid(base_dir: Path, daemon: Daemon, key: str | None = None) -> int | None:
    """The daemon's pid if it is running, else None. ``key`` names its pid file
    when it is not the daemon's name (a host's ``nodemanager-node2``)."""
    return local_cluster.running_pid(base_dir, key or daemon.name, daemon.main_class)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _reap(pid: int) -> None:
    # Daemons started by this very process are our children: reap them so they
    # do not linger as zombies (which would still look "alive" to kill(0)).
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def is_gone(pid: int) -> bool:
    """Whether ``pid`` has exited (reaping it if it is our child)."""
    _reap(pid)
    return local_cluster.is_dead(pid)


def terminate(pids: Iterable[int], *, grace: float = 20.0) -> list[int]:
    """SIGTERM, wait up to ``grace`` seconds, then SIGKILL. Returns the killed pids."""
    pids = [p for p in pids if not is_gone(p)]
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and not all(is_gone(p) for p in pids):
        time.sleep(0.2)
    killed = [p for p in pids if not is_gone(p)]
    for pid in killed:
        _signal(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(is_gone(p) for p in killed):
        time.sleep(0.1)
    time.sleep(0.05)
    for pid in pids:  # one that turned zombie right after its last check
        _reap(pid)
    return killed


# Where NodeManagers keep each container's pid file:
# <node dir>/data/nm-local/nmPrivate/<application>/<container>/<container>.pid
_CONTAINER_DIRS = ("data/nm-local/nmPrivate/*/*", "nodes/*/data/nm-local/nmPrivate/*/*")


def container_dirs(base_dir: Path) -> list[Path]:
    """The NodeManagers' private directory of every container they ran or run
    (named by the container id)."""
    return [d for pattern in _CONTAINER_DIRS for d in base_dir.glob(pattern)]


def _container_sessions(base_dir: Path) -> set[int]:
    # Each container runs in a session of its own (setsid), led by the pid
    # its pid file names.
    sessions = set()
    for directory in container_dirs(base_dir):
        for pid_path in directory.glob("*.pid"):
            text = pid_path.read_text(errors="replace").strip()
            if text.isdigit():
                sessions.add(int(text))
    return sessions


def _session(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()  # state ppid pgrp session ...
    return int(fields[3]) if len(fields) > 3 else None


def strays(base_dir: Path, exclude: Iterable[int] = ()) -> list[int]:
    """Processes left from this cluster: its JVMs and its containers.

    A container's process is one running in a container directory under
    ``base_dir``, or in the session of such a process when a NodeManager's
    pid file names that session as a container's. A NodeManager killed hard,
    or stopped under supervision (it leaves its containers for the next one),
    leaves its containers behind.
    """
    marker = home_marker(base_dir)
    prefix = str(base_dir) + os.sep
    me = os.getpid()
    skip = {me, *exclude}
    found = []
    others: dict[int, int | None] = {}  # pid -> session, not matched (yet)
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        if pid in skip or local_cluster.is_dead(pid):
            continue
        if marker in local_cluster.command_line(pid):
            found.append(pid)
            continue
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if (cwd + os.sep).startswith(prefix) and "nm-local" in cwd:
            found.append(pid)
        else:
            others[pid] = _session(pid)
    # Both conditions: a pid file alone may be stale, its pid reused.
    sessions = _container_sessions(base_dir) & {_session(p) for p in found}
    found += [pid for pid, sid in others.items() if sid in sessions]
    return found


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something already listens on (or holds) ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # Java sets SO_REUSEADDR too, so a port in TIME_WAIT is not "taken".
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def _listening_inodes(port: int) -> set[str]:
    """The socket inodes listening on ``port`` (any address), from /proc."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            listening = len(fields) > 9 and fields[3] == "0A"
            if listening and int(fields[1].rsplit(":", 1)[1], 16) == port:
                inodes.add(fields[9])
    return inodes


def port_owner(port: int) -> str:
    """Best effort: ``pid N (command)`` of the process listening on ``port``."""
    return _owner_of(_listening_inodes(port))


def _owner_of(inodes: set[str]) -> str:
    """``pid N (command)`` of the process holding one of the socket ``inodes``."""
    if not inodes:
        return "another process"
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fds = list((entry / "fd").iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                cmd = " ".join(local_cluster.command_line(int(entry.name)))[:120]
                return f"pid {entry.name} ({cmd})"
    return "another process"


#: Seconds a just-killed daemon's ports may stay held by its connections.
#: Killing it sends FIN on each; the kernel then keeps the socket until the
#: peer closes its end, and Hadoop's RPC clients notice only at their next
#: call or after ``ipc.client.connection.maxidletime`` (10 s), later under
#: load. Nothing listens meanwhile, yet the port cannot be bound.
CLOSING_WAIT_S = 60.0


def check_ports_free(
    daemon: Daemon,
    ports: Mapping[str, int],
    host: str = "127.0.0.1",
    *,
    closing_wait: float = CLOSING_WAIT_S,
) -> None:
    """Raise a ClusterError naming the first of the daemon's ports already taken.

    A port some process listens on is taken at once. A port held only by
    closing connections (a daemon just killed) is waited for, up to
    ``closing_wait`` seconds.
    """
    for name in daemon.ports:
        port = ports[name]
        deadline = time.monotonic() + closing_wait
        while port_in_use(port, host):
            listening = _listening_inodes(port)
            if listening or time.monotonic() > deadline:
                by = (
                    _owner_of(listening)
                    if listening
                    else f"connections still closing after {closing_wait:.0f} s"
                )
                raise ClusterError(
                    f"cannot start the {daemon.title}: port {port} "
                    f"({PORTS[name][2]}, '{name}') on {host} is already in use by "
                    f"{by}. Stop that process, or start the cluster on other ports "
                    f"with `tfyarn cluster start --port-offset 1000` or `--port "
                    f"{name}=PORT` (a cluster that already exists needs `tfyarn "
                    "cluster stop` first)."
                )
            time.sleep(0.5)


def log_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def log_excerpt(path: Path, *, lines: int = 8, since: int = 0) -> str:
    """The last ERROR/FATAL/exception lines of a log after byte ``since``, for an
    error message (logs are appended to across starts)."""
    try:
        with open(path, "rb") as stream:
            stream.seek(since if since <= log_size(path) else 0)
            text = stream.read().decode(errors="replace").splitlines()
    except OSError:
        return ""
    keys = (" ERROR ", " FATAL ", "Exception", "Error:", "Caused by")
    picked = [line.strip() for line in text if any(k in line for k in keys)]
    if not picked:
        picked = [line.strip() for line in text if line.strip()]
    return "\n    ".join(line[:300] for line in picked[-lines:])
