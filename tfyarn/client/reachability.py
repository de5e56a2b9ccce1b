"""Whether the cluster's services answer, and the error naming what did not.

skein's driver retries an unreachable ResourceManager for
``$TFYARN_YARN_TIMEOUT`` (:mod:`tfyarn.client.hadoop_conf`); a TCP probe of
the ResourceManagers of the configuration tells at once whether one accepts
connections (said before a call that would otherwise look hung), and
:func:`unreachable` words the error after a call gave up: the ResourceManager,
or the HDFS NameNode Hadoop's message names.
"""

from __future__ import annotations

import re
import shutil
import socket
from pathlib import Path

from tfyarn.client import hadoop_conf
from tfyarn.client.which_cluster import conf_dir, use_cluster
from tfyarn.contract.hadoop_conf import RM_PORT, HadoopConf, NameNode, explicit_conf_dir
from tfyarn.errors import ClusterError, TfyarnError

# How long to wait for a ResourceManager to accept a connection.
PROBE_TIMEOUT_S = 3.0
# "Call From vm/127.0.0.1 to localhost:1 failed on connection exception".
_CALLED = re.compile(r"\bto ([\w.\-]+):(\d+) failed on\b")


class YarnUnreachableError(TfyarnError, ConnectionError):
    """The ResourceManager could not be reached within the bound."""


def unreachable_rm_notice() -> str | None:
    """A line for a person when no ResourceManager accepts connections now.

    Said before a command's YARN call, which then looks for one for
    ``$TFYARN_YARN_TIMEOUT``: during a restart or a takeover, silence for that
    long reads as a hang. None when one accepts, or no cluster is configured
    or no ``yarn`` command found (the call itself then says so, at once).
    """
    if shutil.which("yarn") is None:
        return None
    try:
        use_cluster()  # sets $HADOOP_CONF_DIR, or raises
        addresses = HadoopConf(conf_dir()).rm_addresses
    except ClusterError:
        return None
    if _any_accepts(addresses, PROBE_TIMEOUT_S):
        return None
    return (
        f"no ResourceManager accepts connections at {', '.join(addresses)} "
        "(restarting, or one taking over?); trying for up to "
        f"{hadoop_conf.yarn_timeout():.0f} s ({hadoop_conf.TIMEOUT_ENV}) ..."
    )


def rm_accepts_connections(timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a ResourceManager of ``$HADOOP_CONF_DIR`` accepts a TCP connection.

    True when there is no configuration to tell (nothing to contradict).
    """
    chosen = explicit_conf_dir()
    if not chosen:
        return True
    try:
        addresses = HadoopConf(chosen).rm_addresses
    except ClusterError:
        return True
    return _any_accepts(addresses, timeout)


def _any_accepts(addresses: list[str], timeout: float) -> bool:
    """Whether any ``host:port`` of ``addresses`` accepts a TCP connection."""
    for address in addresses:
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return True
        except (OSError, ValueError):
            continue
    return False


def _name_service_of(directory: str, address: str) -> tuple[str, list[NameNode]] | None:
    """The HA name service of ``directory`` that ``address`` is a NameNode of.

    With HA, fs.defaultFS names the service (``hdfs://ns1``), not an address:
    the address Hadoop's message names is in hdfs-site.xml.
    """
    if not directory:
        return None
    try:
        services = HadoopConf(directory).name_services
    except ClusterError:
        return None  # a hint is not worth a second error
    for name, nodes in services.items():
        if any(n.address == address for n in nodes):
            return name, nodes
    return None


def unreachable(detail: str) -> TfyarnError:
    """The error for a Hadoop service that did not answer, naming where it was sought.

    Hadoop's message names the address it called ("Call From h to rm:8032
    failed on connection exception"): the ResourceManager, or, while skein's
    driver uploads a job's files, the HDFS NameNode.
    """
    directory = explicit_conf_dir() or ""
    addresses = (
        HadoopConf(directory).rm_addresses if directory else [f"0.0.0.0:{RM_PORT}"]
    )
    timeout = hadoop_conf.yarn_timeout()
    called = _CALLED.search(detail)
    rm_ports = {a.rpartition(":")[2] for a in addresses}
    if called and called.group(2) not in rm_ports:
        address = f"{called.group(1)}:{called.group(2)}"
        service = _name_service_of(directory, address)
        if service is not None:
            hdfs_site = Path(directory) / "hdfs-site.xml"
            nodes = ", ".join(f"{n.id} at {n.address}" for n in service[1])
            return TfyarnError(
                f"could not reach {address} ({detail}), a NameNode of the HDFS "
                f"name service {service[0]} ({nodes}; {hdfs_site}). Check which "
                f"NameNode is active with `hdfs haadmin -ns {service[0]} "
                "-getAllServiceState` and that `hdfs dfs -ls /` works"
            )
        core_site = Path(directory or "$HADOOP_CONF_DIR") / "core-site.xml"
        return TfyarnError(
            f"could not reach {address} ({detail}). If that is the HDFS "
            f"NameNode (fs.defaultFS in {core_site}), check that it runs and "
            "that `hdfs dfs -ls /` works"
        )
    return YarnUnreachableError(
        f"could not reach the YARN ResourceManager at {', '.join(addresses)} "
        f"({detail}; gave up after retrying for about {timeout:.0f} s). Check "
        f"that the ResourceManager runs and that yarn.resourcemanager.address in "
        f"{Path(directory or '$HADOOP_CONF_DIR') / 'yarn-site.xml'} names it; "
        f"{hadoop_conf.TIMEOUT_ENV}=SECONDS waits longer"
    )
