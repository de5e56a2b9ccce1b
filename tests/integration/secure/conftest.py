"""One secure (Kerberos) local cluster for every test in this directory.

Its own MIT KDC on loopback, the four daemons in secure mode, delegation tokens
that live ``TOKEN_LIFETIME_S``; in its own base dir and on ports shifted by
``SECURE_PORT_OFFSET``, beside the default cluster (``.ci/run``'s trap stops it
too). The fixture is package-scoped and named ``local_cluster``: it replaces
the parent directory's autouse fixture for these tests, and puts this
cluster's environment (``KRB5_CONFIG``, the user's ticket cache, the krb5.conf
flag for skein's driver) into ``os.environ`` only while they run.
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

SECURE_BASE_DIR = Path(
    os.environ.get("TFYARN_SECURE_HOME", "/var/tmp/tfyarn-tests/secure")
)
# TFYARN_SECURE_PORT_OFFSET: a second secure cluster beside one that runs.
SECURE_PORT_OFFSET = int(os.environ.get("TFYARN_SECURE_PORT_OFFSET", "500"))
TOKEN_LIFETIME_S = 120
SECURE_SETTINGS = ClusterSettings(
    secure=True,
    token_lifetime_s=TOKEN_LIFETIME_S,
    memory_mb=4096,
    vcores=8,
    port_offset=SECURE_PORT_OFFSET,
)


def _log(message: str) -> None:
    print(f"[secure cluster] {message}", file=sys.stderr, flush=True)


def _rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024


@pytest.fixture(scope="package", autouse=True)
def local_cluster() -> Iterator[LocalCluster]:
    """The secure cluster, started for this directory's tests and stopped
    (KDC included, no process left) after them."""
    assert not missing_tools(), (
        f"Kerberos tools missing: {missing_tools()}; run tests/system-packages.sh"
    )
    cluster = LocalCluster(SECURE_BASE_DIR)
    began = time.monotonic()
    cluster.start(SECURE_SETTINGS, log=_log)
    pids = [p for p in cluster.pids().values() if p is not None]
    kdc_pid = cluster.secure().kdc.pid()
    started = identities([*pids, kdc_pid or 0])
    _log(
        f"started in {time.monotonic() - began:.1f} s; RSS "
        f"{_rss_mib(pids):.0f} MiB (daemons) + {_rss_mib([kdc_pid or 0]):.0f} MiB (KDC)"
    )
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
