"""Write a cluster's configuration and its ``yarn``/``hdfs``/``hadoop`` commands.

The XML templates in ``conf/hadoop/`` hold ``{{name}}`` placeholders (Hadoop's
own ``${...}`` syntax passes through untouched).
"""

from __future__ import annotations

import getpass
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from tfyarn import _paths
from tfyarn.cluster import _cds, _daemon_archive, _gpus, _ha, _scheduler
from tfyarn.cluster._settings import ClusterSettings
from tfyarn.contract import local_cluster
from tfyarn.errors import ClusterError

TEMPLATES = (
    "core-site.xml",
    "hdfs-site.xml",
    "yarn-site.xml",
    "capacity-scheduler.xml",
    "resource-types.xml",
    "node-resources.xml",
    "log4j.properties",
)

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")

# Flags that make short-lived JVMs (command lines) start faster and smaller.
CLI_JVM_FLAGS = (
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",  # as the daemons (_process.DAEMON_JVM_FLAGS)
)


def template_dir() -> Path:
    return _paths.conf_dir() / "hadoop"


def render_text(text: str, values: Mapping[str, object], *, source: str = "") -> str:
    """Fill ``{{name}}`` placeholders; an unknown name is an error, not a blank."""

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise ClusterError(
                f"template {source} uses unknown placeholder {{{{{name}}}}}"
            )
        return str(values[name])

    return _PLACEHOLDER.sub(fill, text)


def template_values(
    settings: ClusterSettings,
    *,
    base_dir: Path,
    lib_dir: Path,
    master_address: str = "127.0.0.1",
    node_host: str = "127.0.0.1",
    node_address: str = "127.0.0.1",
    node_dir: Path | None = None,
) -> dict[str, object]:
    """Placeholder values; the defaults are the single node on loopback, a host
    of a multi-host cluster passes its own name, address and directory."""
    values: dict[str, object] = {
        "base_dir": base_dir,
        "node_dir": node_dir or base_dir,
        "master_address": master_address,
        "node_host": node_host,
        "node_address": node_address,
        "conf_dir": local_cluster.conf_dir(base_dir),
        "lib_dir": lib_dir,
        "user": getpass.getuser(),
        "memory_mb": settings.memory_mb,
        "vcores": settings.vcores,
        "gpus": settings.gpus,
        "min_allocation_mb": settings.min_allocation_mb,
        "nm_expiry_ms": 20000 if settings.multihost else 600000,
        "replication": min(3, settings.nodes - 1) if settings.nodes > 2 else 1,
        "dn_recheck_ms": 5000 if settings.multihost else 30000,
        "am_max_attempts": settings.am_max_attempts,
        "max_am_resource_percent": settings.max_am_resource_percent,
    }
    values["queue_properties"] = _scheduler.queue_properties(
        settings.queues, settings.labels
    )
    # The preemption monitor's switches belong in yarn-site.xml too.
    values["label_properties"] = "\n".join(
        [
            _scheduler.label_properties(
                settings.labels, label_store(base_dir).as_uri()
            ),
            _scheduler.preemption_properties(settings.preemption),
        ]
    )
    values["default_fs"] = _ha.default_fs(settings, master_address)
    values["ha_core_properties"] = _ha.core_properties(settings, master_address)
    values["namenode_properties"] = _ha.hdfs_properties(
        settings, base_dir, master_address
    )
    values["resourcemanager_properties"] = _ha.yarn_properties(
        settings, master_address, rm_state_store(base_dir)
    )
    values["nm_recovery_dir"] = nm_recovery_dir(node_dir or base_dir)
    values["gpu_properties"] = _gpus.yarn_properties(settings, node_dir or base_dir)
    values.update(settings.resolved_ports())
    return values


def label_store(base_dir: Path) -> Path:
    """Where the ResourceManager keeps the node labels (not Hadoop's default
    under /tmp, which every cluster on the machine would share)."""
    return base_dir / "data" / "node-labels"


def rm_state_store(base_dir: Path) -> Path:
    """Where the ResourceManager keeps its applications for a restart."""
    return base_dir / "data" / "rm-state"


def nm_recovery_dir(node_dir: Path) -> Path:
    """Where a node's NodeManager keeps its containers for a restart."""
    return node_dir / "data" / "nm-recovery"


def recovery_stores(base_dir: Path) -> list[Path]:
    """Every recovery store of the cluster in ``base_dir``: the
    ResourceManager's and each NodeManager's (loopback and every host's,
    whatever the number of hosts a previous start made)."""
    hosts = sorted((base_dir / "nodes").glob("*"))
    return [
        rm_state_store(base_dir),
        # With HA, ZooKeeper holds the ResourceManagers' state (and the locks).
        _ha.zookeeper_dir(base_dir),
        nm_recovery_dir(base_dir),
        *(nm_recovery_dir(h) for h in hosts),
    ]


