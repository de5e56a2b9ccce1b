"""One multi-host local cluster for every test in this directory.

Three hosts (network namespaces ``tfy-<id>-node1``..``node3`` on a bridge), each a
NodeManager and a DataNode with a plain environment (no test venv on PATH), in
their own base dir and on ports shifted by ``MULTIHOST_PORT_OFFSET``, apart
from the default cluster. Nodes offer 3 GiB each, so a job of four 1 GiB tasks
and its master cannot fit on one host and must spread. Two queues (default 70%,
prod 30%) and node labels ``ps`` (node1) and ``work`` (node2), non-exclusive,
so unlabelled containers still run anywhere; masters run on node3. The
capacity scheduler's preemption monitor is on (test_preemption.py): it takes
containers back only from a queue beyond its share while another queue is
starved below its own, which no other test here brings about (their jobs run
in one queue at a time).

The fixture is package-scoped and named ``local_cluster``: it replaces the
parent directory's autouse fixture for these tests, and puts this cluster's
environment into ``os.environ`` only while they run. Containers on these hosts
do not find the client's interpreter on PATH: jobs pass ``--python`` with the
venv's absolute path, or ship it with ``--python_env`` (test_python_env.py).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _hdfs import hdfs_dir

from tfyarn.cluster import ClusterSettings, LocalCluster, _netns, use_local_cluster

MULTIHOST_BASE_DIR = Path(
    os.environ.get("TFYARN_MULTIHOST_HOME", "/var/tmp/tfyarn-tests/multihost")
)
# Overridable so two sessions (two worktrees) can run this package side by side.
MULTIHOST_PORT_OFFSET = int(os.environ.get("TFYARN_MULTIHOST_PORT_OFFSET", "300"))
# node1 and node2 carry node labels, node3 none: YARN places application
# masters only on unlabelled hosts (never by non-exclusive sharing).
MULTIHOST_SETTINGS = ClusterSettings(
    nodes=3,
    memory_mb=3072,
    vcores=4,
    port_offset=MULTIHOST_PORT_OFFSET,
    max_am_resource_percent=1.0,
    queues={"default": 70, "prod": 30},
    labels={"node1": "ps", "node2": "work"},
    preemption=True,
)
PYTHON = str(Path(sys.executable))
DATA = "hdfs:///tmp/tfyarn/digits"


def _log(message: str) -> None:
    print(f"[multihost cluster] {message}", file=sys.stderr, flush=True)


def _why_not() -> str | None:
    if os.geteuid() != 0:
        return "network namespaces need root"
    if not any(
        (Path(d) / "ip").exists() for d in os.environ.get("PATH", "").split(os.pathsep)
    ):
        return "no `ip` command (iproute2)"
    return None


@pytest.fixture(scope="package", autouse=True)
def local_cluster() -> Iterator[LocalCluster]:
    """The multi-host cluster, started (and its example data written) for this
    directory's tests and stopped after them."""
    why = _why_not()
    if why:
        pytest.skip(f"multi-host cluster unavailable: {why}")
    cluster = LocalCluster(MULTIHOST_BASE_DIR)
    began = time.monotonic()
    cluster.start(MULTIHOST_SETTINGS, log=_log)
    _log(f"started in {time.monotonic() - began:.1f} s")
    saved = dict(os.environ)
    use_local_cluster(cluster.base_dir, override=True)
    try:
        yield cluster
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if os.environ.get("TFYARN_KEEP_CLUSTER") != "1":
            layout = cluster.layout()
            began = time.monotonic()
            cluster.stop(log=_log)
            _log(f"stopped in {time.monotonic() - began:.1f} s")
            if layout is not None:  # nothing this cluster made is left
                left = {h.netns for h in layout.hosts} & _netns.existing_netns()
                left |= {
                    link
                    for link in [layout.bridge, *(h.link for h in layout.hosts)]
                    if _netns.link_exists(link)
                }
                if str(cluster.base_dir) in _netns.HOSTS_FILE.read_text():
                    left.add(str(_netns.HOSTS_FILE))
                assert not left, f"left behind by stop: {sorted(left)}"


@pytest.fixture(scope="module")
def yarn(local_cluster: LocalCluster) -> Iterator[Any]:
    """A skein client (its Java driver) for one test module's jobs."""
    import skein

    with skein.Client() as c:
        yield c


@pytest.fixture(scope="module")
def base(local_cluster: LocalCluster) -> Iterator[str]:
    """An HDFS directory of one test module's own, removed after it."""
    yield from hdfs_dir()
