"""A resize against a plain cluster restart: time to train again, steps trained twice.

On the running local cluster, submits ``examples/mwms_graceful.py`` (2 workers,
a backup checkpoint every ``--checkpoint_every`` steps, a short pause per
step), waits until it trains, then in the same job:

1. ``tfyarn.scale`` to 3 workers: the new worker's container starts and
   stands by while the job trains on, then a stop notice (every worker saves
   at one step) and the next generation;
2. SIGKILLs worker 1's script (found through /proc/<pid>/environ): the master
   restarts the cluster, which resumes from the last backup checkpoint.

For each it measures, from the master's published status (about 1 s
resolution), ``to_training_s``: seconds from the scale call (the kill) until
the lead reports a step in the new generation; ``paused_s``: how long
training stood still (from the lead's last new step in the old generation to
its first in the new one); and, from the lead's log,
``steps_redone``: steps the new generation trains again (the step the old one
reached, minus the step the new one started at; for the scale the step it
saved at, exactly; for the restart the lead's last reported step, at most a
second's worth of steps short).

Each round is a job of its own; ``--rounds`` of them (3 by default) give the
median of each figure, since one round on a shared machine can be off by a
factor of two either way. Prints one JSON line last. Usage::

    eval "$(tfyarn cluster env)"; python tests/benchmarks/elastic.py
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import _follow

from tfyarn import client
from tfyarn.data import fs
from tfyarn.data.example import write_digits

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "integration"))
from _faults import kill_task

SCRIPT = HERE.parents[2] / "examples" / "mwms_graceful.py"
DATA = "hdfs:///tmp/tfyarn/digits"
OPTIONS = {
    "num_worker": 2,
    "worker_memory": "1 GiB",
    "am_memory": "512 MiB",
    "max_restarts": 2,
    "heartbeat_interval": 1,
    "stop_grace": 60,
}


def lead(yarn: Any, app_id: str) -> dict[str, Any]:
    return _follow.task(yarn, app_id, "worker:0")


def until(what: str, check: Any, timeout: float = _follow.TIMEOUT_S) -> Any:
    return _follow.until("elastic", what, check, timeout)


def training_again(yarn: Any, app_id: str, attempt: int) -> float:
    """Wait until the lead's attempt after ``attempt`` reports a step; return
    how long training stood still (since the old attempt's last new step)."""
    last_step: Any = None
    last_at = time.monotonic()

    def reported() -> bool:
        nonlocal last_step, last_at
        task = lead(yarn, app_id)
        if task.get("attempt", 0) > attempt:
            return task.get("step") is not None
        if task.get("step") != last_step:
            last_step, last_at = task.get("step"), time.monotonic()
        return False

    until("training again", reported)
    return round(time.monotonic() - last_at, 1)


def numbers(text: str, key: str) -> list[int]:
    return [int(n) for n in re.findall(rf"^{key}=(\d+)\b", text, re.MULTILINE)]


def run(yarn: Any, checkpoints: str, warmup: int, every: int) -> dict[str, Any]:
    args = ["--data", DATA, "--checkpoint_dir", checkpoints, "--steps", "1000000",
            "--checkpoint_every", str(every), "--pause", "0.02"]  # fmt: skip
    app_id = client.submit(str(SCRIPT), args=args, client=yarn, name="bench-elastic",
                           **OPTIONS)  # fmt: skip
    try:
        until("training", lambda: (lead(yarn, app_id).get("step") or 0) >= warmup)
        attempt = lead(yarn, app_id)["attempt"]
        asked = time.monotonic()
        client.scale(app_id, num_worker=3, client=yarn)
        scale_paused_s = training_again(yarn, app_id, attempt)
        scale_s = round(time.monotonic() - asked, 1)
        base = lead(yarn, app_id)["step"]
        until(
            "training on", lambda: (lead(yarn, app_id).get("step") or 0) >= base + 100
        )
        task = lead(yarn, app_id)
        at_kill, attempt = int(task["step"]), task["attempt"]
        killed = time.monotonic()
        kill_task(app_id, "worker:1", signal.SIGKILL)
        restart_paused_s = training_again(yarn, app_id, attempt)
        restart_s = round(time.monotonic() - killed, 1)
    finally:
        client.kill(app_id, client=yarn)
    text = "\n".join(e.text for e in client.logs(app_id, task="worker:0", client=yarn))
    starts, saved = numbers(text, "start_step"), numbers(text, "saved_at")
    if len(starts) < 3 or not saved:
        raise SystemExit(f"elastic benchmark: unexpected log {starts} {saved}")
    return {
        "scale": {
            "to_training_s": scale_s,
            "paused_s": scale_paused_s,
            "steps_redone": saved[0] - starts[1],
        },
        "restart": {
            "to_training_s": restart_s,
            "paused_s": restart_paused_s,
            "steps_redone": at_kill - starts[2],
            "checkpoint_every": every,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup_steps", type=int, default=300)
    parser.add_argument("--checkpoint_every", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    data = fs.resolve(DATA)
    if not (data.glob(DATA + "/train-*") and data.glob(DATA + "/test-*")):
        write_digits(DATA)
    base = f"hdfs:///tmp/tfyarn-bench/{uuid.uuid4().hex[:10]}"
    filesystem = fs.resolve(base)
    filesystem.mkdirs(base)
    rounds = []
    try:
        with client.connect() as yarn:
            for n in range(options.rounds):
                one = run(
                    yarn,
                    f"{base}/ckpt{n}",
                    options.warmup_steps,
                    options.checkpoint_every,
                )
                ratio = one["scale"]["to_training_s"] / one["restart"]["to_training_s"]
                one["scale_vs_restart"] = round(ratio, 2)
                print(json.dumps(one), flush=True)
                rounds.append(one)
    finally:
        filesystem.delete(base, recursive=True)
    median = {
        kind: {
            key: statistics.median(r[kind][key] for r in rounds)
            for key in ("to_training_s", "paused_s", "steps_redone")
        }
        for kind in ("scale", "restart")
    }
    result = {
        "benchmark": "elastic",
        "load": os.getloadavg()[0],
        "rounds": len(rounds),
        "median": median,
        "scale_vs_restart": statistics.median(r["scale_vs_restart"] for r in rounds),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
