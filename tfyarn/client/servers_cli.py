"""``tfyarn servers``: TensorFlow servers on YARN for a program on the gateway.

argv to :func:`tfyarn.client.servers.servers`, the facts printed one a line
(application id, legacy flags, ``TF_CONFIG=...``, tracking page) so a shell
can take each; then, unless ``--detach``, the command holds the servers (it
renews their lease) until Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from tfyarn.client import cli, servers
from tfyarn.errors import SpecError

_EPILOG = """\
prints, one per line: the application id; --ps_hosts=... --worker_hosts=...;
TF_CONFIG=<json> for a coordinator (task chief 0, this machine); the tracking page.

examples:
  tfyarn servers --num_ps 1 --num_worker 2 --detach > servers.txt
  python in_graph_client.py $(sed -n 2p servers.txt)
  tfyarn kill $(head -1 servers.txt)
"""
# What a set cannot have: its coordinator (and any evaluator) is the program
# on the gateway, and its script is tfyarn's server.
_NOT_FOR_SERVERS = frozenset(
    {
        "num_chief",
        "num_evaluator",
        "legacy_flags",
        *(
            f"{role}_{what}"
            for role in ("chief", "evaluator")
            for what in ("memory", "vcores", "gpus", "docker_image", "node_label")
        ),
    }
)


def add_commands(subparsers: Any) -> None:
    """Add ``tfyarn servers`` to the ``tfyarn`` parser."""
    p = subparsers.add_parser(
        "servers",
        help="start TensorFlow servers on YARN for a program on this machine",
        description="Start TensorFlow servers (ps and workers running only "
        "tf.distribute.Server) in YARN containers, check this machine reaches "
        "each, and print what a client program needs. Unless --detach, the "
        "servers live while this command runs: Ctrl-C (or losing this "
        "process) ends them within --lease seconds.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", metavar="FILE", help="a YAML file of options")
    p.add_argument(
        "--lease",
        type=float,
        default=servers.DEFAULT_LEASE,
        metavar="SECONDS",
        help="how long the servers outlive this command (default %(default).0f)",
    )
    cli.add_job_options(p, skip=_NOT_FOR_SERVERS)
    p.set_defaults(func=cli._on_command_line(_servers, asks_yarn=True))


def _servers(ns: argparse.Namespace) -> int:
    options = cli._options(ns)
    detach = bool(options.pop("detach", False))
    if ns.lease <= 0:
        raise SpecError(
            f"--lease must be more than 0 seconds, got {ns.lease:g} "
            "(--detach keeps the servers until `tfyarn kill`)"
        )
    cluster = servers.servers(
        detach=detach, lease=ns.lease, config_file=ns.config, **options
    )
    print("\n".join(cluster.lines()), flush=True)
    if detach:
        print(f"tfyarn: {servers.describe_detached(cluster)}", file=sys.stderr)
        return 0
    print(f"tfyarn: {servers.describe_lease(cluster)}", file=sys.stderr, flush=True)
    try:
        while True:
            time.sleep(max(1.0, cluster.lease / 3))
            try:
                cluster.check()
            except servers.ServersRestartedError as exc:
                print(f"tfyarn: {exc}", file=sys.stderr, flush=True)
    except KeyboardInterrupt:
        print(f"\nReleasing {cluster.app_id}...", file=sys.stderr, flush=True)
        return 130
    finally:
        cluster.release()
