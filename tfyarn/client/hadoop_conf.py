"""The client's Hadoop configuration: checked, and bounded for YARN calls.

Hadoop silently falls back to its built-in defaults (a ResourceManager on
``0.0.0.0:8032``) when ``$HADOOP_CONF_DIR`` is empty or lacks its site files,
and its YARN client retries an unreachable ResourceManager for up to 15 minutes
(``yarn.resourcemanager.connect.max-wait.ms``), each attempt itself retried at
the IPC layer (``ipc.client.connect.max.retries``): measured, ``tfyarn list``
against ``127.0.0.1:1`` printed nothing for over 1000 s. So the directory is
checked (:func:`tfyarn.contract.hadoop_conf.check_conf_dir`), and every Java
process tfyarn starts to talk to YARN (skein's driver, ``yarn logs``) reads a
copy of it whose retry settings give up after :func:`yarn_timeout` seconds
(:func:`bounded_conf_dir`).

What the configuration says (its ResourceManagers, whether it is secure) is
read by :mod:`tfyarn.contract.hadoop_conf`, which the master and the task
runtime share; this module holds only what the client does with it.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

from tfyarn.errors import ClusterError

# Seconds before a YARN call to an unreachable ResourceManager gives up;
# TFYARN_YARN_TIMEOUT overrides it.
DEFAULT_YARN_TIMEOUT = 20.0
TIMEOUT_ENV = "TFYARN_YARN_TIMEOUT"
# Between two tries of a ResourceManager HA pair (Hadoop randomises it 0.5-1.5x).
FAILOVER_SLEEP_MS = 1000


def yarn_timeout() -> float:
    """Seconds a YARN call may spend reaching the ResourceManager.

    ``$TFYARN_YARN_TIMEOUT`` if set (a positive number), else 20 s.

    Raises
    ------
    ClusterError
        ``$TFYARN_YARN_TIMEOUT`` is not a positive number.
    """
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return DEFAULT_YARN_TIMEOUT
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ClusterError(
            f"{TIMEOUT_ENV}={raw!r} is not a positive number of seconds; "
            f"unset it for the default {DEFAULT_YARN_TIMEOUT:.0f} s"
        )
    return value


def retry_settings(timeout: float) -> dict[str, str]:
    """Hadoop client settings under which reaching the RM gives up after ~``timeout`` s.

    YARN's RMProxy retries a whole call every ``retry-interval`` until
    ``max-wait`` (counted as max-wait / interval attempts, however long each
    takes); each attempt is a Hadoop IPC call with its own connect retries and
    a read timeout (``ipc.client.rpc-timeout.ms``, 120 s by default, which a
    ResourceManager that accepts connections but never answers runs into on
    every attempt). Bounded here: three attempts, ``timeout / 2`` apart, each
    with one connect retry, a 5 s connect timeout and a ``timeout / 2`` read
    timeout. Measured against 127.0.0.1:1 (refused): about ``timeout`` s; a
    silent listener: about ``2.5 * timeout`` s (it hung for over 200 s before).

    With ResourceManager HA, RMProxy counts failovers instead: by default
    ``max-wait / failover-sleep-base``, the base being the retry interval, so
    two failovers with a sleep of up to 1.5 * ``timeout / 2``. A takeover (the
    standby waits out the dead one's ZooKeeper session, then recovers, and
    only then listens for clients) outlasted that under load: the call failed
    a second before the new active ResourceManager answered. HA clients try
    each RM once per failover (``yarn.client.failover-retries``, 0), so a
    refusing one costs only the sleep: failovers here sleep 0.5-1.5 s and go
    on for ``timeout`` attempts, about ``timeout`` s spent finding the active
    one. An RM host that drops packets adds the 5 s connect timeout to each
    of its attempts.
    """
    wait_ms = int(timeout * 1000)
    half_ms = max(1000, wait_ms // 2)
    return {
        "yarn.client.failover-sleep-base-ms": str(FAILOVER_SLEEP_MS),
        "yarn.client.failover-sleep-max-ms": str(FAILOVER_SLEEP_MS),
        "yarn.client.failover-max-attempts": str(max(2, wait_ms // FAILOVER_SLEEP_MS)),
        "yarn.resourcemanager.connect.max-wait.ms": str(wait_ms),
        "yarn.resourcemanager.connect.retry-interval.ms": str(half_ms),
        "ipc.client.connect.max.retries": "1",
        "ipc.client.connect.retry.interval": "1000",
        "ipc.client.connect.max.retries.on.timeouts": "1",
        "ipc.client.connect.timeout": "5000",
        "ipc.client.rpc-timeout.ms": str(max(5000, half_ms)),
    }


_overlays: dict[tuple[str, float], Path] = {}


def bounded_conf_dir(conf_dir: str | os.PathLike[str], timeout: float) -> Path:
    """A copy of ``conf_dir`` whose yarn-site.xml bounds every RM connection.

    Java reads ``yarn-site.xml`` from the first directory on its classpath, and
    Hadoop's ``yarn classpath`` puts ``$HADOOP_CONF_DIR`` first, so a Java
    client started with ``HADOOP_CONF_DIR`` = this copy gets
    :func:`retry_settings` on top of the cluster's own configuration. One copy
    per process (Hadoop may re-read its files at any time, so it must outlive
    the Java processes), removed when the process exits.
    """
    key = (str(Path(conf_dir).resolve()), timeout)
    if key in _overlays and _overlays[key].is_dir():
        return _overlays[key]
    try:
        overlay = Path(tempfile.mkdtemp(prefix="tfyarn-conf-"))
        atexit.register(shutil.rmtree, overlay, ignore_errors=True)
        for entry in Path(conf_dir).iterdir():
            if entry.is_file():
                shutil.copy2(entry, overlay / entry.name)
        _set_properties(overlay / "yarn-site.xml", retry_settings(timeout))
    except (OSError, ET.ParseError) as exc:
        raise ClusterError(
            f"could not copy HADOOP_CONF_DIR={conf_dir} to {tempfile.gettempdir()} "
            f"to bound its retries ({exc}); check that directory has space"
        ) from None
    _overlays[key] = overlay
    return overlay


def _set_properties(path: Path, values: dict[str, str]) -> None:
    tree = ET.parse(path)
    root = tree.getroot()
    for prop in root.findall("property"):
        if (prop.findtext("name") or "").strip() in values:
            root.remove(prop)  # top-level <property> only: Hadoop reads no others
    for name, value in values.items():
        prop = ET.SubElement(root, "property")
        ET.SubElement(prop, "name").text = name
        ET.SubElement(prop, "value").text = value
    tree.write(path, encoding="utf-8", xml_declaration=True)
