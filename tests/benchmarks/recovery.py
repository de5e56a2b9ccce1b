"""Recovery time: a parameter-server job losing a worker, then (another job) its ps.

On the running local cluster, submits the fault-injection job
(tests/integration/jobs/recovery_ps.py: 1 chief, 1 ps, 2 workers, checkpoints
to HDFS every 40 steps, reports each round's step), waits until it trains,
SIGKILLs one task's script (found through /proc/<pid>/environ), and measures
from the master's published status (``tfyarn.status``, about 1 s resolution:
scripts report at most once a second):

- ``progress_again_s``: seconds from the kill until the chief reports a step
  beyond the one it had restored (lost worker: beyond the step at the kill;
  the chief never restarts);
- ``steps_lost``: step at the kill minus the step training resumed from;
- ``rejoined_s`` (lost worker): seconds until the replacement runs again;
- ``restarted_s`` (lost ps): seconds until the new chief reported its restored step.

Prints one JSON line. Usage::

    eval "$(tfyarn cluster env)"; python tests/benchmarks/recovery.py
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import _follow

from tfyarn import client
from tfyarn.data import fs

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "integration"))
from _faults import kill_task

JOB = HERE.parents[1] / "integration" / "jobs" / "recovery_ps.py"
OPTIONS = {
    "num_chief": 1,
    "num_ps": 1,
    "num_worker": 2,
    "chief_memory": "768 MiB",
    "ps_memory": "512 MiB",
    "worker_memory": "512 MiB",
    "am_memory": "512 MiB",
    "max_restarts": 2,
    "heartbeat_interval": 1,
    "heartbeat_timeout": 8,
    "stop_grace": 3,
    "worker_grace": 3,
}


def chief(yarn: Any, app_id: str) -> dict[str, Any]:
    return _follow.task(yarn, app_id, "chief:0")


def until(what: str, check: Any, timeout: float = _follow.TIMEOUT_S) -> Any:
    return _follow.until("recovery", what, check, timeout)


def run(yarn: Any, victim: str, base: str, warmup_steps: int) -> dict[str, Any]:
    args = ["--checkpoint_dir", f"{base}/{victim.replace(':', '')}",
            "--steps", "1000000", "--round_sleep", "0.2"]  # fmt: skip
    app_id = client.submit(str(JOB), args=args, client=yarn, name="bench-recovery",
                           **OPTIONS)  # fmt: skip
    try:
        until(
            "training", lambda: (chief(yarn, app_id).get("step") or 0) >= warmup_steps
        )
        at_kill = int(chief(yarn, app_id)["step"])
        killed = time.monotonic()
        kill_task(app_id, victim, signal.SIGKILL)
        result: dict[str, Any] = {"victim": victim, "step_at_kill": at_kill}
        if victim.startswith("worker"):
            resumed = at_kill  # the chief goes on; nothing is rolled back

            def rejoined() -> bool:
                master = client.status(app_id, client=yarn).master
                snap = master.to_dict() if master else {}
                task = next(t for t in snap["tasks"] if t["task"] == victim)
                return task["attempt"] == 1 and task["state"] == "RUNNING"

            until("progress", lambda: (chief(yarn, app_id).get("step") or 0) > at_kill)
            result["progress_again_s"] = round(time.monotonic() - killed, 1)
            until("rejoin", rejoined)
            result["rejoined_s"] = round(time.monotonic() - killed, 1)
        else:

            def restored() -> int | None:
                c = chief(yarn, app_id)
                return (
                    c["step"]
                    if c.get("attempt") == 1 and c.get("step") is not None
                    else None
                )

            resumed = int(until("restart", restored))
            result["restarted_s"] = round(time.monotonic() - killed, 1)
            until("progress", lambda: (chief(yarn, app_id).get("step") or 0) > resumed)
            result["progress_again_s"] = round(time.monotonic() - killed, 1)
        result["resumed_from_step"] = resumed
        result["steps_lost"] = at_kill - resumed
        return result
    finally:
        client.kill(app_id, client=yarn)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup_steps", type=int, default=100)
    options = parser.parse_args()
    base = f"hdfs:///tmp/tfyarn-bench/{uuid.uuid4().hex[:10]}"
    filesystem = fs.resolve(base)
    filesystem.mkdirs(base)
    results = []
    try:
        with client.connect() as yarn:
            for victim in ("worker:1", "ps:0"):
                results.append(run(yarn, victim, base, options.warmup_steps))
    finally:
        filesystem.delete(base, recursive=True)
    print(json.dumps({"benchmark": "recovery", "load": os.getloadavg()[0],
                      "results": results}))  # fmt: skip


if __name__ == "__main__":
    main()
