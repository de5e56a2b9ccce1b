"""Production weather on the local cluster, rehearsed: a host crashed, cut off
or started again; a NameNode, ResourceManager or NodeManager killed or
restarted; an HA pair failed over. Part of :class:`~tfyarn.cluster.LocalCluster`
(a mixin of its methods), kept apart from starting and stopping the cluster."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from tfyarn.cluster import (
    _failover,
    _ha,
    _hosts,
    _netns,
    _process,
    _ready,
    _restarts,
    _secure,
)
from tfyarn.cluster._settings import load_settings
from tfyarn.cluster._status import Instance
from tfyarn.errors import ClusterError

if TYPE_CHECKING:
    import subprocess
    from contextlib import AbstractContextManager
    from pathlib import Path

    from tfyarn.cluster._secure import SecureCluster
    from tfyarn.cluster._settings import ClusterSettings

# How long `tfyarn cluster node start` waits for the host's NodeManager.
NODE_WAIT_S = 120.0
Log = Callable[[str], None]


def _quiet(_: str) -> None:
    pass


class Rehearsals:
    """The rehearsal methods of :class:`~tfyarn.cluster.LocalCluster`."""

    if TYPE_CHECKING:  # what LocalCluster provides
        base_dir: Path
        _log_offsets: dict[str, int]

        def _lock(self) -> AbstractContextManager[None]: ...
        def _daemon_java(
            self, settings: ClusterSettings
        ) -> tuple[Path, tuple[str, ...]]: ...
        def _spawn(
            self,
            inst: Instance,
            java_home: Path,
            module_flags: tuple[str, ...],
            log: Log,
        ) -> subprocess.Popen[bytes]: ...
        def pids(self) -> dict[str, int | None]: ...
        def settings(self) -> ClusterSettings: ...
        def secure(self, settings: ClusterSettings | None = None) -> SecureCluster: ...
        def layout(self) -> _netns.Layout | None: ...
        def instances(self) -> list[Instance]: ...
        def master_address(self) -> str: ...
        def env_vars_for_commands(self) -> dict[str, str]: ...

    # -- one host: crash, restart, partition ---------------------------------

    def _host(self, name: str) -> _netns.Host:
        lay = self.layout()
        if not self.settings().multihost or lay is None:
            raise ClusterError(
                f"the cluster in {self.base_dir} has no hosts of its own (it runs "
                "one node on loopback, or is stopped); start one with "
                "`tfyarn cluster start --nodes N --base-dir DIR`"
            )
        return lay.host(name)

    def node_stop(self, name: str, *, log: Log = _quiet) -> list[int]:
        """Crash host ``name``: SIGKILL its NodeManager, DataNode and every process
        in its namespace (its containers), with no goodbye to the masters.

        Returns
        -------
        list of int
            The pids killed.
        """
        host = self._host(name)
        with self._lock():
            return _hosts.crash(self.base_dir, host, self.instances(), log=log)

    def node_start(
        self,
        name: str,
        *,
        timeout: float = NODE_WAIT_S,
        log: Log = _quiet,
    ) -> None:
        """Start host ``name``'s DataNode and NodeManager again (after
        ``node_stop``) and wait until its NodeManager is RUNNING."""
        host = self._host(name)
        settings = self.settings()
        with self._lock():
            java_home, module_flags = self._daemon_java(settings)
            started = {}
            for inst in self.instances():
                if inst.host != host:
                    continue
                if _process.running_pid(self.base_dir, inst.daemon, inst.key) is None:
                    started[inst.key] = self._spawn(inst, java_home, module_flags, log)
            _ready.wait_node_running(
                self.base_dir,
                settings,
                host,
                started,
                master=self.master_address(),
                log_offsets=self._log_offsets,
                timeout=timeout,
            )

    def node_partition(self, name: str, *, heal: bool = False) -> _netns.Host:
        """Cut host ``name`` off the network (``heal``: reconnect it); its
        processes keep running."""
        host = self._host(name)
        _netns.set_partitioned(host, not heal)
        return host

    # -- one daemon: crash, restart -----------------------------------------

    def _rehearsed(self, daemon: str, name: str | None) -> Instance:
        _restarts.check_daemon(daemon)
        if all(pid is None for pid in self.pids().values()):
            raise ClusterError(
                f"the local cluster in {self.base_dir} is not running; start it "
                "with `tfyarn cluster start`"
            )
        return _restarts.pick(
            self.base_dir,
            self.settings(),
            self.layout(),
            daemon,
            name,
            master=self.master_address(),
        )

    def kill_daemon(
        self, daemon: str, name: str | None = None, *, log: Log = _quiet
    ) -> _restarts.Outcome:
        """Crash one daemon: SIGKILL a NameNode or ResourceManager (``name``: an
        HA id; by default the active one), or a NodeManager (on host ``name``
        of a multi-host cluster), and leave it down. Its containers keep
        running.

        Raises
        ------
        ClusterError
            Unknown daemon or host, the cluster or the daemon not running.
        """
        began = time.monotonic()
        inst = self._rehearsed(daemon, name)
        with self._lock():
            log(f"Killing the {_restarts.title(inst)} ...")
            pid = _restarts.crash(self.base_dir, inst)
        if pid is None:
            raise ClusterError(
                f"the {_restarts.title(inst)} of the cluster in {self.base_dir} is "
                f"not running (killed before?); `tfyarn cluster restart {daemon}` "
                "starts it again"
            )
        return _restarts.Outcome(
            _restarts.title(inst), pid, None, time.monotonic() - began
        )

    def restart_daemon(
        self,
        daemon: str,
        name: str | None = None,
        *,
        timeout: float = _restarts.RESTART_WAIT_S,
        log: Log = _quiet,
    ) -> _restarts.Outcome:
        """Crash one daemon (SIGKILL, as in ``kill_daemon``; nothing to kill if
        it is down) and start it again, returning once it is back: the
        ResourceManager answering with its NodeManagers RUNNING again, or the
        NodeManager registered and RUNNING, or the NameNode serving with HDFS
        ready. Recovery keeps the running jobs.

        Raises
        ------
        ClusterError
            Unknown daemon or host, the cluster not running, a NodeManager
            restart while the ResourceManager is down, or the daemon died or
            was not back within ``timeout`` seconds.
        """
        began = time.monotonic()
        inst = self._rehearsed(daemon, name)
        settings = self.settings()
        pids = self.pids()
        if daemon == "nodemanager" and not any(
            pids[m.key] for m, _ in _ha.rm_webs(settings)
        ):
            raise ClusterError(
                "the ResourceManager is down, so a restarted NodeManager could not "
                "register; `tfyarn cluster restart resourcemanager` first"
            )
        with self._lock():
            log(f"Killing the {_restarts.title(inst)} ...")
            killed_at = time.time()
            killed = _restarts.crash(self.base_dir, inst)
            java_home, module_flags = self._daemon_java(settings)
            if inst.host is None:
                ports = _secure.bound_ports(settings)
                _process.check_ports_free(inst.daemon, ports, self.master_address())
            proc = self._spawn(inst, java_home, module_flags, log)
            log(f"Waiting for the {_restarts.title(inst)} to be back ...")
            self._wait_back(settings, inst, proc, timeout=timeout, since=killed_at)
        return _restarts.Outcome(
            _restarts.title(inst), killed, proc.pid, time.monotonic() - began
        )

    def failover(
        self,
        daemon: str,
        *,
        timeout: float = _restarts.RESTART_WAIT_S,
        log: Log = _quiet,
    ) -> _failover.Outcome:
        """Hand the active role of an HA pair to the other member, gracefully:
        the NameNodes through their failover controllers; the
        ResourceManagers by stopping the active one (SIGTERM), waiting for the
        other to take over, and starting it again as the standby.

        Raises
        ------
        ClusterError
            Not an HA cluster, an unknown pair, a member down, or the failover
            not complete within ``timeout`` seconds.
        """
        began = time.monotonic()
        settings = load_settings(self.base_dir)
        if settings is None:
            raise ClusterError(
                f"no local cluster has been set up in {self.base_dir}; start one "
                "with two NameNodes and ResourceManagers: `tfyarn cluster start --ha`"
            )
        master = self.master_address()
        pair = _failover.check(self.base_dir, settings, daemon, self.pids(), master)
        with self._lock():
            if daemon == "namenode":
                _failover.namenodes(
                    self.base_dir,
                    pair,
                    master=master,
                    env=self.env_vars_for_commands(),
                    timeout=timeout,
                    log=log,
                )
                started = None
            else:
                inst = {i.key: i for i in self.instances()}[pair.active.key]
                java_home, module_flags = self._daemon_java(settings)
                proc = _failover.resourcemanagers(
                    self.base_dir,
                    pair,
                    inst,
                    lambda: self._spawn(inst, java_home, module_flags, log),
                    master=master,
                    timeout=timeout,
                    log=log,
                )
                self._wait_back(settings, inst, proc, timeout=timeout)
                started = proc.pid
        return _failover.Outcome(
            pair.title, pair.active.id, pair.other.id, started, time.monotonic() - began
        )

    def _wait_back(
        self,
        settings: ClusterSettings,
        inst: Instance,
        proc: subprocess.Popen[bytes],
        *,
        timeout: float,
        since: float = 0.0,
    ) -> None:
        """Until the daemon ``proc`` started for ``inst`` is back (see
        :func:`_restarts.wait_back`)."""
        _restarts.wait_back(
            self.base_dir,
            settings,
            self.layout(),
            inst,
            proc,
            master=self.master_address(),
            log_offset=self._log_offsets.get(inst.key, 0),
            timeout=timeout,
            since=since,
        )
