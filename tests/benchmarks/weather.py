"""Production weather: what a running job loses to each event a production
cluster puts it through.

Starts its own HA local cluster (two NameNodes behind ``hdfs://tfyarn``, two
ResourceManagers; queues ``default`` and ``prod`` at 50% each with the
capacity scheduler's preemption monitor on; 4 GiB on one node), submits one
ParameterServerStrategy job in ``default`` (1 chief, 1 ps, 2 workers:
``tests/integration/jobs/weather_ps.py``, which reads its data through the
``hdfs://`` plugin all the time and checkpoints to HDFS every round of 10
steps), and puts it through, one after the other with steady training
between them:

- ``namenode_failover``: SIGKILL of the active NameNode (the standby takes
  over), then the killed one restarted;
- ``resourcemanager_failover``: SIGKILL of the active ResourceManager (the
  standby takes over when its ZooKeeper session expires), then restarted;
  ``tfyarn status`` of the job, asked right after the kill, answers once the
  standby took over (``status_s``, the command's whole run);
- ``resourcemanager_restart``: the active ResourceManager SIGKILLed and
  started again (``tfyarn cluster restart``);
- ``nodemanager_restart``: the NodeManager SIGKILLed and started again;
- ``preemption``: an application in queue ``prod`` claims prod's share; the
  scheduler takes a container of the job back (-102); the claim is killed
  after ``--hold`` seconds, and the job gets its room back.

For each event, from the chief's log (``round step=N t=T`` per round):
``stall_s``, the longest time between two rounds around the event less the
job's usual time between rounds; ``steps_lost``, steps trained again after
a restart of the chief; and for preemption ``back_s``, seconds from the
claim's end until the job trains at full size again (every task RUNNING).
The master's ``restarts`` and ``disruptions`` are printed too.
Goals: NameNode failover stall ≤ 15 s and 0 steps lost; ResourceManager and
NodeManager restarts 0 s of stall beyond a round (training never stops);
preemption back ≤ 10 s after the room returns.

Prints one JSON line per event and a summary line last. Usage::

    python tests/benchmarks/weather.py [--hold 20] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _follow
import skein

from tfyarn import client
from tfyarn.cluster import ClusterSettings, LocalCluster, use_local_cluster
from tfyarn.data import resolve
from tfyarn.data.example import write_digits

HERE = Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "integration"))
import _weather

JOB = HERE.parents[1] / "integration" / "jobs" / "weather_ps.py"
BASE_DIR = Path("/var/tmp/tfyarn-bench/weather")
SETTINGS = ClusterSettings(
    ha=True,
    memory_mb=4096,
    vcores=8,
    port_offset=1600,
    max_am_resource_percent=1.0,
    queues={"default": 50, "prod": 50},
    preemption=True,
)
DATA = "hdfs://tfyarn/tmp/tfyarn-weather/digits"
OPTIONS: dict[str, Any] = {
    "num_chief": 1,
    "num_ps": 1,
    "num_worker": 2,
    "chief_memory": "768 MiB",
    "ps_memory": "512 MiB",
    "worker_memory": "512 MiB",
    "am_memory": "512 MiB",
    "max_restarts": 2,
    "heartbeat_interval": 1,
    "heartbeat_timeout": 30,
    "stop_grace": 3,
    "queue": "default",
}
# Rounds of steady training before an event and after it.
STEADY_ROUNDS = 8


def cli(*argv: str) -> str:
    """``tfyarn cluster ARGV`` on the benchmark's cluster; its output."""
    where = ["--base-dir", str(BASE_DIR)]
    done = subprocess.run(
        [sys.executable, "-m", "tfyarn.cli", "cluster", *argv, *where],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"tfyarn cluster {' '.join(argv)} failed: {done.stderr[-2000:]}"
        )
    return done.stdout.strip()


snapshot = _follow.snapshot


def chief_step(yarn: Any, app_id: str) -> int:
    for task in snapshot(yarn, app_id).get("tasks", []):
        if task["task"] == "chief:0":
            return int(task.get("step") or 0)
    return 0


def wait_rounds(yarn: Any, app_id: str, rounds: int, timeout: float = 600) -> None:
    """Until the chief reported ``rounds`` more rounds of 10 steps."""
    target = chief_step(yarn, app_id) + 10 * rounds
    deadline = time.monotonic() + timeout
    while chief_step(yarn, app_id) < target:
        if time.monotonic() > deadline:
            raise SystemExit(f"no progress to step {target} in {timeout:.0f} s")
        time.sleep(0.5)


def all_running(yarn: Any, app_id: str) -> bool:
    tasks = snapshot(yarn, app_id).get("tasks", [])
    return bool(tasks) and all(t["state"] == "RUNNING" for t in tasks)


