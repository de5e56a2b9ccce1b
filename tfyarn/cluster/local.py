"""A real YARN + HDFS cluster on this machine: four JVMs on loopback, or a
NameNode and ResourceManager on a bridge with hosts in network namespaces."""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shlex
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

from tfyarn.cluster import (
    _daemon_archive,
    _daemons,
    _driver_archive,
    _ha,
    _hadoop,
    _hosts,
    _netns,
    _prepare,
    _probe,
    _process,
    _ready,
    _render,
    _secure,
    _stop,
    _versions,
)
from tfyarn.cluster._rehearsals import Rehearsals
from tfyarn.cluster._secure import SecureCluster, namenode_web, secure_ports
from tfyarn.cluster._settings import (
    ClusterSettings,
    default_base_dir,
    describe_settings,
    load_settings,
    save_settings,
)
from tfyarn.cluster._status import (
    ClusterStatus,
    DaemonStatus,
    Instance,
    host_statuses,
    instances,
    jdk_description,
)
from tfyarn.contract import hadoop_conf
from tfyarn.errors import ClusterError

START_TIMEOUT_S = 240.0
Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


class LocalCluster(Rehearsals):
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

    def secure(self, settings: ClusterSettings | None = None) -> SecureCluster:
        """The Kerberos side of a secure cluster (its KDC, keytabs, ticket)."""
        return SecureCluster(self.base_dir, settings or self.settings())

    # -- state -------------------------------------------------------------

    def layout(self) -> _netns.Layout | None:
        """The hosts a multi-host start made (None for loopback or never started)."""
        return _netns.load_layout(self.base_dir)

    def instances(self) -> list[Instance]:
        return instances(self.settings(), self.layout())

    def pids(self) -> dict[str, int | None]:
        """Each daemon's pid by key, None for one not running."""
        return {
            i.key: _process.running_pid(self.base_dir, i.daemon, i.key)
            for i in self.instances()
        }

    def master_address(self) -> str:
        lay = self.layout()
        return lay.master_address if lay and self.settings().multihost else "127.0.0.1"

    def is_running(self) -> bool:
        """Whether all its daemons run (not whether they are ready)."""
        return all(pid is not None for pid in self.pids().values())

    def status(self) -> ClusterStatus:
        """Processes, ports, node resources and HDFS state.

        Returns
        -------
        ClusterStatus
        """
        settings = self.settings()
        ports = _secure.bound_ports(settings)  # where each daemon listens
        pids = self.pids()
        found = self.instances()
        daemons = [
            DaemonStatus(
                name=i.key,
                title=i.daemon.title + (f" {i.host.name}" if i.host else ""),
                pid=pids[i.key],
                ports={p: ports[p] for p in i.daemon.ports},
                log=_process.log_file(self.base_dir, i.key),
                host=i.host.host if i.host else None,
            )
            for i in found
        ]
        up = sum(pid is not None for pid in pids.values())
        state = "running" if up == len(found) else "stopped" if up == 0 else "partial"
        master = self.master_address()
        rms = [m.key for m, _ in _ha.rm_webs(settings)]
        nodes = (
            _probe.yarn_nodes(_ha.active_rm_web(settings, master), master)
            if any(pids[key] for key in rms)
            else None
        )
        nns = [m.key for m, _ in _ha.namenode_webs(settings)]
        nn_web, https = _ha.active_namenode_web(settings, master)
        hdfs = (
            _probe.hdfs_health(nn_web, master, https=https)
            if any(pids[key] for key in nns)
            else None
        )
        ha = (
            {
                "namenode": _ha.states(_ha.namenode_webs(settings), master),
                "resourcemanager": _ha.states(_ha.rm_webs(settings), master),
            }
            if settings.ha
            else {}
        )
        return ClusterStatus(
            base_dir=self.base_dir,
            state=state,
            daemons=daemons,
            settings=settings,
            nodes=nodes,
            hdfs=hdfs,
            web_uis=self.web_uis(settings),
            hosts=host_statuses(
                settings, self.layout(), pids, nodes, base_dir=self.base_dir
            ),
            kerberos=self.secure(settings).status() if settings.secure else None,
            ha=ha,
            jdk=jdk_description(pids),
        )

    def web_uis(self, settings: ClusterSettings | None = None) -> dict[str, str]:
        settings = settings or self.settings()
        ports = settings.resolved_ports()
        master = self.master_address()
        nn_web, https = namenode_web(settings)
        uis = {
            "ResourceManager": f"http://{master}:{ports['rm_web']}",
            "NameNode": f"{'https' if https else 'http'}://{master}:{nn_web}",
        }
        if settings.ha:
            uis = _ha.web_uis(settings, master)
        lay = self.layout()
        if settings.multihost and lay is not None:
            for h in lay.hosts:
                uis[f"NodeManager {h.name}"] = f"http://{h.address}:{ports['nm_web']}"
        else:
            uis["NodeManager"] = f"http://127.0.0.1:{ports['nm_web']}"
            dn_web = f"http://127.0.0.1:{ports['datanode_http']}"
            if https:  # HTTPS_ONLY: the DataNode's HTTP port is closed too
                dn_web = f"https://127.0.0.1:{secure_ports(settings)['datanode_https']}"
            uis["DataNode"] = dn_web
        return uis

    def env_vars(self) -> dict[str, str]:
        """Environment that points Hadoop clients (and skein) at this cluster.

        ``yarn``/``hdfs``/``hadoop`` on PATH, HADOOP_CONF_DIR, JAVA_HOME, and the
        JVM flags skein's Java driver needs on Java 9+ (and quick-start ones).
        """
        if not (self.bin_dir / "yarn").is_file():
            raise ClusterError(
                f"no local cluster has been set up in {self.base_dir}; run "
                "`tfyarn cluster start` first"
            )
        java_home = _hadoop.find_java_home()
        path = os.environ.get("PATH", "")
        parts = [p for p in path.split(os.pathsep) if p and p != str(self.bin_dir)]
        version = self.settings().hadoop_version
        flags = [*_render.CLI_JVM_FLAGS, *_hadoop.java_module_flags(java_home, version)]
        secure = self.secure() if self.settings().secure else None
        if secure:  # Java ignores KRB5_CONFIG: the driver needs the flag
            flags += secure.java_flags()
        flags += _driver_archive.java_options(
            java_home, _driver_archive.archive_path(java_home, version)
        )
        return {
            "HADOOP_CONF_DIR": str(self.conf_dir),
            "JAVA_HOME": str(java_home),
            "PATH": os.pathsep.join([str(self.bin_dir), *parts]),
            "SKEIN_DRIVER_JAVA_OPTIONS": " ".join(flags),
            "TFYARN_CLUSTER_HOME": str(self.base_dir),
            **(secure.env() if secure else {}),
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
        pids = self.pids() if saved is not None else {}
        running = [name for name, pid in pids.items() if pid is not None]
        if running and saved is not None and settings != saved:
            raise ClusterError(
                f"the local cluster in {self.base_dir} is running with other "
                f"settings ({describe_settings(saved)}) than asked for ({describe_settings(settings)}). "
                "Run `tfyarn cluster stop` first to change them."
            )
        # Before anything starts (the KDC of a secure cluster included).
        before = saved.hadoop_version if saved is not None else None
        _versions.check_switch(self.base_dir, before, settings.hadoop_version)
        secure = self.secure(settings) if settings.secure else None
        kdc_was_up = secure is None or secure.kdc.pid() is not None
        if secure:  # the KDC first: every secure JVM logs in as it starts
            secure.start(_hadoop.find_java_home(), log)
        if pids and len(running) == len(pids):
            self._wait_ready(settings, {}, timeout=timeout, log=_quiet)
            return dataclasses.replace(self.status(), already_running=True)
        if settings.multihost:
            _netns.check_can_make_hosts()  # before anything is made

        _prepare.check_base_dir(self.base_dir)
        java_home, module_flags = self._daemon_java(settings)
        lib_dir = _hadoop.prepare(settings.hadoop_version, java_home, log=log)
        for sub in ("logs", "run", "data", "tmp"):
            (self.base_dir / sub).mkdir(parents=True, exist_ok=True)

        made_hosts = False
        started: dict[str, subprocess.Popen[bytes]] = {}
        try:
            lay = None
            if settings.multihost:
                lay = self.layout() if running else None
                if lay is None:
                    if running:  # a previous start's daemons but no record of hosts
                        raise ClusterError(
                            f"daemons of the cluster in {self.base_dir} run but its "
                            "hosts are unknown; run `tfyarn cluster stop` first"
                        )
                    lay = _hosts.make(self.base_dir, settings, log)
                    made_hosts = True
            if not running:  # never rewrite the config under a live daemon
                _prepare.write_config(self.base_dir, settings, lay, lib_dir)
                # A new life: recover nothing of the last (a daemon restarted
                # while others run keeps the stores, and its jobs).
                _prepare.wipe_recovery_stores(self.base_dir)
                _render.write_wrappers(
                    base_dir=self.base_dir,
                    java_home=java_home,
                    lib_dir=lib_dir,
                    module_flags=module_flags,
                )
                save_settings(self.base_dir, settings)

            ports = _secure.bound_ports(settings)  # as bound (secure: HTTPS)
            master = lay.master_address if lay else "127.0.0.1"
            all_instances = instances(settings, lay)
            pids = self.pids()
            to_start = [i for i in all_instances if pids[i.key] is None]
            for inst in to_start:  # all before any JVM starts: fail fast
                if inst.host is None:
                    _process.check_ports_free(inst.daemon, ports, master)
            if settings.ha:
                # ZooKeeper and the journal first: the formats below need them.
                to_start = self._start_coordinators(
                    to_start, started, java_home, module_flags, log
                )
            elif pids["namenode"] is None:
                _daemons.format_namenode_if_needed(
                    self.base_dir,
                    java_home,
                    module_flags,
                    log,
                    hadoop_version=settings.hadoop_version,
                )
            if pids["resourcemanager"] is None:
                # Labels come from this start's settings, never an old store.
                shutil.rmtree(_render.label_store(self.base_dir), ignore_errors=True)
            for inst in to_start:
                started[inst.key] = self._spawn(inst, java_home, module_flags, log)
            self._wait_ready(settings, started, timeout=timeout, log=log)
            if "resourcemanager" in started and lay is not None:
                _ready.apply_labels(
                    self.base_dir,
                    settings,
                    lay,
                    master=self.master_address(),
                    env=_daemons.daemon_env(self.base_dir, java_home, module_flags),
                    log=log,
                )
        except BaseException:
            # Leave no half-started cluster behind: daemons, then the hosts.
            _process.terminate([p.pid for p in started.values()], grace=10)
            for key in started:  # a start that failed is no daemon's whole life
                _daemon_archive.discard(self.base_dir, key)
            if made_hosts:
                _hosts.remove(self.base_dir, log=_quiet)
            if secure and not kdc_was_up:
                secure.stop()
            raise
        # Later commands' drivers start quicker from it (made once per JDK,
        # skein and Hadoop line, in the background).
        _driver_archive.start_making(
            self.base_dir,
            self.env_vars(),
            java_home,
            _driver_archive.archive_path(java_home, settings.hadoop_version),
        )
        return self.status()

    def _start_coordinators(
        self,
        to_start: list[Instance],
        started: dict[str, subprocess.Popen[bytes]],
        java_home: Path,
        module_flags: tuple[str, ...],
        log: Log,
    ) -> list[Instance]:
        """An HA start's first step: ZooKeeper and the JournalNode started and
        listening, HDFS formatted (first start) and the failover controllers'
        znode made (fresh ZooKeeper). Returns the daemons still to start."""
        first = [i for i in to_start if i.daemon.name in _ha.COORDINATORS]
        zk_fresh = not (_ha.zookeeper_dir(self.base_dir) / "version-2").is_dir()
        for inst in first:
            started[inst.key] = self._spawn(inst, java_home, module_flags, log)
        _ready.wait_listening(
            self.base_dir,
            self.settings(),
            [i for i in self.instances() if i.daemon.name in _ha.COORDINATORS],
            started,
            master=self.master_address(),
            log_offsets=self._log_offsets,
        )
        version = self.settings().hadoop_version
        _daemons.format_namenode_if_needed(
            self.base_dir,
            java_home,
            module_flags,
            log,
            hadoop_version=version,
            ha=True,
        )
        if zk_fresh:
            log("Making the failover controllers' znode in ZooKeeper ...")
            _daemons.format_failover_state(
                self.base_dir, java_home, module_flags, hadoop_version=version
            )
        return [i for i in to_start if i not in first]

    def host_dir(self, host: _netns.Host) -> Path:
        return _prepare.host_dir(self.base_dir, host)

    def _daemon_java(self, settings: ClusterSettings) -> tuple[Path, tuple[str, ...]]:
        """The JDK and the flags every daemon's JVM of ``settings`` starts with."""
        java_home = _hadoop.find_java_home()
        module_flags = _hadoop.java_module_flags(java_home, settings.hadoop_version)
        if settings.secure:  # daemons, CLIs and (JDK_JAVA_OPTIONS) containers' JVMs
            module_flags = (*module_flags, *self.secure(settings).java_flags())
        return java_home, module_flags

    def _spawn(
        self,
        inst: Instance,
        java_home: Path,
        module_flags: tuple[str, ...],
        log: Log,
    ) -> subprocess.Popen[bytes]:
        conf = self.conf_dir if inst.host is None else self.host_dir(inst.host) / "conf"
        command = _process.java_command(
            inst.daemon.main_class,
            java_home=java_home,
            base_dir=self.base_dir,
            classpath=_hadoop.daemon_classpath(conf, self.settings().hadoop_version),
            heap=inst.daemon.heap,
            module_flags=module_flags,
            log_name=inst.key,
            args=_ha.daemon_args(inst.daemon, conf),
            archive_options=_daemon_archive.launch_options(
                java_home,
                self.settings().hadoop_version,
                _daemon_archive.role_of(inst.daemon.main_class),
                self.base_dir,
                inst.key,
            ),
        )
        if inst.host is None:
            env = _daemons.daemon_env(self.base_dir, java_home, module_flags)
        else:
            env = _daemons.host_env(self.base_dir, conf, java_home, module_flags)
            command = _netns.in_netns(inst.host.netns, command)
        where = f" on {inst.host.host}" if inst.host else ""
        log(f"Starting {inst.daemon.title}{where} ...")
        self._log_offsets[inst.key] = _process.log_size(
            _process.log_file(self.base_dir, inst.key)
        )
        return _process.spawn(
            inst.daemon, command, base_dir=self.base_dir, env=env, key=inst.key
        )

    def _wait_ready(
        self,
        settings: ClusterSettings,
        started: dict[str, subprocess.Popen[bytes]],
        *,
        timeout: float,
        log: Log,
    ) -> None:
        _ready.wait_ready(
            self.base_dir,
            settings,
            self.instances(),
            started,
            master=self.master_address(),
            log_offsets=self._log_offsets,
            timeout=timeout,
            log=log,
        )

    def env_vars_for_commands(self) -> dict[str, str]:
        """The environment of ``yarn``/``hdfs`` commands run for the cluster
        (on a secure one: its realm and the user's ticket, for ``haadmin``)."""
        java_home = _hadoop.find_java_home()
        flags = _hadoop.java_module_flags(java_home, self.settings().hadoop_version)
        env = _daemons.daemon_env(self.base_dir, java_home, flags)
        if self.settings().secure:
            env.update(self.secure().env())
        return env

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
            settings = self.settings()
            return _stop.stop(
                self.base_dir,
                self.instances(),
                settings,
                self.secure(settings) if settings.secure else None,
                wipe=wipe,
                log=log,
            )


def use_local_cluster(
    base_dir: str | os.PathLike[str] | None = None, *, override: bool = False
) -> dict[str, str] | None:
    """Point this process at a running local cluster, if there is one.

    When HADOOP_CONF_DIR is unset (or ``override`` is true) and the local
    cluster in ``base_dir`` is running, its environment (see
    ``LocalCluster.env_vars``) is put into ``os.environ``. Running means any
    of its daemons: with one down (``tfyarn cluster kill``), a client is told
    that daemon is unreachable, not that there is no cluster.

    Returns
    -------
    dict or None
        The variables set, or None when nothing changed.
    """
    if hadoop_conf.explicit_conf_dir() and not override:
        return None
    cluster = LocalCluster(base_dir)
    if all(pid is None for pid in cluster.pids().values()):
        return None
    env = cluster.env_vars()
    os.environ.update(env)
    return env
