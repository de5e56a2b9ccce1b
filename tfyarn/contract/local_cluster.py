"""Where ``tfyarn cluster start``'s cluster lives, and whether its daemons run.

The cluster package (:mod:`tfyarn.cluster`) starts the daemons and writes their
pid files; the Hadoop configuration reader (:mod:`tfyarn.contract.hadoop_conf`)
uses the cluster's configuration while its NameNode runs. Both ask here, so
they agree on where the cluster is and which process is its daemon.

A daemon is the cluster's when its pid file (``<home>/run/<name>.pid``) names a
live process (not a zombie) whose command line carries
``-Dtfyarn.cluster.home=<home>``: a recycled pid never matches.

Examples
--------
>>> home_marker(Path("/data/cluster"))
'-Dtfyarn.cluster.home=/data/cluster'
>>> pid_file(Path("/data/cluster"), "namenode")
PosixPath('/data/cluster/run/namenode.pid')
"""

from __future__ import annotations

import os
from pathlib import Path

#: Where ``tfyarn cluster start`` keeps its cluster (else the XDG data home).
HOME_ENV = "TFYARN_CLUSTER_HOME"
#: The NameNode's main class, on its command line.
NAMENODE_MAIN_CLASS = "org.apache.hadoop.hdfs.server.namenode.NameNode"
#: The NameNodes' pid file names: ``namenode``, and ``namenode2`` with HA.
NAMENODE_KEYS = ("namenode", "namenode2")


def default_home() -> Path:
    """Where the cluster lives unless told otherwise.

    ``$TFYARN_CLUSTER_HOME`` if set, else ``$XDG_DATA_HOME/tfyarn/cluster``
    (``~/.local/share/tfyarn/cluster``), resolved.
    """
    explicit = os.environ.get(HOME_ENV)
    if explicit:
        return Path(explicit).expanduser().resolve()
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local/share")
    return (Path(data_home).expanduser() / "tfyarn" / "cluster").resolve()


def conf_dir(home: Path) -> Path:
    """The cluster's client configuration directory (what HADOOP_CONF_DIR names)."""
    return home / "conf"


def home_marker(home: Path) -> str:
    """The JVM option every daemon of the cluster in ``home`` is started with."""
    return f"-Dtfyarn.cluster.home={home}"


def pid_file(home: Path, name: str) -> Path:
    """Where daemon ``name``'s pid is kept (``namenode``, ``nodemanager-node2``)."""
    return home / "run" / f"{name}.pid"


def command_line(pid: int) -> list[str]:
    """The arguments of process ``pid``, or ``[]`` if it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode(errors="replace") for part in raw.split(b"\0") if part]


def is_dead(pid: int) -> bool:
    """Whether process ``pid`` runs no more: gone, or a zombie all of whose
    threads have ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    state = stat.rsplit(")", 1)[-1].split()  # the name in (...) may hold spaces
    if not state or state[0] == "X":
        return True
    if state[0] != "Z":
        return False
    # The main thread shows Z as soon as it exits, while the other threads (a
    # JVM's dozens) may still be ending, holding its files and listening sockets.
    try:
        return len(os.listdir(f"/proc/{pid}/task")) <= 1
    except OSError:
        return True


def is_ours(pid: int, home: Path, main_class: str | None = None) -> bool:
    """Whether ``pid`` is alive and a JVM the cluster in ``home`` started.

    Parameters
    ----------
    pid : int
        The process.
    home : Path
        The cluster's home, as its daemons were started with it.
    main_class : str, optional
        The daemon's main class, which must be on its command line too.
    """
    args = command_line(pid)
    if not args or is_dead(pid) or home_marker(home) not in args:
        return False
    return main_class is None or main_class in args


def running_pid(home: Path, name: str, main_class: str | None = None) -> int | None:
    """The pid of the cluster's daemon ``name`` while it runs, else None.

    Parameters
    ----------
    home : Path
        The cluster's home.
    name : str
        Its pid file's name (:func:`pid_file`).
    main_class : str, optional
        The daemon's main class (see :func:`is_ours`).
    """
    try:
        pid = int(pid_file(home, name).read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if is_ours(pid, home, main_class) else None
