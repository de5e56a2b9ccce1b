"""Session fixtures for the integration tests: a real local YARN + HDFS cluster.

``local_cluster`` (autouse) reuses the cluster in ``$TFYARN_CLUSTER_HOME`` (or
the default base dir) when it runs and fits the tests (GPUs advertised, the
test venv's Python in its containers' PATH); a running cluster that does not
fit is left alone and the tests start their own beside it (``cluster-tests``,
ports shifted by 400). Otherwise it starts one from nothing
(fetching Hadoop on a fresh machine) and stops it when the session ends. Either
way the cluster's environment (HADOOP_CONF_DIR, JAVA_HOME, ``yarn``/``hdfs`` on
PATH, skein's driver flags) is put into ``os.environ`` for the whole session.

Set ``TFYARN_KEEP_CLUSTER=1`` to keep a cluster this session started running
after it (handy for a quick edit-test loop), and ``TFYARN_CLUSTER_PORT_OFFSET``
to start it on shifted ports (to test from nothing beside another cluster).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tfyarn.cluster import ClusterSettings, LocalCluster, _gpus, use_local_cluster

# What a cluster started by the tests offers: enough for a 12-task job, and two
# GPUs behind the stand-in nvidia-smi, discovered by YARN's GPU plugin, so GPU
# scheduling and assignment can be tested on a CPU-only machine.
TEST_SETTINGS = ClusterSettings(memory_mb=16384, vcores=16, gpus=2)
# Where the tests' own cluster goes when a running one does not fit them.
OWN_CLUSTER_PORT_OFFSET = 400


def _log(message: str) -> None:
    print(f"[local cluster] {message}", file=sys.stderr, flush=True)


def _unfit(cluster: LocalCluster) -> str | None:
    """Why a running cluster is not what these tests need, or None if it is.

    The tests ask for advertised GPUs, and some run the test venv's Python
    as the containers' ``python3`` (the NodeManager's PATH starts with it).
    """
    settings = cluster.settings()
    if settings.gpus < TEST_SETTINGS.gpus:
        return (
            f"it advertises {settings.gpus} GPUs, the tests need {TEST_SETTINGS.gpus}"
        )
    if (
        not _gpus.uses_plugin(settings)
        or not (_gpus.gpu_dir(cluster.base_dir) / _gpus.EXECUTABLE).is_file()
    ):
        return "its GPUs are a bare count, not devices behind a stand-in nvidia-smi"
    nm = cluster.pids().get("nodemanager")
    try:
        environ = Path(f"/proc/{nm}/environ").read_bytes().split(b"\0")
    except OSError:
        return None  # cannot tell (not ours to read): trust it
    path = next((e[5:].decode() for e in environ if e.startswith(b"PATH=")), "")
    first = path.split(os.pathsep)[0] if path else ""
    wanted = str(Path(sys.executable).parent)
    if first != wanted:
        return f"its containers run the Python in {first or 'no PATH'}, not {wanted}"
    return None


@pytest.fixture(scope="session", autouse=True)
def local_cluster() -> Iterator[LocalCluster]:
    """The running local cluster, its environment in ``os.environ``."""
    cluster = LocalCluster()
    pids = cluster.pids().values()
    started = False
    offset = int(os.environ.get("TFYARN_CLUSTER_PORT_OFFSET", "0"))
    if all(pid is not None for pid in pids):
        why = _unfit(cluster)
        if why:
            # Someone's own cluster (e.g. the README's first command): leave it
            # alone and run the tests on one of their own beside it.
            cluster = LocalCluster(cluster.base_dir.with_name("cluster-tests"))
            offset = offset or OWN_CLUSTER_PORT_OFFSET
            _log(
                f"not reusing the running cluster: {why}; using {cluster.base_dir} "
                f"on ports shifted by {offset} instead"
            )
            pids = cluster.pids().values()
    if all(pid is None for pid in pids):
        _log(f"starting a local cluster in {cluster.base_dir} ...")
        cluster.start(TEST_SETTINGS.replace(port_offset=offset), log=_log)
        started = True
    elif any(pid is None for pid in pids):
        # Someone else's cluster lost a daemon: restart the missing ones with
        # its own settings, and leave it running afterwards.
        _log(f"restarting the missing daemons of {cluster.base_dir} ...")
        cluster.start(log=_log)
    saved = dict(os.environ)
    use_local_cluster(cluster.base_dir, override=True)
    try:
        yield cluster
    finally:
        os.environ.clear()
        os.environ.update(saved)
        if started and os.environ.get("TFYARN_KEEP_CLUSTER") != "1":
            _log("stopping the local cluster this session started ...")
            cluster.stop(log=_log)


@pytest.fixture(scope="session")
def skein_client(local_cluster: LocalCluster) -> Iterator[Any]:
    """A ``skein.Client`` (its own Java driver) talking to the local cluster."""
    import skein

    with skein.Client() as client:
        yield client
