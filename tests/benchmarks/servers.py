"""Servers on YARN with the program on the gateway, against the program on YARN.

The same ParameterServerStrategy training (``_overhead_task.py``'s coordinator:
1 ps, 2 workers, a small network on synthetic data), two ways in one run,
alternating so drift on the shared machine hits both alike:

- gateway: ``tfyarn.servers(num_ps=1, num_worker=2)`` and the coordinator in
  a process on this machine (``_servers_coordinator.py``);
- submit: ``tfyarn.submit`` of the same training as a script, its chief
  coordinating inside YARN.

For each: seconds from the call (``tfyarn.servers`` / ``tfyarn.submit``, each
starting its own YARN driver as a fresh command would) to the first training
step done on a worker, and the coordinator's steps/s over
``--steps`` timed steps after a warm-up. Prints one JSON line last. Usage::

    eval "$(tfyarn cluster env)"
    python tests/benchmarks/servers.py [--repeat N] [--steps N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

import tfyarn

HERE = Path(__file__).resolve().parent
TASK = HERE / "_overhead_task.py"
GATEWAY = HERE / "_servers_coordinator.py"
TIMEOUT_S = 900.0


def _value(text: str, key: str) -> float:
    for line in text.splitlines():
        if line.startswith(key + " "):
            return float(line.split()[1])
    raise RuntimeError(f"no {key} line in:\n{text[-3000:]}")


def _rate(text: str) -> float:
    for line in text.splitlines():
        if line.startswith("OVERHEAD_RESULT "):
            found = json.loads(line.split(" ", 1)[1])
            return float(found["steps"]) / float(found["seconds"])
    raise RuntimeError(f"no OVERHEAD_RESULT line in:\n{text[-3000:]}")


def gateway(steps: int, warmup: int, memory: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-u", str(GATEWAY), "--steps", str(steps),
         "--warmup", str(warmup), "--memory", str(memory)],
        capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the gateway coordinator failed:\n{done.stderr[-3000:]}")
    out = done.stdout
    called = _value(out, "CALLED_AT")
    return {
        "to_servers_up_s": _value(out, "SERVERS_UP_AT") - called,
        "to_first_step_s": _value(out, "FIRST_STEP_AT") - called,
        "steps_per_s": _rate(out),
    }


def submitted(yarn: Any, steps: int, warmup: int, memory: int) -> dict[str, float]:
    called = time.time()
    # Its own YARN driver, as a fresh `tfyarn submit` (and the gateway) starts one.
    app_id = tfyarn.submit(
        str(TASK),
        args=["--mode", "ps", "--steps", str(steps), "--warmup", str(warmup)],
        name="bench-servers-submit",
        num_chief=1,
        num_ps=1,
        num_worker=2,
        chief_memory=memory,
        ps_memory=memory,
        worker_memory=memory,
        worker_grace=60,
    )
    tfyarn.wait(app_id, client=yarn)  # JobFailedError unless SUCCEEDED
    text = "\n".join(
        log.text for log in tfyarn.logs(app_id, task="chief:0", client=yarn)
    )
    return {
        "to_first_step_s": _value(text, "FIRST_STEP_AT") - called,
        "steps_per_s": _rate(text),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2, help="runs per way")
    parser.add_argument("--steps", type=int, default=2000, help="timed steps per run")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--memory", type=int, default=2048, help="MiB per task")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"gateway": [], "submit": []}
    with tfyarn.connect() as yarn:
        for _ in range(args.repeat):
            runs["gateway"].append(gateway(args.steps, args.warmup, args.memory))
            runs["submit"].append(submitted(yarn, args.steps, args.warmup, args.memory))
            print(f"# {runs['gateway'][-1]} / {runs['submit'][-1]}", file=sys.stderr)
    results = {
        way: {
            key: round(statistics.median(r[key] for r in found), 2) for key in found[0]
        }
        | {"runs": [{k: round(v, 2) for k, v in r.items()} for r in found]}
        for way, found in runs.items()
    }
    print(
        json.dumps(
            {
                "benchmark": "servers",
                "steps": args.steps,
                "warmup": args.warmup,
                "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "results": results,
                "steps_per_s_gateway_over_submit": round(
                    results["gateway"]["steps_per_s"]
                    / results["submit"]["steps_per_s"],
                    3,
                ),
            }
        )
    )


if __name__ == "__main__":
    main()