def write_config(
    settings: ClusterSettings,
    *,
    base_dir: Path,
    lib_dir: Path,
    conf: Path | None = None,
    **where: object,
) -> Path:
    """Render every template into ``conf`` (default ``<base_dir>/conf``); ``where``
    are ``template_values``' host keywords. Returns the directory."""
    conf = conf or local_cluster.conf_dir(base_dir)
    conf.mkdir(parents=True, exist_ok=True)
    values = template_values(
        settings,
        base_dir=base_dir,
        lib_dir=lib_dir,
        **where,  # type: ignore[arg-type]
    )
    for name in TEMPLATES:
        source = template_dir() / name
        (conf / name).write_text(render_text(source.read_text(), values, source=name))
    if settings.ha:
        master = str(where.get("master_address", "127.0.0.1"))
        _ha.zoo_cfg_path(conf).write_text(_ha.zoo_cfg(settings, base_dir, master))
    return conf


# subcommand -> (main class, pass the subcommand name on as the first argument)
YARN_COMMANDS: dict[str, tuple[str, bool]] = {
    "application": ("org.apache.hadoop.yarn.client.cli.ApplicationCLI", True),
    "app": ("org.apache.hadoop.yarn.client.cli.ApplicationCLI", True),
    "applicationattempt": ("org.apache.hadoop.yarn.client.cli.ApplicationCLI", True),
    "container": ("org.apache.hadoop.yarn.client.cli.ApplicationCLI", True),
    "logs": ("org.apache.hadoop.yarn.client.cli.LogsCLI", False),
    "node": ("org.apache.hadoop.yarn.client.cli.NodeCLI", False),
    "queue": ("org.apache.hadoop.yarn.client.cli.QueueCLI", False),
    "cluster": ("org.apache.hadoop.yarn.client.cli.ClusterCLI", False),
    "rmadmin": ("org.apache.hadoop.yarn.client.cli.RMAdminCLI", False),
    "top": ("org.apache.hadoop.yarn.client.cli.TopCLI", False),
    "version": ("org.apache.hadoop.util.VersionInfo", False),
    "jar": ("org.apache.hadoop.util.RunJar", False),
}
HDFS_COMMANDS: dict[str, tuple[str, bool]] = {
    "dfs": ("org.apache.hadoop.fs.FsShell", False),
    "dfsadmin": ("org.apache.hadoop.hdfs.tools.DFSAdmin", False),
    "fsck": ("org.apache.hadoop.hdfs.tools.DFSck", False),
    "getconf": ("org.apache.hadoop.hdfs.tools.GetConf", False),
    "haadmin": ("org.apache.hadoop.hdfs.tools.DFSHAAdmin", False),
    "version": ("org.apache.hadoop.util.VersionInfo", False),
}
HADOOP_COMMANDS: dict[str, tuple[str, bool]] = {
    "fs": ("org.apache.hadoop.fs.FsShell", False),
    "version": ("org.apache.hadoop.util.VersionInfo", False),
    "jar": ("org.apache.hadoop.util.RunJar", False),
    "checknative": ("org.apache.hadoop.util.NativeLibraryChecker", False),
    "conftest": ("org.apache.hadoop.util.ConfTest", False),
}
WRAPPERS = {"yarn": YARN_COMMANDS, "hdfs": HDFS_COMMANDS, "hadoop": HADOOP_COMMANDS}


