"""Stopping a local cluster: every daemon, its containers and what it made."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from tfyarn.cluster import _daemon_archive, _hosts, _lce, _process
from tfyarn.cluster._secure import SecureCluster
from tfyarn.cluster._settings import SETTINGS_FILE, ClusterSettings
from tfyarn.cluster._status import Instance

# What ``--wipe`` deletes under the base dir (the lock and pid-less rest stay).
WIPED = ("data", "logs", "tmp", "conf", "bin", "gpu", "run", "nodes", "kerberos")


def stop(
    base_dir: Path,
    found: list[Instance],
    settings: ClusterSettings,
    secure: SecureCluster | None,
    *,
    wipe: bool,
    log: Callable[[str], None],
) -> list[str]:
    """Stop every daemon of ``found`` (in reverse start order), the
    containers they leave, the hosts and the KDC; ``wipe``: delete data,
    logs and configuration too. Returns the titles of what was running."""
    stopped = []
    for inst in reversed(found):
        pid = _process.running_pid(base_dir, inst.daemon, inst.key)
        if pid is None:
            continue
        title = inst.daemon.title + (f" on {inst.host.host}" if inst.host else "")
        log(f"Stopping {title} (pid {pid}) ...")
        # A secure NodeManager (no log aggregation) waits 17 s on its
        # pending log deletions before exiting: strays() gets its containers.
        slow = settings.secure and inst.daemon.name == "nodemanager"
        grace = _daemon_archive.stop_grace(pid, 3.0 if slow else 20.0)
        if _process.terminate([pid], grace=grace):
            _daemon_archive.discard(base_dir, inst.key)  # killed: maybe half written
        else:
            _daemon_archive.keep(base_dir, inst.key)
        stopped.append(title)
        _process.pid_file(base_dir, inst.key).unlink(missing_ok=True)
    if settings.container_executor:
        # The NodeManager (supervised) leaves Docker's containers running.
        names = [d.name for d in _process.container_dirs(base_dir)]
        _lce.remove_docker_containers(names)
    leftovers = _process.strays(base_dir)
    if leftovers:
        log(f"Stopping {len(leftovers)} leftover process(es) ...")
        _process.terminate(leftovers, grace=5)
    # Namespaces, links, bridge and /etc/hosts block this cluster made.
    _hosts.remove(base_dir, log=log)
    if secure is not None and secure.stop():
        log("Stopped the Kerberos KDC.")
        stopped.append("Kerberos KDC")
    if wipe:
        for sub in WIPED:
            shutil.rmtree(base_dir / sub, ignore_errors=True)
        (base_dir / SETTINGS_FILE).unlink(missing_ok=True)
        log(f"Deleted the cluster's data, logs and configuration in {base_dir}.")
    return stopped
