"""The hosts of a multi-host local cluster: network namespaces on a bridge,
made before its daemons start, crashed on demand (a node failure), and
removed with everything running in them."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from tfyarn.cluster import _netns, _process
from tfyarn.cluster._settings import ClusterSettings
from tfyarn.cluster._status import Instance


def make(
    base_dir: Path, settings: ClusterSettings, log: Callable[[str], None]
) -> _netns.Layout:
    """Make ``settings.nodes`` hosts, named in /etc/hosts; return their layout."""
    cid = _netns.cluster_id(base_dir)
    subnet = _netns.pick_subnet(cid, _netns.taken_networks())
    lay = _netns.layout(base_dir, settings.nodes, subnet)
    log(
        f"Making {settings.nodes} host(s) on bridge {lay.bridge} ({lay.subnet}), "
        f"namespaces {lay.hosts[0].netns}..."
    )
    # Recorded first: a start that fails half-way still knows what to remove.
    _netns.save_layout(base_dir, lay)
    _netns.create(lay)
    _netns.add_hosts(base_dir, lay)
    return lay


def remove(base_dir: Path, *, log: Callable[[str], None]) -> None:
    """Remove the hosts a start made, their processes, and their /etc/hosts block."""
    lay = _netns.load_layout(base_dir)
    if lay is not None:
        for h in lay.hosts:  # anything left running inside a host dies with it
            _process.terminate(_netns.netns_pids(h.netns), grace=2)
        removed = _netns.destroy(lay)
        if removed:
            log(f"Removed {', '.join(removed)}.")
    if _netns.remove_hosts(base_dir):
        log(f"Removed this cluster's block from {_netns.HOSTS_FILE}.")
    _netns.forget_layout(base_dir)


def crash(
    base_dir: Path,
    host: _netns.Host,
    found: list[Instance],
    *,
    log: Callable[[str], None],
) -> list[int]:
    """SIGKILL every process on ``host``: its daemons among ``found`` and
    everything in its namespace (its containers); the pids killed."""
    pids = set(_netns.netns_pids(host.netns))
    for inst in found:
        if inst.host == host:
            pid = _process.running_pid(base_dir, inst.daemon, inst.key)
            if pid is not None:
                pids.add(pid)
    log(f"Killing {len(pids)} process(es) on {host.host} ...")
    for pid in pids:
        _process._signal(pid, 9)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(_process.is_gone(p) for p in pids):
        time.sleep(0.1)
    return sorted(pids)
