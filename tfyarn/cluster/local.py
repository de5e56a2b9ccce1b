"""A real YARN + HDFS cluster on this machine: four JVMs on loopback."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from tfyarn.cluster import _hadoop, _probe, _process, _render
from tfyarn.cluster._process import DAEMONS, Daemon
from tfyarn.cluster._settings import (
    ClusterSettings,
    default_base_dir,
    load_settings,
    save_settings,
)
from tfyarn.errors import ClusterError

START_TIMEOUT_S = 240.0
# What the NameNode's safe-mode status says when its disk is too full
# (FSNamesystem: "Resources are low on NN. Please add or free up more resources...").
_LOW_RESOURCES = "Resources are low on NN"
MIN_FREE_DISK_BYTES = 1 << 30
Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


@dataclasses.dataclass(frozen=True)
class DaemonStatus:
    """One daemon: its pid (None when not running), ports and log file."""

    name: str
    title: str
    pid: int | None
    ports: dict[str, int]
    log: Path


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

    @property
    def running(self) -> bool:
        return self.state == "running"

    def format(self) -> str:
        """Human-readable report."""
        lines = [f"Local cluster in {self.base_dir}: {self.state}"]
        for d in self.daemons:
            ports = ", ".join(f"{p}" for p in d.ports.values())
            pid = f"pid {d.pid}" if d.pid else "not running"
            lines.append(f"  {d.title:<16} {pid:<14} ports {ports}")
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
        if self.state != "stopped":
            for name, url in self.web_uis.items():
                lines.append(f"  {name + ' UI':<20} {url}")
        lines.append(f"  config  {self.base_dir / 'conf'}")
        lines.append(f"  data    {self.base_dir / 'data'}")
        lines.append(
            f"  logs    {self.base_dir / 'logs'} (containers: logs/containers)"
        )
        return "\n".join(lines)


class LocalCluster:
    """A single-machine Hadoop cluster: NameNode, DataNode, ResourceManager and
    NodeManager as separate JVMs on 127.0.0.1.

    Parameters
    ----------
    base_dir : path, optional
        Where configuration, data, logs and pid files live. Defaults to
        ``$TFYARN_CLUSTER_HOME`` or ``~/.local/share/tfyarn/cluster``.

    Examples
    --------
    >>> cluster = LocalCluster()
    >>> cluster.start()                      # doctest: +SKIP
    >>> os.environ.update(cluster.env_vars())  # doctest: +SKIP
    >>> cluster.stop()                       # doctest: +SKIP
    """

    def __init__(self, base_dir: str | os.PathLike[str] | None = None) -> None:
        self.base_dir = (
            Path(base_dir).expanduser().resolve() if base_dir else default_base_dir()
        )
        # Where each daemon's log stood when this object started it.
        self._log_offsets: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"LocalCluster(base_dir={str(self.base_dir)!r})"

    @property
    def conf_dir(self) -> Path:
        return self.base_dir / "conf"

    @property
    def bin_dir(self) -> Path:
        return self.base_dir / "bin"

    @property
    def logs_dir(self) -> Path:
        return self.base_dir / "logs"

    @property
    def data_dir(self) -> Path:
        return self.base_dir / "data"

    def settings(self) -> ClusterSettings:
        """The settings the cluster was last started with (defaults if never)."""
        return load_settings(self.base_dir) or ClusterSettings()

    # -- state -------------------------------------------------------------

    def pids(self) -> dict[str, int | None]:
        """Each daemon's pid, None for one not running."""
        return {d.name: _process.running_pid(self.base_dir, d) for d in DAEMONS}

    def is_running(self) -> bool:
        """Whether all four daemons run (not whether they are ready)."""
        return all(pid is not None for pid in self.pids().values())

    def status(self) -> ClusterStatus:
        """Processes, ports, node resources and HDFS state.

        Returns
        -------
        ClusterStatus
        """
        settings = self.settings()
        ports = settings.resolved_ports()
        pids = self.pids()
        daemons = [
            DaemonStatus(
                name=d.name,
                title=d.title,
                pid=pids[d.name],
                ports={p: ports[p] for p in d.ports},
                log=_process.log_file(self.base_dir, d.name),
            )
            for d in DAEMONS
        ]
        up = sum(pid is not None for pid in pids.values())
        state = "running" if up == len(DAEMONS) else "stopped" if up == 0 else "partial"
        nodes = _probe.yarn_nodes(ports["rm_web"]) if pids["resourcemanager"] else None
        hdfs = _probe.hdfs_health(ports["namenode_http"]) if pids["namenode"] else None
        return ClusterStatus(
            base_dir=self.base_dir,
            state=state,
            daemons=daemons,
            settings=settings,
            nodes=nodes,
            hdfs=hdfs,
            web_uis=self.web_uis(settings),
        )

    def web_uis(self, settings: ClusterSettings | None = None) -> dict[str, str]:
        ports = (settings or self.settings()).resolved_ports()
        return {
            "ResourceManager": f"http://127.0.0.1:{ports['rm_web']}",
            "NameNode": f"http://127.0.0.1:{ports['namenode_http']}",
            "NodeManager": f"http://127.0.0.1:{ports['nm_web']}",
            "DataNode": f"http://127.0.0.1:{ports['datanode_http']}",
        }

    def env_vars(self) -> dict[str, str]:
        """Environment that points Hadoop clients (and skein) at this cluster.

        ``yarn``/``hdfs``/``hadoop`` on PATH, HADOOP_CONF_DIR, JAVA_HOME, and the
        JVM flags skein's Java driver needs on Java 9+.
        """
        if not (self.bin_dir / "yarn").is_file():
            raise ClusterError(
                f"no local cluster has been set up in {self.base_dir}; run "
                "`tfyarn cluster start` first"
            )
        java_home = _hadoop.find_java_home()
        path = os.environ.get("PATH", "")
        parts = [p for p in path.split(os.pathsep) if p and p != str(self.bin_dir)]
        return {
            "HADOOP_CONF_DIR": str(self.conf_dir),
            "JAVA_HOME": str(java_home),
            "PATH": os.pathsep.join([str(self.bin_dir), *parts]),
            "SKEIN_DRIVER_JAVA_OPTIONS": " ".join(_hadoop.java_module_flags(java_home)),
            "TFYARN_CLUSTER_HOME": str(self.base_dir),
        }

    def shell_exports(self) -> str:
        """``export`` lines for ``eval "$(tfyarn cluster env)"``."""
        env = self.env_vars()
        bin_dir = shlex.quote(str(self.bin_dir))
        lines = [
            f"export {name}={shlex.quote(value)}"
            for name, value in env.items()
            if name != "PATH"
        ]
        # Prepend to the shell's own PATH, once, however often this is eval'ed.
        lines.append(
            f'case ":$PATH:" in *:{bin_dir}:*) ;; '
            f'*) export PATH={bin_dir}:"$PATH" ;; esac'
        )
        return "\n".join(lines) + "\n"

    # -- start -------------------------------------------------------------

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        # Serializes start/stop: several test sessions may start the shared
        # cluster at once; the second must find it running, not start another.
        self.base_dir.mkdir(parents=True, exist_ok=True)
        with open(self.base_dir / ".lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            yield

    def start(
        self,
        settings: ClusterSettings | None = None,
        *,
        timeout: float = START_TIMEOUT_S,
        log: Log = _quiet,
    ) -> ClusterStatus:
        """Start the cluster, or find it running; return once it is usable.

        Usable means HDFS has left safe mode with a live DataNode and the
        NodeManager is RUNNING in the ResourceManager.

        Parameters
        ----------
        settings : ClusterSettings, optional
            Size and ports. Defaults to the settings of the previous start, or
            ``ClusterSettings()`` for a new cluster. A running cluster keeps its
            settings: asking for others is an error until it is stopped.
        timeout : float
            Seconds to wait for the daemons to become ready (the first-time
            download of Hadoop is not counted).
        log : callable
            Receives progress messages.

        Returns
        -------
        ClusterStatus
            With ``already_running`` set when nothing had to be started.

        Raises
        ------
        ClusterError
            No Java or Maven, download failed, a port is taken, a daemon died or
            did not become ready in time, the disk is too full. Daemons this call
            started are stopped again before it raises.
        """
        with self._lock():
            return self._start_locked(settings, timeout=timeout, log=log)

    def _start_locked(
        self, requested: ClusterSettings | None, *, timeout: float, log: Log
    ) -> ClusterStatus:
        saved = load_settings(self.base_dir)
        settings = requested or saved or ClusterSettings()
        pids = self.pids()
        running = [name for name, pid in pids.items() if pid is not None]
        if running and saved is not None and settings != saved:
            raise ClusterError(
                f"the local cluster in {self.base_dir} is running with other "
                f"settings ({_describe(saved)}) than asked for ({_describe(settings)}). "
                "Run `tfyarn cluster stop` first to change them."
            )
        if len(running) == len(DAEMONS):
            self._wait_ready(settings, {}, timeout=timeout, log=_quiet)
            return dataclasses.replace(self.status(), already_running=True)

        self._check_path()
        self._check_disk()
        java_home = _hadoop.find_java_home()
        module_flags = _hadoop.java_module_flags(java_home)
        lib_dir = _hadoop.fetch_hadoop(log=log)
        for sub in ("logs", "run", "data", "tmp"):
            (self.base_dir / sub).mkdir(parents=True, exist_ok=True)
        if not running:  # never rewrite the config under a live daemon
            _render.write_config(settings, base_dir=self.base_dir, lib_dir=lib_dir)
            _render.write_wrappers(
                base_dir=self.base_dir,
                java_home=java_home,
                lib_dir=lib_dir,
                module_flags=module_flags,
            )
            save_settings(self.base_dir, settings)

        ports = settings.resolved_ports()
        started: dict[str, subprocess.Popen[bytes]] = {}
        to_start = [d for d in DAEMONS if pids[d.name] is None]
        for daemon in to_start:  # all before any JVM starts: fail fast, leave nothing
            _process.check_ports_free(daemon, ports)
        try:
            if pids["namenode"] is None:
                self._format_if_needed(java_home, module_flags, log)
            env = self._daemon_env(java_home, module_flags)
            for daemon in to_start:
                command = _process.java_command(
                    daemon.main_class,
                    java_home=java_home,
                    base_dir=self.base_dir,
                    classpath=_hadoop.daemon_classpath(self.conf_dir),
                    heap=daemon.heap,
                    module_flags=module_flags,
                    log_name=daemon.name,
                )
                log(f"Starting {daemon.title} ...")
                self._log_offsets[daemon.name] = _process.log_size(
                    _process.log_file(self.base_dir, daemon.name)
                )
                started[daemon.name] = _process.spawn(
                    daemon, command, base_dir=self.base_dir, env=env
                )
            self._wait_ready(settings, started, timeout=timeout, log=log)
        except BaseException:
            # Leave no half-started cluster behind.
            _process.terminate([p.pid for p in started.values()], grace=10)
            raise
        return self.status()

    def _check_path(self) -> None:
        # Hadoop lists directories comma-separated and turns them into URIs.
        bad = sorted({c for c in str(self.base_dir) if c in ", \t\n%#"})
        if bad:
            raise ClusterError(
                f"the cluster's base dir {str(self.base_dir)!r} contains "
                f"{' '.join(repr(c) for c in bad)}, which Hadoop's configuration "
                "cannot carry; choose another with `--base-dir` or "
                "$TFYARN_CLUSTER_HOME."
            )

    def _check_disk(self) -> None:
        free = shutil.disk_usage(self.base_dir).free
        if free < MIN_FREE_DISK_BYTES:
            raise ClusterError(
                f"only {free / 2**20:.0f} MiB free on the disk holding {self.base_dir}; "
                "HDFS and the NodeManager need at least 1 GiB to store blocks, "
                "container files and logs. Free some space, or start the cluster "
                "elsewhere with `tfyarn cluster start --base-dir DIR`."
            )

    def _daemon_env(
        self, java_home: Path, module_flags: tuple[str, ...]
    ) -> dict[str, str]:
        env = dict(os.environ)
        # Containers inherit the NodeManager's PATH: the client's Python comes
        # first, so `python3` in a container is the interpreter running tfyarn.
        python_bin = str(Path(sys.executable).parent)
        path = [p for p in env.get("PATH", "").split(os.pathsep) if p]
        env["PATH"] = os.pathsep.join([python_bin, str(self.bin_dir), *path])
        env["JAVA_HOME"] = str(java_home)
        env["HADOOP_CONF_DIR"] = str(self.conf_dir)
        # Passed on to containers (yarn.nodemanager.env-whitelist): the JVMs in
        # them (skein's application master) need the same --add-opens flags.
        env["JDK_JAVA_OPTIONS"] = " ".join(module_flags)
        env.pop("CLASSPATH", None)
        return env

    def _format_if_needed(
        self, java_home: Path, module_flags: tuple[str, ...], log: Log
    ) -> None:
        name_dir = self.data_dir / "namenode"
        if (name_dir / "current" / "VERSION").is_file():
            return
        log("Formatting the NameNode (first start) ...")
        # A DataNode directory from another format would be refused (cluster ID).
        shutil.rmtree(self.data_dir / "datanode", ignore_errors=True)
        command = _process.java_command(
            "org.apache.hadoop.hdfs.server.namenode.NameNode",
            java_home=java_home,
            base_dir=self.base_dir,
            classpath=_hadoop.daemon_classpath(self.conf_dir),
            heap="256m",
            module_flags=module_flags,
            log_name="namenode-format",
            args=["-format", "-force", "-nonInteractive"],
        )
        out = _process.out_file(self.base_dir, "namenode-format")
        logfile = _process.log_file(self.base_dir, "namenode-format")
        try:
            with open(out, "wb") as stream:
                proc = subprocess.run(
                    command,
                    stdout=stream,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    timeout=180,
                    check=False,
                    env=self._daemon_env(java_home, module_flags),
                )
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(
                f"formatting the NameNode took more than 180 s; see {logfile}"
            ) from exc
        if proc.returncode != 0 or not (name_dir / "current" / "VERSION").is_file():
            raise ClusterError(
                f"formatting the NameNode failed (exit {proc.returncode}):\n    "
                f"{_process.log_excerpt(logfile) or _process.log_excerpt(out)}\n"
                f"Full log: {logfile}. Fix the cause, or start from scratch with "
                "`tfyarn cluster stop --wipe`."
            )

    def _wait_ready(
        self,
        settings: ClusterSettings,
        started: dict[str, subprocess.Popen[bytes]],
        *,
        timeout: float,
        log: Log,
    ) -> None:
        ports = settings.resolved_ports()
        deadline = time.monotonic() + timeout
        hdfs: _probe.HdfsHealth | None = None
        nodes: list[_probe.NodeReport] | None = None
        hdfs_logged = yarn_logged = False
        while True:
            for daemon in DAEMONS:
                proc = started.get(daemon.name)
                died = proc is not None and proc.poll() is not None
                if died or (
                    not started and _process.running_pid(self.base_dir, daemon) is None
                ):
                    raise ClusterError(self._died_message(daemon, proc))
            if hdfs is None or not hdfs.ready:
                hdfs = _probe.hdfs_health(ports["namenode_http"])
                if hdfs is not None and _LOW_RESOURCES in hdfs.safe_mode:
                    raise ClusterError(self._disk_full_message(hdfs))
            if hdfs is not None and hdfs.ready and not hdfs_logged:
                log("HDFS is up (out of safe mode, DataNode live).")
                hdfs_logged = True
            nodes = _probe.yarn_nodes(ports["rm_web"])
            yarn_ready = bool(nodes) and any(n.state == "RUNNING" for n in nodes or [])
            if yarn_ready and not yarn_logged:
                log("YARN is up (NodeManager RUNNING).")
                yarn_logged = True
            if hdfs_logged and yarn_ready:
                return
            if time.monotonic() > deadline:
                raise ClusterError(self._timeout_message(timeout, hdfs, nodes))
            time.sleep(0.5)

    def _disk_full_message(self, hdfs: _probe.HdfsHealth) -> str:
        return (
            "HDFS stays in safe mode because the disk holding "
            f"{self.data_dir} is too full (the NameNode says: "
            f"{hdfs.safe_mode.strip()[:200]}). NameNode log: "
            f"{_process.log_file(self.base_dir, 'namenode')}. Free disk space there "
            "and run `tfyarn cluster stop` and `tfyarn cluster start`, or start a "
            "cluster elsewhere with `--base-dir DIR`."
        )

    def _died_message(
        self, daemon: Daemon, proc: subprocess.Popen[bytes] | None
    ) -> str:
        logfile = _process.log_file(self.base_dir, daemon.name)
        out = _process.out_file(self.base_dir, daemon.name)
        code = f" with exit code {proc.returncode}" if proc is not None else ""
        since = self._log_offsets.get(daemon.name, 0)
        excerpt = _process.log_excerpt(logfile, since=since) or _process.log_excerpt(
            out
        )
        return (
            f"the {daemon.title} exited during start{code}. Last errors:\n    "
            f"{excerpt or '(nothing logged)'}\n"
            f"Its log: {logfile} (JVM output: {out}). Fix the cause shown there; "
            "if its data is corrupt, `tfyarn cluster stop --wipe` starts afresh."
        )

    def _timeout_message(
        self,
        timeout: float,
        hdfs: _probe.HdfsHealth | None,
        nodes: list[_probe.NodeReport] | None,
    ) -> str:
        problems = []
        if hdfs is None:
            problems.append(
                "the NameNode web endpoint never answered (log: "
                f"{_process.log_file(self.base_dir, 'namenode')})"
            )
        elif not hdfs.ready:
            why = hdfs.safe_mode.strip() or f"{hdfs.live_datanodes} live DataNodes"
            problems.append(
                f"HDFS is not ready: {why} (logs: "
                f"{_process.log_file(self.base_dir, 'namenode')}, "
                f"{_process.log_file(self.base_dir, 'datanode')})"
            )
        if nodes is None:
            problems.append(
                "the ResourceManager web endpoint never answered (log: "
                f"{_process.log_file(self.base_dir, 'resourcemanager')})"
            )
        elif not any(n.state == "RUNNING" for n in nodes):
            seen = ", ".join(f"{n.node_id} {n.state} {n.health}" for n in nodes)
            problems.append(
                f"no NodeManager is RUNNING ({seen or 'none registered'}; log: "
                f"{_process.log_file(self.base_dir, 'nodemanager')})"
            )
        return (
            f"the local cluster was not ready after {timeout:.0f} s: "
            + "; ".join(problems)
            + ". A busy machine may need a longer --timeout; otherwise the logs "
            "above name the cause. The daemons started by this attempt were stopped."
        )

    # -- stop --------------------------------------------------------------

    def stop(self, *, wipe: bool = False, log: Log = _quiet) -> list[str]:
        """Stop every process of this cluster, containers included.

        Parameters
        ----------
        wipe : bool
            Also delete HDFS data, container files, logs and the configuration.

        Returns
        -------
        list of str
            Titles of the daemons that were running.
        """
        with self._lock():
            stopped = []
            for daemon in reversed(DAEMONS):
                pid = _process.running_pid(self.base_dir, daemon)
                if pid is None:
                    continue
                log(f"Stopping {daemon.title} (pid {pid}) ...")
                _process.terminate([pid])
                stopped.append(daemon.title)
                _process.pid_file(self.base_dir, daemon.name).unlink(missing_ok=True)
            leftovers = _process.strays(self.base_dir)
            if leftovers:
                log(f"Stopping {len(leftovers)} leftover process(es) ...")
                _process.terminate(leftovers, grace=5)
            if wipe:
                for sub in ("data", "logs", "tmp", "conf", "bin", "run"):
                    shutil.rmtree(self.base_dir / sub, ignore_errors=True)
                (self.base_dir / "cluster.json").unlink(missing_ok=True)
                log(
                    f"Deleted the cluster's data, logs and configuration in {self.base_dir}."
                )
            return stopped


def _describe(settings: ClusterSettings) -> str:
    return (
        f"{settings.memory_mb} MiB, {settings.vcores} vcores, {settings.gpus} GPUs, "
        f"port offset {settings.port_offset}"
        + (f", ports {dict(settings.ports)}" if settings.ports else "")
    )


def use_local_cluster(
    base_dir: str | os.PathLike[str] | None = None, *, override: bool = False
) -> dict[str, str] | None:
    """Point this process at a running local cluster, if there is one.

    When HADOOP_CONF_DIR is unset (or ``override`` is true) and the local
    cluster in ``base_dir`` is running, its environment (see
    ``LocalCluster.env_vars``) is put into ``os.environ``.

    Returns
    -------
    dict or None
        The variables set, or None when nothing changed.
    """
    if os.environ.get("HADOOP_CONF_DIR") and not override:
        return None
    cluster = LocalCluster(base_dir)
    if not cluster.is_running():
        return None
    env = cluster.env_vars()
    os.environ.update(env)
    return env