def preempt(yarn: Any, app_id: str, hold: float) -> dict[str, Any]:
    """A claim in queue prod until the job loses a container; held ``hold``
    seconds; killed. Returns when (epoch) the claim ended and how long the
    job took to have every task RUNNING again."""
    before = snapshot(yarn, app_id).get("disruptions", 0)
    spec = skein.ApplicationSpec(
        name="weather-prod-claim",
        queue="prod",
        master=skein.Master(resources=skein.Resources(memory="256 MiB", vcores=1)),
        services={
            "claim": skein.Service(
                instances=1,
                resources=skein.Resources(memory="1536 MiB", vcores=1),
                script="sleep 900",
            )
        },
    )
    claim = yarn.submit(spec)
    try:
        deadline = time.monotonic() + 180
        while snapshot(yarn, app_id).get("disruptions", 0) <= before:
            if time.monotonic() > deadline:
                raise SystemExit("the claim took nothing back in 180 s")
            time.sleep(0.5)
        time.sleep(hold)
    finally:
        with contextlib.suppress(Exception):
            yarn.kill_application(claim)
    ended = time.time()
    deadline = time.monotonic() + 300
    while not all_running(yarn, app_id):
        if time.monotonic() > deadline:
            raise SystemExit("the job was not whole again 300 s after the claim ended")
        time.sleep(0.25)
    return {"ended": ended, "back_s": round(time.time() - ended, 1)}


def events(
    yarn: Any, app_id: str, hold: float
) -> list[tuple[str, Callable[[], dict[str, Any]]]]:
    """Each event by name: a call that puts the job through it and returns
    what it measured itself (preemption's ``back_s``)."""

    def namenode() -> dict[str, Any]:
        killed = cli("kill", "namenode")
        member = killed.split()[3]  # "Killed the NameNode nn1 (pid ..."
        wait_rounds(yarn, app_id, 3)
        cli("restart", "namenode", member)
        return {}

    def rm_failover() -> dict[str, Any]:
        killed = cli("kill", "resourcemanager")
        member = killed.split()[3]
        # Asked at once, as a user would: it waits for the takeover.
        asked = time.monotonic()
        status = subprocess.run(
            [sys.executable, "-m", "tfyarn.cli", "status", app_id],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        answered = {
            "status_s": round(time.monotonic() - asked, 1),
            "status_ok": status.returncode == 0,
        }
        wait_rounds(yarn, app_id, 3)
        cli("restart", "resourcemanager", member)
        return answered

    def restart(daemon: str) -> Callable[[], dict[str, Any]]:
        return lambda: {"restart": cli("restart", daemon)}

    return [
        ("namenode_failover", namenode),
        ("resourcemanager_failover", rm_failover),
        ("resourcemanager_restart", restart("resourcemanager")),
        ("nodemanager_restart", restart("nodemanager")),
        ("preemption", lambda: preempt(yarn, app_id, hold)),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hold", type=float, default=20.0)
    parser.add_argument(
        "--keep", action="store_true", help="leave the cluster running afterwards"
    )
    args = parser.parse_args()
    cluster = LocalCluster(BASE_DIR)
    cluster.start(SETTINGS, log=lambda m: print(f"[cluster] {m}", file=sys.stderr))
    use_local_cluster(BASE_DIR, override=True)
    if not resolve(DATA).glob(DATA + "/train-*"):
        write_digits(DATA)
    checkpoints = f"hdfs://tfyarn/tmp/tfyarn-weather/ckpt-{int(time.time())}"
    job_args = ["--data", DATA, "--checkpoint_dir", checkpoints, "--steps", "1000000"]
    results: dict[str, dict[str, Any]] = {}
    with skein.Client() as yarn:
        app_id = client.submit(
            str(JOB), args=job_args, client=yarn, name="bench-weather", **OPTIONS
        )
        try:
            wait_rounds(yarn, app_id, STEADY_ROUNDS)
            for name, act in events(yarn, app_id, args.hold):
                at = time.time()
                extra = act()
                wait_rounds(yarn, app_id, STEADY_ROUNDS)
                results[name] = {"at": at, **extra}
                print(f"[weather] {name} done", file=sys.stderr, flush=True)
            final = snapshot(yarn, app_id)
        finally:
            with contextlib.suppress(Exception):
                client.kill(app_id, client=yarn)
        log = chief_log(yarn, app_id)
    if not args.keep:
        cluster.stop(log=lambda m: print(f"[cluster] {m}", file=sys.stderr))
    names = list(results)
    for i, name in enumerate(names):
        at = results[name]["at"]
        until = results[names[i + 1]]["at"] if i + 1 < len(names) else float("inf")
        line = {
            "event": name,
            "stall_s": round(_weather.stall(log, at), 1),
            "steps_lost": _weather.steps_lost(log, at, until),
            **{
                k: v
                for k, v in results[name].items()
                if k not in ("at", "ended", "restart")
            },
        }
        results[name] = line
        print(json.dumps(line))
    summary = {
        "benchmark": "weather",
        **{f"{n}_stall_s": r["stall_s"] for n, r in results.items()},
        **{f"{n}_steps_lost": r["steps_lost"] for n, r in results.items()},
        "preemption_back_s": results["preemption"].get("back_s"),
        "resourcemanager_failover_status_s": results["resourcemanager_failover"].get(
            "status_s"
        ),
        "restarts": final.get("restarts"),
        "disruptions": final.get("disruptions"),
        "usual_round_s": round(_weather.usual_gap(log), 2),
    }
    print(json.dumps(summary))


def chief_log(yarn: Any, app_id: str, timeout: float = 120) -> str:
    """The chief's log, once aggregation has it (the job was just killed)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(Exception):
            entries = client.logs(app_id, task="chief:0", client=yarn)
            text = "\n".join(e.text for e in entries)
            if _weather.rounds(text):
                return text
        if time.monotonic() > deadline:
            raise SystemExit(f"no chief log of {app_id} within {timeout:.0f} s")
        time.sleep(3)


if __name__ == "__main__":
    main()
