"""The gateway side of ``servers.py``: servers on YARN, this process coordinates.

Runs ``_overhead_task.coordinate`` (the same code a chief inside YARN runs)
against ``tfyarn.servers(...)``. Prints ``CALLED_AT`` (wall clock, just before
the servers are asked for), ``SERVERS_UP_AT``, then the coordinator's
``FIRST_STEP_AT`` and ``OVERHEAD_RESULT`` lines. One process per run:
TensorFlow connects a process to one cluster.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _overhead_task

import tfyarn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--memory", type=int, default=2048, help="MiB per server")
    args = parser.parse_args()
    print(f"CALLED_AT {time.time()}", flush=True)
    with tfyarn.servers(
        num_ps=1,
        num_worker=2,
        name="bench-servers-gateway",
        ps_memory=args.memory,
        worker_memory=args.memory,
    ) as cluster:
        print(f"SERVERS_UP_AT {time.time()} {cluster.app_id}", flush=True)
        _overhead_task.coordinate(cluster.cluster_resolver(), args.steps, args.warmup)


if __name__ == "__main__":
    main()
