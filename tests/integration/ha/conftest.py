"""One HA local cluster for every test in this directory.

Two NameNodes behind ``hdfs://tfyarn`` (a JournalNode, ZooKeeper, a failover
controller each) and two ResourceManagers that elect the active one in
ZooKeeper, with one NodeManager and DataNode on loopback: what production
clusters run, in its own base dir and on ports shifted by
``HA_PORT_OFFSET``, apart from the other tiers' clusters. The tests crash
and fail over its daemons under running jobs; each leaves both members of
each pair running when it ends.

The fixture is package-scoped and named ``local_cluster``: it replaces the
parent directory's autouse fixture for these tests, and puts this cluster's
environment into ``os.environ`` while they run.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tfyarn.cluster import ClusterSettings, LocalCluster, use_local_cluster

HA_BASE_DIR = Path(os.environ.get("TFYARN_HA_HOME", "/var/tmp/tfyarn-tests/ha"))
HA_PORT_OFFSET = int(os.environ.get("TFYARN_HA_PORT_OFFSET", "900"))
HA_SETTINGS = ClusterSettings(
    ha=True, memory_mb=8192, vcores=12, port_offset=HA_PORT_OFFSET
)


def _log(message: str) -> None:
    print(f"[ha cluster] {message}", file=sys.stderr, flush=True)


@pytest.fixture(scope="package", autouse=True)
def local_cluster() -> Iterator[LocalCluster]:
    """The HA cluster, started for this directory's tests and stopped after."""
    cluster = LocalCluster(HA_BASE_DIR)
    began = time.monotonic()
    cluster.start(HA_SETTINGS, log=_log)
    _log(f"started in {time.monotonic() - began:.1f} s")
    saved = dict(os.environ)
    use_local_cluster(cluster.base_dir, override=True)
    try:
        yield cluster
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if os.environ.get("TFYARN_KEEP_CLUSTER") != "1":
            began = time.monotonic()
            cluster.stop(log=_log)
            _log(f"stopped in {time.monotonic() - began:.1f} s")


@pytest.fixture(scope="package")
def skein_client(local_cluster: LocalCluster) -> Iterator[Any]:
    """A ``skein.Client`` whose driver talks to the HA cluster (both
    ResourceManagers: its YARN client fails over between them)."""
    import skein

    with skein.Client() as client:
        yield client


@pytest.fixture
def both_running(local_cluster: LocalCluster) -> Iterator[LocalCluster]:
    """The cluster; afterwards every daemon a test left down started again."""
    try:
        yield local_cluster
    finally:
        if not local_cluster.is_running():
            local_cluster.start(log=_log)
