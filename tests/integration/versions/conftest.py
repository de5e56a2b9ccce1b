"""One local cluster per Hadoop version, each in the profile production runs
that version in, for the cross-version tests here.

``PROFILES``: 3.1.1 as Cloudera CDP 7.1 runs it (Kerberos, HA NameNodes and
ResourceManagers behind ``hdfs://tfyarn``), 3.3.6 as EMR 7 and Dataproc 2.3
run it (Kerberos, one NameNode and ResourceManager). Both with delegation
tokens that live ``TOKEN_LIFETIME_S``, so a job outlives its own in minutes,
and jobs ship their Python environment (``--python_env auto``). 3.4.3, the
line every other tier runs on, is not repeated here.
``TFYARN_TEST_HADOOP_VERSIONS=3.3.6`` runs one version only;
``TFYARN_TEST_PROFILE_HA=1`` gives every version HA too (3.3.6's secure HA
cluster, run by hand: see tfyarn/cluster/README.md).

Each version's cluster has its own base dir (``profile-<version>``) and port
offset (``PORT_OFFSETS``; HA takes 200 more ports above it, the KDC its own),
is started from nothing (its jars fetched once per machine), and is stopped
and wiped once its tests ran, before the next version's starts: one cluster
at a time on a two-core machine.

The fixture is package-scoped, parametrized by version and named
``local_cluster``: it replaces the parent directory's autouse fixture for
these tests, and puts the cluster's environment (``KRB5_CONFIG``, the user's
ticket cache, the krb5.conf flag for skein's driver) into ``os.environ`` only
while they run.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _stopped import describe, identities, left_running

from tfyarn.cluster import ClusterSettings, LocalCluster, _versions
from tfyarn.cluster._kdc import missing_tools

DEFAULT_VERSIONS = ("3.1.1", "3.3.6")
VERSIONS = tuple(
    v.strip()
    for v in os.environ.get(
        "TFYARN_TEST_HADOOP_VERSIONS", ",".join(DEFAULT_VERSIONS)
    ).split(",")
    if v.strip()
)
# 400 apart: an HA cluster also takes the ports 200 above its offset.
PORT_OFFSETS = {"3.1.1": 2600, "3.3.6": 3000, "3.2.4": 3400, "3.1.4": 3800}
# Production's profile of each line: (secure, ha).
HA_EVERYWHERE = os.environ.get("TFYARN_TEST_PROFILE_HA") == "1"
PROFILES = {"3.1.1": (True, True), "3.3.6": (True, HA_EVERYWHERE)}
# Tokens end 60 s before this (tfyarn.contract.tokens.CLIENT_SLACK_S). The
# NodeManager localizes a job's files with the submission's HDFS token, which
# YARN renews but never past this: long enough to unpack a shipped
# environment of tfyarn (80 MB) on a loaded machine, and for the failovers of
# test_profile_job.py to be over before the master fetches fresh tokens.
TOKEN_LIFETIME_S = 360


def base_dir(version: str) -> Path:
    return Path(f"/var/tmp/tfyarn-tests/profile-{version}")


def settings(version: str) -> ClusterSettings:
    """Room for a job of three small workers and its master, and a second
    small job beside it; two GPUs for YARN's GPU plugin to discover."""
    secure, ha = PROFILES.get(version, (True, HA_EVERYWHERE))
    return ClusterSettings(
        memory_mb=6144,
        vcores=8,
        gpus=2,  # behind the stand-in nvidia-smi, found by YARN's GPU plugin
        port_offset=PORT_OFFSETS[version],
        hadoop_version=version,
        secure=secure,
        ha=ha or HA_EVERYWHERE,
        token_lifetime_s=TOKEN_LIFETIME_S if secure else 0,
    )


def _log(message: str) -> None:
    print(f"[profile cluster] {message}", file=sys.stderr, flush=True)


@pytest.fixture(scope="package", autouse=True, params=VERSIONS)
def local_cluster(request: pytest.FixtureRequest) -> Iterator[LocalCluster]:
    """The cluster of one Hadoop version, started for this directory's tests
    and stopped (its data wiped, KDC included, no process left) after them."""
    assert not missing_tools(), (
        f"Kerberos tools missing: {missing_tools()}; run tests/system-packages.sh"
    )
    version = _versions.lookup(request.param).version
    cluster = LocalCluster(base_dir(version))
    began = time.monotonic()
    cluster.start(settings(version), log=_log)
    _log(f"Hadoop {version} started in {time.monotonic() - began:.1f} s")
    pids = [p for p in cluster.pids().values() if p is not None]
    started = identities(pids)
    saved = dict(os.environ)
    os.environ.update(cluster.env_vars())
    try:
        yield cluster
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if os.environ.get("TFYARN_KEEP_CLUSTER") != "1":
            cluster.stop(wipe=True, log=_log)
            left = left_running(started, cluster.base_dir)
            assert not left, "left running by stop: " + describe(left)


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


@pytest.fixture(scope="package")
def digits(local_cluster: LocalCluster) -> str:
    """The examples' data set on the cluster's name service."""
    from tfyarn.data.example import write_digits

    from ._profile import name_service

    path = name_service(local_cluster) + "/tmp/tfyarn-profile/digits"
    write_digits(path)
    return path
