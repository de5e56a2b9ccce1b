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

from tfyarn.cluster import _daemon_archive, _hadoop, _process
from tfyarn.contract import local_cluster
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
    # ... and its node's stand-in nvidia-smi (``--gpus``), as on a GPU node.
    gpu_bin = str(base_dir / "gpu")
    env["PATH"] = os.pathsep.join([python_bin, str(base_dir / "bin"), gpu_bin, *path])
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
        "PATH": os.pathsep.join(
            [str(base_dir / "bin"), str(conf_dir.parent / "gpu"), PLAIN_PATH]
        ),
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
    ha: bool = False,
) -> None:
    """Format HDFS on the cluster's first start (with ``hadoop_version``'s
    NameNode); later starts keep its data.

    With ``ha`` the JournalNode must be up: formatting ``nn1`` formats the
    journal too, and ``nn2`` starts from a copy of ``nn1``'s fresh image (what
    ``-bootstrapStandby`` would fetch).

    Raises
    ------
    ClusterError
        The format failed or hung, with its log's last lines.
    """
    data_dir = base_dir / "data"
    name_dir = data_dir / "namenode"
    if not (name_dir / "current" / "VERSION").is_file():
        log("Formatting the NameNode (first start) ...")
        # A DataNode directory from another format would be refused (cluster ID).
        shutil.rmtree(data_dir / "datanode", ignore_errors=True)
        shutil.rmtree(data_dir / "namenode2", ignore_errors=True)
        args = ["-format", "-force", "-nonInteractive"]
        run_once(
            local_cluster.NAMENODE_MAIN_CLASS,
            [*(_NN1 if ha else ()), *args],
            "namenode-format",
            base_dir=base_dir,
            java_home=java_home,
            module_flags=module_flags,
            hadoop_version=hadoop_version,
            what="formatting the NameNode",
        )
        if not (name_dir / "current" / "VERSION").is_file():
            raise ClusterError(
                f"formatting the NameNode left no image in {name_dir}; see "
                f"{_process.log_file(base_dir, 'namenode-format')}"
            )
    standby_dir = data_dir / "namenode2"
    if ha and not (standby_dir / "current" / "VERSION").is_file():
        shutil.copytree(name_dir, standby_dir, dirs_exist_ok=True)
        (standby_dir / "in_use.lock").unlink(missing_ok=True)


def format_failover_state(
    base_dir: Path,
    java_home: Path,
    module_flags: tuple[str, ...],
    *,
    hadoop_version: str,
) -> None:
    """Create the failover controllers' znode in a fresh ZooKeeper
    (``hdfs zkfc -formatZK``)."""
    run_once(
        "org.apache.hadoop.hdfs.tools.DFSZKFailoverController",
        [*_NN1, "-formatZK", "-force", "-nonInteractive"],
        "zkfc-format",
        base_dir=base_dir,
        java_home=java_home,
        module_flags=module_flags,
        hadoop_version=hadoop_version,
        what="formatting the failover controllers' state in ZooKeeper",
    )


# nn1's id, for commands run outside a daemon (both NameNodes share a conf).
_NN1 = ("-D", "dfs.ha.namenode.id=nn1")


def run_once(
    main_class: str,
    args: list[str],
    log_name: str,
    *,
    base_dir: Path,
    java_home: Path,
    module_flags: tuple[str, ...],
    hadoop_version: str,
    what: str,
) -> None:
    """Run a Hadoop command to its end on the classpath of ``hadoop_version``.

    Raises
    ------
    ClusterError
        It failed or ran longer than ``FORMAT_TIMEOUT_S``, with its log's last lines.
    """
    command = _process.java_command(
        main_class,
        java_home=java_home,
        base_dir=base_dir,
        classpath=_hadoop.daemon_classpath(base_dir / "conf", hadoop_version),
        heap="256m",
        module_flags=module_flags,
        log_name=log_name,
        args=args,
        archive_options=_daemon_archive.launch_options(
            java_home, hadoop_version, log_name, base_dir, log_name
        ),
    )
    out = _process.out_file(base_dir, log_name)
    logfile = _process.log_file(base_dir, log_name)
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
        _daemon_archive.discard(base_dir, log_name)
        raise ClusterError(
            f"{what} took more than {FORMAT_TIMEOUT_S} s; see {logfile}"
        ) from exc
    if proc.returncode != 0:
        _daemon_archive.discard(base_dir, log_name)
        raise ClusterError(
            f"{what} failed (exit {proc.returncode}):\n    "
            f"{_process.log_excerpt(logfile) or _process.log_excerpt(out)}\n"
            f"Full log: {logfile}. Fix the cause, or start from scratch with "
            "`tfyarn cluster stop --wipe`."
        )
    _daemon_archive.keep(base_dir, log_name)
