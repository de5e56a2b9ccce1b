"""One local cluster per Hadoop version, for the cross-version tests here.

The tests of this directory run once per version (``VERSIONS``: by default the
lines production distributions ship besides the pinned one every other tier
runs, 3.1.1 for CDP 7.1 and HDP 3.1 and 3.3.6 for EMR 7 and Dataproc 2.3;
``TFYARN_TEST_HADOOP_VERSIONS=3.2.4,3.1.4`` picks others from
``tfyarn.cluster._versions.KNOWN``). Each version's cluster has its own base
dir, ``/var/tmp/tfyarn-tests/versions-<version>``, and port offset
(``PORT_OFFSETS``), is started from nothing (its jars fetched once per
machine), and is stopped and wiped once its tests ran, before the next
version's starts: one cluster at a time on a two-core machine.

The fixture is package-scoped, parametrized by version and named
``local_cluster``: it replaces the parent directory's autouse fixture for
these tests, and puts the cluster's environment into ``os.environ`` only
while they run. Containers run the test venv's Python (the NodeManager's
PATH starts with it), as on the plain tier's cluster.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tfyarn.cluster import ClusterSettings, LocalCluster, _versions, use_local_cluster

DEFAULT_VERSIONS = ("3.1.1", "3.3.6")
VERSIONS = tuple(
    v.strip()
    for v in os.environ.get(
        "TFYARN_TEST_HADOOP_VERSIONS", ",".join(DEFAULT_VERSIONS)
    ).split(",")
    if v.strip()
)
# Apart from the default cluster (0), multihost (300), the plain tier's own
# (400), secure (500) and recovery (800); 100 apart, so no two clash.
PORT_OFFSETS = {
    "3.3.6": 1200,
    "3.2.4": 1300,
    "3.1.4": 1400,
    "3.1.1": 1500,
    "3.4.3": 1600,
}
DATA = "hdfs:///tmp/tfyarn/digits"  # the examples' default --data


def base_dir(version: str) -> Path:
    return Path(f"/var/tmp/tfyarn-tests/versions-{version}")


def settings(version: str) -> ClusterSettings:
    """Room for a 1 chief + 1 ps + 2 worker job of small tasks and its master."""
    return ClusterSettings(
        memory_mb=8192,
        vcores=8,
        port_offset=PORT_OFFSETS[version],
        hadoop_version=version,
    )


def _log(message: str) -> None:
    print(f"[versions cluster] {message}", file=sys.stderr, flush=True)


@pytest.fixture(scope="package", autouse=True, params=VERSIONS)
def local_cluster(request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    """The cluster of one Hadoop version, started for this directory's tests
    and stopped (its data wiped) after them."""
    version = _versions.lookup(request.param).version
    cluster = LocalCluster(base_dir(version))
    began = time.monotonic()
    cluster.start(settings(version), log=_log)
    _log(f"Hadoop {version} started in {time.monotonic() - began:.1f} s")
    saved = dict(os.environ)
    use_local_cluster(cluster.base_dir, override=True)
    try:
        yield cluster
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if os.environ.get("TFYARN_KEEP_CLUSTER") != "1":
            cluster.stop(wipe=True, log=_log)


@pytest.fixture(scope="package")
def version(local_cluster: LocalCluster) -> str:
    """The Hadoop version the current tests run on."""
    return local_cluster.settings().hadoop_version


@pytest.fixture(scope="package")
def yarn(local_cluster: LocalCluster) -> Iterator[Any]:
    """A ``skein.Client`` on this version's cluster (its Java driver runs on
    the version's own client jars, through the cluster's ``hadoop``)."""
    import skein

    with skein.Client() as client:
        yield client
