"""One secure HA local cluster for every test in this directory.

What production runs: two NameNodes behind ``hdfs://tfyarn`` (a JournalNode,
ZooKeeper, a failover controller each) and two ResourceManagers electing the
active one in ZooKeeper, all of them with Kerberos: the cluster's own MIT KDC
on loopback, a principal and keytab for every daemon, HDFS's web servers on
HTTPS only. In its own base dir and on ports shifted by
``HA_SECURE_PORT_OFFSET``, apart from the other tiers' clusters.

The fixture is package-scoped and named ``local_cluster``: it replaces the
parent directory's autouse fixture for these tests, and puts this cluster's
environment (``KRB5_CONFIG``, the user's ticket cache, the krb5.conf flag for
skein's driver) into ``os.environ`` only while they run.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _stopped import describe, identities, left_running

from tfyarn.cluster import ClusterSettings, LocalCluster
from tfyarn.cluster._kdc import missing_tools

HA_SECURE_BASE_DIR = Path(
    os.environ.get("TFYARN_HA_SECURE_HOME", "/var/tmp/tfyarn-tests/ha-secure")
)
HA_SECURE_PORT_OFFSET = int(os.environ.get("TFYARN_HA_SECURE_PORT_OFFSET", "1500"))
HA_SECURE_SETTINGS = ClusterSettings(
    ha=True,
    secure=True,
    memory_mb=4096,
    vcores=8,
    port_offset=HA_SECURE_PORT_OFFSET,
)


def _log(message: str) -> None:
    print(f"[secure ha cluster] {message}", file=sys.stderr, flush=True)


@pytest.fixture(scope="package", autouse=True)
def local_cluster() -> Iterator[LocalCluster]:
    """The secure HA cluster, started for this directory's tests and stopped
    (KDC included, no process left) after them."""
    assert not missing_tools(), (
        f"Kerberos tools missing: {missing_tools()}; run tests/system-packages.sh"
    )
    cluster = LocalCluster(HA_SECURE_BASE_DIR)
    began = time.monotonic()
    cluster.start(HA_SECURE_SETTINGS, log=_log)
    _log(f"started in {time.monotonic() - began:.1f} s")
    pids = [p for p in cluster.pids().values() if p is not None]
    kdc_pid = cluster.secure().kdc.pid()
    started = identities([*pids, kdc_pid or 0])
    saved = dict(os.environ)
    os.environ.update(cluster.env_vars())
    try:
        yield cluster
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if os.environ.get("TFYARN_KEEP_CLUSTER") != "1":
            began = time.monotonic()
            cluster.stop(log=_log)
            _log(f"stopped in {time.monotonic() - began:.1f} s")
            assert cluster.secure().kdc.pid() is None, "the KDC outlived stop"
            left = left_running(started, cluster.base_dir)
            assert not left, "left running by stop: " + describe(left)
