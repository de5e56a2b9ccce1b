"""``tfyarn cluster start|stop|status|node|kill|restart|env``: the local cluster from the shell."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from tfyarn import _options
from tfyarn._flags import add_option, add_switch
from tfyarn.cluster import _scheduler, _versions
from tfyarn.cluster._restarts import RESTART_WAIT_S
from tfyarn.cluster._settings import PORTS, ClusterSettings, load_settings
from tfyarn.cluster.local import START_TIMEOUT_S, ClusterStatus, LocalCluster
from tfyarn.errors import ClusterError, SpecError


def parse_memory(text: str) -> int:
    """``16384``, ``16g``, ``16 GiB`` or ``512m`` to MiB, read as ``submit`` reads them."""
    try:
        return _options.parse_memory(text)
    except SpecError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def parse_port(text: str) -> tuple[str, int]:
    name, sep, value = text.partition("=")
    if not sep or name not in PORTS or not value.isdigit():
        raise argparse.ArgumentTypeError(
            f"expected NAME=PORT with NAME one of {', '.join(PORTS)}, got {text!r}"
        )
    return name, int(value)


def _arg(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """An argparse type from a parser raising ClusterError."""

    def convert(text: str) -> Any:
        try:
            return parse(text)
        except ClusterError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from exc

    return convert


def add_commands(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cluster",
        help="run a real YARN + HDFS cluster on this machine",
        description=(
            "A single-machine Hadoop cluster (NameNode, DataNode, ResourceManager, "
            "NodeManager on 127.0.0.1; or, with `start --nodes N`, N hosts in network "
            "namespaces) for trying tfyarn and running its tests. "
            'Typical use: `tfyarn cluster start && eval "$(tfyarn cluster env)"`.'
        ),
    )
    commands = parser.add_subparsers(dest="cluster_command", metavar="COMMAND")
    commands.required = True

    def common(sub: argparse.ArgumentParser) -> None:
        add_option(
            sub,
            "--base_dir",
            help="where the cluster's config, data and logs live "
            "(default: $TFYARN_CLUSTER_HOME or ~/.local/share/tfyarn/cluster)",
        )

    start = commands.add_parser(
        "start",
        help="start the cluster (fetches Hadoop on first use); a no-op if running",
        description=(
            "Start the local cluster and return once HDFS is out of safe mode and "
            "the NodeManager is RUNNING. Options not given keep the values of the "
            "previous start (defaults: 16 GiB, 16 vcores, 0 GPUs, Hadoop's ports)."
        ),
    )
    common(start)
    start.add_argument(
        "--nodes",
        type=int,
        help="N worker hosts, each a NodeManager and a DataNode in its own network "
        "namespace with its own address and host name, started with a plain "
        "environment (no client virtualenv on PATH); needs root and `ip`. "
        "0 (default): one node on loopback",
    )
    start.add_argument(
        "--memory",
        type=parse_memory,
        help="memory each NodeManager offers (16g)",
    )
    start.add_argument("--vcores", type=int, help="vcores the NodeManager offers (16)")
    start.add_argument(
        "--gpus",
        type=int,
        help="GPUs per node, behind a stand-in nvidia-smi that YARN's GPU plugin "
        "discovers; no real GPUs (0)",
    )
    add_option(
        start, "--port_offset", type=int, help="add this to every default port (0)"
    )
    start.add_argument(
        "--port",
        type=parse_port,
        action="append",
        metavar="NAME=PORT",
        help=f"set one port ({', '.join(PORTS)}); repeatable",
    )
    start.add_argument(
        "--queue",
        type=_arg(_scheduler.parse_queue),
        action="append",
        metavar="NAME:CAPACITY",
        help="a capacity-scheduler queue with CAPACITY percent of the cluster (it "
        "may grow to all of it when others are idle); repeatable, capacities add "
        "up to 100; given, they replace the previous start's queues (one queue "
        "'default': --queue default:100)",
    )
    start.add_argument(
        "--label",
        type=_arg(_scheduler.parse_label),
        action="append",
        metavar="NODE=LABEL",
        help="put YARN node label LABEL on host NODE (node1, ...) of a --nodes "
        "cluster, for `tfyarn submit --node_label` / --<role>_node_label; "
        "repeatable; labels are non-exclusive (unlabelled containers still run "
        "there); NODE= removes a host's label",
    )
    add_switch(
        start,
        "--secure",
        help="Kerberos: run the cluster's own KDC on loopback and the daemons in "
        "secure mode; `cluster env` then sets KRB5_CONFIG and a ticket cache "
        "(needs krb5-kdc, krb5-admin-server, krb5-user)",
    )
    add_option(
        start,
        "--token_lifetime",
        type=int,
        metavar="SECONDS",
        help="with --secure: delegation tokens live at most SECONDS (renew "
        "interval: half), to rehearse long jobs in minutes (Hadoop's 7 days)",
    )
    add_switch(
        start,
        "--ha",
        help="high availability as production runs it: two NameNodes behind the "
        "name service hdfs://tfyarn (a JournalNode, ZooKeeper and a failover "
        "controller each) and two ResourceManagers electing the active one in "
        "ZooKeeper; rehearse with `cluster kill|restart|failover`",
    )
    add_option(
        start,
        "--container_executor",
        metavar="PATH",
        help="run containers through the LinuxContainerExecutor with YARN's Docker "
        "runtime, using Hadoop's container-executor at PATH (root-owned, mode "
        "6050, outside /tmp); its configuration ../etc/hadoop/container-executor.cfg "
        "is written and checked, then its --checksetup must pass",
    )
    add_option(
        start,
        "--hadoop_version",
        type=_arg(lambda text: _versions.lookup(text).version),
        metavar="VERSION",
        help=f"the Hadoop release to run, one of {_versions.known_list()} "
        f"({_versions.DEFAULT_VERSION}); 3.1.1 is CDP 7.1's and HDP 3.1's, 3.3.6 "
        "EMR 7's and Dataproc 2.3's. Each version's jars are fetched once; "
        "switching a cluster that holds HDFS data needs `stop --wipe` first",
    )
    start.add_argument(
        "--timeout",
        type=float,
        default=START_TIMEOUT_S,
        help=f"seconds to wait for the daemons to be ready ({START_TIMEOUT_S:.0f})",
    )
    start.set_defaults(func=_start)

    stop = commands.add_parser("stop", help="stop every process of the cluster")
    common(stop)
    stop.add_argument(
        "--wipe", action="store_true", help="also delete HDFS data, logs and config"
    )
    stop.set_defaults(func=_stop)

    status = commands.add_parser(
        "status",
        help="processes, ports, node resources, web UIs, directories",
        description="Exit code 0 when all four daemons run, 1 otherwise.",
    )
    common(status)
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(func=_status)

    node = commands.add_parser(
        "node",
        help="crash, restart, partition or heal one host of a multi-host cluster",
        description=(
            "stop: SIGKILL the host's NodeManager, DataNode and containers, as a "
            "crashed host's. start: start its daemons again and wait until its "
            "NodeManager is RUNNING. partition: cut the host's link (its processes "
            "keep running). heal: reconnect it."
        ),
    )
    common(node)
    node.add_argument("action", choices=["stop", "start", "partition", "heal"])
    node.add_argument("name", help="node1, node2, ... (or its host name)")
    node.set_defaults(func=_node)

    kill = _daemon_command(
        commands,
        "kill",
        help="crash a NameNode, ResourceManager or NodeManager and leave it down",
        description="SIGKILL the daemon's JVM, as a crash would; its containers "
        "keep running. It stays down until `restart` or `start`. On an --ha "
        "cluster, `namenode` and `resourcemanager` without NAME mean the active "
        "one: the other takes over.",
    )
    common(kill)
    kill.set_defaults(func=_kill)

    restart = _daemon_command(
        commands,
        "restart",
        help="crash a NameNode, ResourceManager or NodeManager and start it again",
        description="SIGKILL the daemon (as a crash would), start it again and "
        "wait until it is back: a NameNode serving (active, or standby beside an "
        "active one), the ResourceManager answering with its NodeManagers "
        "RUNNING again, or the NodeManager RUNNING in the ResourceManager. Each "
        "recovers its state: running jobs keep their containers. On an --ha "
        "cluster, no NAME means the active member.",
    )
    common(restart)
    restart.add_argument(
        "--timeout",
        type=float,
        default=RESTART_WAIT_S,
        help=f"seconds to wait for the daemon to be back ({RESTART_WAIT_S:.0f})",
    )
    restart.set_defaults(func=_restart)

    failover = commands.add_parser(
        "failover",
        help="hand the active role of an --ha cluster's pair to the other member",
        description="namenode: a graceful failover through the failover "
        "controllers (`hdfs haadmin -failover`). resourcemanager: the active "
        "ResourceManager is stopped (SIGTERM), the other takes over, and the "
        "stopped one starts again as the standby. Returns once the other member "
        "is active and both run.",
    )
    common(failover)
    failover.add_argument(
        "daemon", metavar="{namenode,resourcemanager}", help="the pair"
    )
    failover.add_argument(
        "--timeout",
        type=float,
        default=RESTART_WAIT_S,
        help=f"seconds to wait for the failover to complete ({RESTART_WAIT_S:.0f})",
    )
    failover.set_defaults(func=_failover)

    env = commands.add_parser(
        "env",
        help='shell exports for the cluster: eval "$(tfyarn cluster env)"',
        description=(
            "Print exports that put yarn, hdfs and hadoop on PATH and set "
            "HADOOP_CONF_DIR, JAVA_HOME and SKEIN_DRIVER_JAVA_OPTIONS."
        ),
    )
    common(env)
    env.set_defaults(func=_env)


def _daemon_command(
    commands: Any, action: str, *, help: str, description: str
) -> argparse.ArgumentParser:
    """``cluster kill|restart DAEMON [NAME]``."""
    sub: argparse.ArgumentParser = commands.add_parser(
        action, help=help, description=description
    )
    # Not argparse choices: a wrong name is an error naming both (exit 1).
    sub.add_argument(
        "daemon", metavar="{namenode,resourcemanager,nodemanager}", help="the daemon"
    )
    sub.add_argument(
        "name",
        nargs="?",
        help="the NodeManager's host on a --nodes cluster (node1, ...), none on "
        "the one-node cluster; nn1|nn2 or rm1|rm2 on an --ha cluster (default: "
        "the active one)",
    )
    return sub


def _requested_settings(
    args: argparse.Namespace, cluster: LocalCluster
) -> ClusterSettings:
    base = load_settings(cluster.base_dir) or ClusterSettings()
    ports = dict(base.ports)
    ports.update(dict(args.port or []))
    labels = dict(base.labels)
    for node, label in args.label or []:
        labels.pop(node, None)
        if label:
            labels[node] = label
    return base.replace(
        queues=dict(args.queue) if args.queue else None,
        labels=labels,
        nodes=args.nodes,
        memory_mb=args.memory,
        vcores=args.vcores,
        gpus=args.gpus,
        port_offset=args.port_offset,
        secure=args.secure,
        # --no_secure drops a lifetime kept from a secure start (no tokens then).
        token_lifetime_s=0 if args.secure is False else args.token_lifetime,
        ports=ports,
        container_executor=args.container_executor,
        ha=args.ha,
        hadoop_version=args.hadoop_version,
    )


def _log(message: str) -> None:
    # Progress only: a closed pipe (`... | head`) must not abort a start half-way.
    try:
        print(message, file=sys.stderr, flush=True)
    except OSError:
        pass


def _start(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.base_dir)
    settings = _requested_settings(args, cluster)
    began = time.monotonic()
    status = cluster.start(settings, timeout=args.timeout, log=_log)
    if status.already_running:
        print(f"The local cluster in {cluster.base_dir} is already running.")
    else:
        print(f"Started the local cluster in {time.monotonic() - began:.0f} s.")
    print(status.format())
    print('\nNext: eval "$(tfyarn cluster env)"   # yarn, hdfs, skein use this cluster')
    return 0


def _stop(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.base_dir)
    stopped = cluster.stop(wipe=args.wipe, log=_log)
    if stopped:
        print(f"Stopped {', '.join(stopped)}.")
    else:
        print(f"No local cluster was running in {cluster.base_dir}.")
    return 0


def _status(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.base_dir)
    status = cluster.status()
    if args.json:
        print(json.dumps(_status_dict(status), indent=2, default=str))
    else:
        print(status.format())
    return 0 if status.running else 1


def _status_dict(status: ClusterStatus) -> dict[str, Any]:
    return {
        "base_dir": str(status.base_dir),
        "state": status.state,
        "hadoop_version": status.settings.hadoop_version,
        "jdk": status.jdk,
        "daemons": [
            {"name": d.name, "pid": d.pid, "ports": d.ports, "log": str(d.log)}
            for d in status.daemons
        ],
        "nodes": [{**vars(h), "labels": list(h.labels)} for h in status.hosts],
        "yarn_nodes": [
            {**vars(n), "labels": list(n.labels)} for n in status.nodes or []
        ],
        "hdfs": vars(status.hdfs) if status.hdfs else None,
        "web_uis": status.web_uis,
        "settings": status.settings.to_dict(),
        "kerberos": status.kerberos.to_dict() if status.kerberos else None,
        "ha": status.ha,
    }


def _node(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.base_dir)
    if args.action == "stop":
        killed = cluster.node_stop(args.name, log=_log)
        print(f"Crashed {args.name}: killed {len(killed)} process(es).")
    elif args.action == "start":
        cluster.node_start(args.name, log=_log)
        print(f"Started {args.name}; its NodeManager is RUNNING.")
    else:
        host = cluster.node_partition(args.name, heal=args.action == "heal")
        what = "reconnected" if args.action == "heal" else "cut off the network"
        print(f"{host.name} ({host.host}, {host.address}) is {what}.")
    return 0


def _kill(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.base_dir)
    outcome = cluster.kill_daemon(args.daemon, args.name, log=_log)
    print(outcome.summary("kill"))
    return 0


def _restart(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.base_dir)
    outcome = cluster.restart_daemon(
        args.daemon, args.name, timeout=args.timeout, log=_log
    )
    print(outcome.summary("restart"))
    return 0


def _failover(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.base_dir)
    outcome = cluster.failover(args.daemon, timeout=args.timeout, log=_log)
    print(outcome.summary())
    return 0


def _env(args: argparse.Namespace) -> int:
    cluster = LocalCluster(args.base_dir)
    exports = cluster.shell_exports()
    pids = cluster.pids()
    down = [key for key, pid in pids.items() if pid is None]
    if down and len(down) == len(pids):
        _log(
            f"Warning: the local cluster in {cluster.base_dir} is not running; "
            "start it with `tfyarn cluster start`."
        )
    elif down:
        _log(
            f"Warning: the local cluster in {cluster.base_dir} runs without its "
            f"{', '.join(down)}; `tfyarn cluster start` starts what is down."
        )
    sys.stdout.write(exports)
    return 0
