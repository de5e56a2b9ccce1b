"""Training overhead: steps/s under tfyarn against the same training by hand.

The same script (``_overhead_task.py``, no tfyarn import) trains a small
network for a fixed number of timed steps after a warm-up, two ways in the
same run, alternating so drift on the shared machine hits both alike:

- by hand: one local process per task with a hand-written ``TF_CONFIG``
  (ports picked here), the way users start TensorFlow without a scheduler;
- tfyarn: ``tfyarn.submit`` on the running local cluster (runtime tee,
  heartbeats, progress and the master all in place).

Layouts: MultiWorkerMirroredStrategy with 2 workers, and
ParameterServerStrategy with a chief, 1 ps and 2 workers. The ratio is
tfyarn's steps/s over the hand launch's (goal: at least 0.97). Prints one
JSON line last. Usage::

    eval "$(tfyarn cluster env)"
    python tests/benchmarks/overhead.py [--repeat N] [--steps N]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import tfyarn

TASK = Path(__file__).with_name("_overhead_task.py")
MARK = "OVERHEAD_RESULT "
# mode -> {role: count}
LAYOUTS: dict[str, dict[str, int]] = {
    "mwms": {"worker": 2},
    "ps": {"chief": 1, "ps": 1, "worker": 2},
}
LEAD = {"mwms": "worker:0", "ps": "chief:0"}
TIMEOUT_S = 600.0


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


def _result(text: str) -> float:
    """Steps per second from the lead's ``OVERHEAD_RESULT`` line."""
    for line in text.splitlines():
        if line.startswith(MARK):
            found = json.loads(line[len(MARK) :])
            return float(found["steps"]) / float(found["seconds"])
    raise RuntimeError(f"no {MARK.strip()} line in the lead's output:\n{text[-2000:]}")


def by_hand(mode: str, steps: int, warmup: int) -> float:
    layout = LAYOUTS[mode]
    ports = iter(_free_ports(sum(layout.values())))
    cluster = {
        role: [f"127.0.0.1:{next(ports)}" for _ in range(n)]
        for role, n in layout.items()
    }
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        for role, addresses in cluster.items():
            for index in range(len(addresses)):
                tf_config = {"cluster": cluster, "task": {"type": role, "index": index}}
                procs[f"{role}:{index}"] = subprocess.Popen(
                    [sys.executable, "-u", str(TASK), "--mode", mode,
                     "--steps", str(steps), "--warmup", str(warmup)],
                    env={**os.environ, "TF_CONFIG": json.dumps(tf_config)},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.DEVNULL,
                    text=True,
                )  # fmt: skip
        out, _ = procs[LEAD[mode]].communicate(timeout=TIMEOUT_S)
        if procs[LEAD[mode]].returncode != 0:
            raise RuntimeError(f"hand-launched {LEAD[mode]} failed:\n{out[-2000:]}")
        return _result(out)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()


def under_tfyarn(yarn: Any, mode: str, steps: int, warmup: int) -> float:
    layout = LAYOUTS[mode]
    app_id = tfyarn.submit(
        str(TASK),
        args=["--mode", mode, "--steps", str(steps), "--warmup", str(warmup)],
        name=f"bench-overhead-{mode}",
        **{f"num_{role}": n for role, n in layout.items()},
        **{f"{role}_memory": 2048 for role in layout},
        worker_grace=60,
        client=yarn,
    )
    tfyarn.wait(app_id, client=yarn)  # JobFailedError unless SUCCEEDED
    logs = tfyarn.logs(app_id, task=LEAD[mode], client=yarn)
    return _result("\n".join(log.text for log in logs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per layout and way")
    parser.add_argument("--steps", type=int, default=2000, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=100)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    with tfyarn.connect() as yarn:
        for mode in LAYOUTS:
            hand, managed = [], []
            for _ in range(args.repeat):
                hand.append(by_hand(mode, args.steps, args.warmup))
                managed.append(under_tfyarn(yarn, mode, args.steps, args.warmup))
                print(f"# {mode}: hand {hand[-1]:.1f}/s, tfyarn {managed[-1]:.1f}/s",
                      file=sys.stderr)  # fmt: skip
            hand_rate = statistics.median(hand)
            tfyarn_rate = statistics.median(managed)
            results[mode] = {
                "hand_steps_per_s": round(hand_rate, 2),
                "tfyarn_steps_per_s": round(tfyarn_rate, 2),
                "ratio": round(tfyarn_rate / hand_rate, 3),
                "hand_runs": [round(r, 2) for r in hand],
                "tfyarn_runs": [round(r, 2) for r in managed],
            }
    print(
        json.dumps(
            {
                "benchmark": "overhead",
                "steps": args.steps,
                "warmup": args.warmup,
                "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
