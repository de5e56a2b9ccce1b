"""The environment of a local cluster's JVMs, and the NameNode's first format.

Daemons on this machine's loopback get the client's environment (containers
then find the client's Python); daemons on a host of their own get a node's
plain environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tfyarn.cluster import _hadoop, _process
from tfyarn.errors import ClusterError

# A host's plain environment: what a node of a real cluster has, plus the
# cluster's own yarn/hdfs commands; never the client's virtualenv.
PLAIN_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# How long the NameNode's format may take.
FORMAT_TIMEOUT_S = 180


def daemon_env(
    base_dir: Path, java_home: Path, module_flags: tuple[str, ...]
) -> dict[str, str]:
    """The environment of a daemon on this machine (and of ``yarn`` commands)."""
    env = dict(os.environ)
    # Containers inherit the NodeManager's PATH: the client's Python comes
    # first, so `python3` in a container is the interpreter running tfyarn.
    python_bin = str(Path(sys.executable).parent)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p]
    env["PATH"] = os.pathsep.join([python_bin, str(base_dir / "bin"), *path])
    env["JAVA_HOME"] = str(java_home)
    env["HADOOP_CONF_DIR"] = str(base_dir / "conf")
    # Passed on to containers (yarn.nodemanager.env-whitelist): the JVMs in
    # them (skein's application master) need the same --add-opens flags.
    env["JDK_JAVA_OPTIONS"] = " ".join(module_flags)
    env.pop("CLASSPATH", None)
    return env


def host_env(
    base_dir: Path, conf_dir: Path, java_home: Path, module_flags: tuple[str, ...]
) -> dict[str, str]:
    """The environment of a daemon on a host of its own (``conf_dir``: the host's)."""
    # A plain environment, as on a real node: nothing from the client's shell,
    # so containers do not find the client's virtualenv on PATH.
    env = {
        "PATH": os.pathsep.join([str(base_dir / "bin"), PLAIN_PATH]),
        "HOME": os.environ.get("HOME", "/root"),
        "LANG": "C.UTF-8",
        "JAVA_HOME": str(java_home),
        "HADOOP_CONF_DIR": str(conf_dir),
        "JDK_JAVA_OPTIONS": " ".join(module_flags),
        "MALLOC_ARENA_MAX": "2",
    }
    if "USER" in os.environ:
        env["USER"] = os.environ["USER"]
    return env


def format_namenode_if_needed(
    base_dir: Path,
    java_home: Path,
    module_flags: tuple[str, ...],
    log: Callable[[str], None],
    *,
    hadoop_version: str,
) -> None:
    """Format HDFS on the cluster's first start (with ``hadoop_version``'s
    NameNode); later starts keep its data.

    Raises
    ------
    ClusterError
        The format failed or hung, with its log's last lines.
    """
    data_dir = base_dir / "data"
    name_dir = data_dir / "namenode"
    if (name_dir / "current" / "VERSION").is_file():
        return
    log("Formatting the NameNode (first start) ...")
    # A DataNode directory from another format would be refused (cluster ID).
    shutil.rmtree(data_dir / "datanode", ignore_errors=True)
    command = _process.java_command(
        "org.apache.hadoop.hdfs.server.namenode.NameNode",
        java_home=java_home,
        base_dir=base_dir,
        classpath=_hadoop.daemon_classpath(base_dir / "conf", hadoop_version),
        heap="256m",
        module_flags=module_flags,
        log_name="namenode-format",
        args=["-format", "-force", "-nonInteractive"],
    )
    out = _process.out_file(base_dir, "namenode-format")
    logfile = _process.log_file(base_dir, "namenode-format")
    try:
        with open(out, "wb") as stream:
            proc = subprocess.run(
                command,
                stdout=stream,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                timeout=FORMAT_TIMEOUT_S,
                check=False,
                env=daemon_env(base_dir, java_home, module_flags),
            )
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(
            f"formatting the NameNode took more than {FORMAT_TIMEOUT_S} s; "
            f"see {logfile}"
        ) from exc
    if proc.returncode != 0 or not (name_dir / "current" / "VERSION").is_file():
        raise ClusterError(
            f"formatting the NameNode failed (exit {proc.returncode}):\n    "
            f"{_process.log_excerpt(logfile) or _process.log_excerpt(out)}\n"
            f"Full log: {logfile}. Fix the cause, or start from scratch with "
            "`tfyarn cluster stop --wipe`."
        )