def wrapper_script(
    name: str,
    commands: Mapping[str, tuple[str, bool]],
    *,
    java_home: Path,
    conf_dir: Path,
    lib_dir: Path,
    jvm_flags: Sequence[str],
) -> str:
    """A POSIX shell script that behaves like Hadoop's own ``name`` command."""
    q = shlex.quote
    java = (
        f'"$JAVA_HOME/bin/java" {" ".join(q(f) for f in jvm_flags)} $HADOOP_CLIENT_OPTS'
        ' -Dhadoop.root.logger="${HADOOP_ROOT_LOGGER:-WARN,console}" -cp "$CP"'
    )
    archive = (
        _archive_lines(java_home, lib_dir, java) if _cds.supported(java_home) else ""
    )
    cases = []
    for sub, (cls, keep) in commands.items():
        args = f'{q(sub)} "$@"' if keep else '"$@"'
        cases.append(f"  {sub}) CLASS={cls}; set -- {args} ;;")
    case_lines = "\n".join(cases)
    usage = " | ".join([*commands, "classpath [--glob]", "CLASSNAME"])
    return f"""#!/bin/sh
# {name}: generated by `tfyarn cluster start` for the local cluster; do not edit.
# Runs the same Java classes as Hadoop's own `{name}` script.
JAVA_HOME=${{JAVA_HOME:-{q(str(java_home))}}}
HADOOP_CONF_DIR=${{HADOOP_CONF_DIR:-{q(str(conf_dir))}}}
HADOOP_LIB={q(str(lib_dir))}
export JAVA_HOME HADOOP_CONF_DIR
if [ $# -eq 0 ] || [ "$1" = "--help" ] || [ "$1" = "-h" ]; then
  echo "Usage: {name} {usage} [args]" >&2
  exit 1
fi
SUB=$1; shift
if [ "$SUB" = classpath ]; then
  if [ "$1" = "--glob" ]; then
    # Every jar spelled out, as Hadoop's `classpath --glob` does; the
    # configuration last, so skein's driver can map one class-data archive
    # for every local cluster (tfyarn/cluster/_driver_archive.py).
    CP=
    for jar in "$HADOOP_LIB"/*.jar; do CP=$CP$jar:; done
    echo "$CP$HADOOP_CONF_DIR"
  else
    echo "$HADOOP_CONF_DIR:$HADOOP_LIB/*"
  fi
  exit 0
fi
case "$SUB" in
{case_lines}
  *.*) CLASS=$SUB ;;
  *) echo "{name}: unknown command '$SUB' (this local cluster's {name} knows: {usage})" >&2; exit 1 ;;
esac
# The jars first, the configuration last (a class-data archive never checks it).
CP="$HADOOP_LIB/*:$HADOOP_CONF_DIR"
set -- "$CLASS" "$@"
{archive}exec {java} "$@"
"""


def _archive_lines(java_home: Path, lib_dir: Path, java: str) -> str:
    """Shell lines that run ``$@`` with the class-data archive of ``$CLASS``
    (tfyarn/cluster/_daemon_archive.py): mapped when it exists; otherwise
    the first run writes the classes it loaded as it exits and keeps them as
    the archive when it exits 0 (the JVM then wrote it whole). That one run
    is the script's child rather than its replacement: signals are passed
    on, and its standard input is the script's."""
    q = shlex.quote
    tail = _daemon_archive.lib_archive_path(
        java_home, lib_dir, role=""
    )  # -<digest>.jsa
    quiet = " ".join(_cds.QUIET)
    return f"""if [ "$JAVA_HOME" = {q(str(java_home))} ]; then
  ARCHIVE={q(str(tail.parent))}/"${{CLASS##*.}}"{q(tail.name)}
  if [ -f "$ARCHIVE" ]; then
    set -- -XX:SharedArchiveFile="$ARCHIVE" {quiet} "$@"
  elif mkdir -p "${{ARCHIVE%/*}}" 2>/dev/null && [ -w "${{ARCHIVE%/*}}" ]; then
    # (A JVM that cannot write the file says so on stdout: only where it can.)
    PARTIAL="$ARCHIVE.$$.tmp"
    exec 3<&0
    {java} -XX:ArchiveClassesAtExit="$PARTIAL" {quiet} "$@" <&3 3<&- &
    pid=$!
    trap 'kill -TERM "$pid" 2>/dev/null' INT TERM HUP
    while :; do
      wait "$pid"; rc=$?
      kill -0 "$pid" 2>/dev/null || break  # a signal woke the wait, not its end
    done
    if [ "$rc" -eq 0 ] && [ -s "$PARTIAL" ] && [ ! -e "$ARCHIVE" ]; then
      mv -f "$PARTIAL" "$ARCHIVE"
    fi
    rm -f "$PARTIAL"
    exit "$rc"
  fi
fi
"""


def write_wrappers(
    *, base_dir: Path, java_home: Path, lib_dir: Path, module_flags: Sequence[str]
) -> Path:
    """Write ``<base_dir>/bin/{yarn,hdfs,hadoop}``; returns the bin directory."""
    bin_dir = base_dir / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    for name, commands in WRAPPERS.items():
        path = bin_dir / name
        path.write_text(
            wrapper_script(
                name,
                commands,
                java_home=java_home,
                conf_dir=local_cluster.conf_dir(base_dir),
                lib_dir=lib_dir,
                jvm_flags=[*CLI_JVM_FLAGS, *module_flags],
            )
        )
        path.chmod(0o755)
    return bin_dir
