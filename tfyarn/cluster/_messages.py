"""Why a local cluster did not start: one paragraph each, naming the log to read."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tfyarn.cluster import _probe, _process
from tfyarn.cluster._process import Daemon


def disk_full(base_dir: Path, data_dir: Path, hdfs: _probe.HdfsHealth) -> str:
    """HDFS stays in safe mode: the NameNode's disk is too full."""
    return (
        "HDFS stays in safe mode because the disk holding "
        f"{data_dir} is too full (the NameNode says: "
        f"{hdfs.safe_mode.strip()[:200]}). NameNode log: "
        f"{_process.log_file(base_dir, 'namenode')}. Free disk space there "
        "and run `tfyarn cluster stop` and `tfyarn cluster start`, or start a "
        "cluster elsewhere with `--base-dir DIR`."
    )


def daemon_died(
    base_dir: Path,
    daemon: Daemon,
    proc: subprocess.Popen[bytes] | None,
    key: str | None = None,
    *,
    since: int = 0,
) -> str:
    """A daemon exited during start: the errors it logged since byte ``since``."""
    key = key or daemon.name
    logfile = _process.log_file(base_dir, key)
    out = _process.out_file(base_dir, key)
    code = f" with exit code {proc.returncode}" if proc is not None else ""
    excerpt = _process.log_excerpt(logfile, since=since) or _process.log_excerpt(out)
    return (
        f"the {daemon.title} exited during start{code}. Last errors:\n    "
        f"{excerpt or '(nothing logged)'}\n"
        f"Its log: {logfile} (JVM output: {out}). Fix the cause shown there; "
        "if its data is corrupt, `tfyarn cluster stop --wipe` starts afresh."
    )


def not_ready(
    base_dir: Path,
    timeout: float,
    hdfs: _probe.HdfsHealth | None,
    nodes: list[_probe.NodeReport] | None,
) -> str:
    """The cluster was not ready in time: what is missing, and which logs say why."""
    problems = []
    if hdfs is None:
        problems.append(
            "the NameNode web endpoint never answered (log: "
            f"{_process.log_file(base_dir, 'namenode')})"
        )
    elif not hdfs.ready:
        why = hdfs.safe_mode.strip() or f"{hdfs.live_datanodes} live DataNodes"
        problems.append(
            f"HDFS is not ready: {why} (logs: "
            f"{_process.log_file(base_dir, 'namenode')}, "
            f"{_process.log_file(base_dir, 'datanode')})"
        )
    if nodes is None:
        problems.append(
            "the ResourceManager web endpoint never answered (log: "
            f"{_process.log_file(base_dir, 'resourcemanager')})"
        )
    elif not any(n.state == "RUNNING" for n in nodes):
        seen = ", ".join(f"{n.node_id} {n.state} {n.health}" for n in nodes)
        problems.append(
            f"no NodeManager is RUNNING ({seen or 'none registered'}; log: "
            f"{_process.log_file(base_dir, 'nodemanager')})"
        )
    return (
        f"the local cluster was not ready after {timeout:.0f} s: "
        + "; ".join(problems)
        + ". A busy machine may need a longer --timeout; otherwise the logs "
        "above name the cause. The daemons started by this attempt were stopped."
    )
