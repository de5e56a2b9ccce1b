"""Cluster formation time: tfyarn against plain skein containers.

Measures, on the running local cluster, the seconds from submitting an
application to "every TensorFlow server is up", for 1 ps + 2 workers and
2 ps + 4 workers, in two ways in the same run:

- tfyarn: ``tfyarn.submit``-style job; the master requests each container,
  the runtime registers, the master broadcasts the ClusterSpec, and the task
  script starts ``tf.distribute.Server`` from ``TF_CONFIG``. With the shipped
  default ``preimport: [tensorflow]`` the script's interpreter imported
  TensorFlow while the cluster formed; ``--no_preimport`` measures without;
- baseline: a plain skein application whose containers each pick a free port,
  put ``host:port`` in skein's key-value store, wait for all the others, then
  start ``tf.distribute.Server``.

In both, every task puts ``up/<task>`` = the time its server started into the
application's key-value store; the benchmark polls it and takes the latest.
Prints one JSON line. Usage::

    eval "$(tfyarn cluster env)"
    python tests/benchmarks/formation.py [--repeat N] [--no_preimport | --compare_preimport]

``--compare_preimport`` adds a third way to every round: tfyarn without
preimport, so the early interpreter's own effect is measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import skein

import tfyarn
from tfyarn import client
from tfyarn.client import config, submission
from tfyarn.contract.status import STATUS_KEY

REPO = Path(__file__).resolve().parents[2]
LAYOUTS = ((1, 2), (2, 4))
MEMORY_MIB = 768
TIMEOUT_S = 300.0

# Runs as the tfyarn job's script: TF_CONFIG is already set by the runtime; with
# preimport, tensorflow is already loaded. skein is only this benchmark's way
# to report the time (a tfyarn script has no use for it), so it is imported
# after the server is up; in the baseline it is how addresses are exchanged.
TFYARN_TASK = """\
import json, os, sys, time
import tensorflow as tf

cfg = json.loads(os.environ["TF_CONFIG"])
task = cfg["task"]
server = tf.distribute.Server(
    tf.train.ClusterSpec(cfg["cluster"]), job_name=task["type"],
    task_index=task["index"], start=True)
up = time.time()
import skein
app = skein.ApplicationClient.from_current()
app.kv.put(f"up/{task['type']}:{task['index']}", repr(up).encode())
deadline = time.time() + 300
while app.kv.get("done") is None and time.time() < deadline:
    time.sleep(0.2)
"""

# Runs in a plain skein container: exchange addresses through the kv store.
BASELINE_TASK = """\
import json, os, socket, sys, time
import skein
import tensorflow as tf

role, index = os.environ["SKEIN_CONTAINER_ID"].rsplit("_", 1)
n = {"ps": int(os.environ["N_PS"]), "worker": int(os.environ["N_WORKER"])}
app = skein.ApplicationClient.from_current()
with socket.socket() as s:  # the classic way: bind port 0, close, hope
    s.bind(("", 0))
    port = s.getsockname()[1]
host = socket.gethostname()
app.kv.put(f"addr/{role}/{index}", f"{host}:{port}".encode())
deadline = time.time() + 300
while True:
    found = app.kv.get_prefix("addr/")
    if len(found) == sum(n.values()):
        break
    if time.time() > deadline:
        sys.exit("timed out waiting for the other addresses")
    time.sleep(0.1)
app.kv.put(f"formed/{role}:{index}", repr(time.time()).encode())
cluster = {r: [found[f"addr/{r}/{i}"].decode() for i in range(n[r])] for r in n}
server = tf.distribute.Server(
    tf.train.ClusterSpec(cluster), job_name=role, task_index=int(index), start=True)
up = time.time()
app.kv.put(f"up/{role}:{index}", repr(up).encode())
while app.kv.get("done") is None and time.time() < deadline:
    time.sleep(0.2)
"""


def _wait_all_up(yarn: Any, app_id: str, n_tasks: int) -> dict[str, float]:
    """Epoch times once all ``n_tasks`` reported: ``up`` (the last server up),
    ``formed`` (every address known), ``am`` (master running); mark the app done.
    """
    deadline = time.time() + TIMEOUT_S
    app = None
    times: dict[str, float] = {}
    while time.time() < deadline:
        report = yarn.application_report(app_id)
        if str(report.state) in ("FINISHED", "FAILED", "KILLED"):
            raise RuntimeError(f"{app_id} ended early: {report.diagnostics}")
        if str(report.state) == "RUNNING":
            times.setdefault("am", time.time())
            if app is None:
                try:
                    app = yarn.connect(app_id, wait=False)
                except skein.exceptions.SkeinError:
                    app = None
            if app is not None:
                up = app.kv.get_prefix("up/")
                status = app.kv.get(STATUS_KEY)
                if status and json.loads(status).get("cluster_formed_at"):
                    times["formed"] = float(json.loads(status)["cluster_formed_at"])
                formed = app.kv.get_prefix("formed/")
                if formed and len(formed) == n_tasks:
                    times["formed"] = max(float(v) for v in formed.values())
                if len(up) == n_tasks:
                    app.kv.put("done", b"1")
                    app.close()
                    times["up"] = max(float(v) for v in up.values())
                    return times
        time.sleep(0.2)
    yarn.kill_application(app_id)
    raise RuntimeError(f"{app_id}: not every server came up in {TIMEOUT_S:.0f} s")


def _wait_end(yarn: Any, app_id: str) -> None:
    deadline = time.time() + 120
    while time.time() < deadline:
        if str(yarn.application_report(app_id).state) in (
            "FINISHED",
            "FAILED",
            "KILLED",
        ):
            return
        time.sleep(0.5)
    yarn.kill_application(app_id)


def run_tfyarn(
    yarn: Any, work: Path, n_ps: int, n_worker: int, preimport: bool
) -> dict[str, float]:
    script = work / "tfyarn_task.py"
    script.write_text(TFYARN_TASK)
    cfg = config.load(
        overrides={
            "name": f"bench-tfyarn-{n_ps}ps{n_worker}w",
            "num_ps": n_ps,
            "num_worker": n_worker,
            "ps_memory": MEMORY_MIB,
            "worker_memory": MEMORY_MIB,
            "am_memory": 512,
            "worker_grace": 5,
            **({} if preimport else {"preimport": []}),
        }
    )
    spec = config.to_spec(str(script), (), cfg).validate()
    t0 = time.time()
    app_id = submission.submit_spec(yarn, spec)  # as `tfyarn submit` does
    try:
        times = _wait_all_up(yarn, app_id, n_ps + n_worker)
    finally:
        _wait_end(yarn, app_id)
    return {"app": app_id, **{k: round(v - t0, 2) for k, v in times.items()}}


def run_baseline(yarn: Any, work: Path, n_ps: int, n_worker: int) -> dict[str, float]:
    script = work / "baseline_task.py"
    script.write_text(BASELINE_TASK)
    env = {"N_PS": str(n_ps), "N_WORKER": str(n_worker)}
    services = {
        role: skein.Service(
            instances=n,
            resources=skein.Resources(memory=MEMORY_MIB, vcores=1),
            files={"task.py": str(script)},
            env=env,
            script=f"exec {sys.executable} -u task.py",
        )
        for role, n in (("ps", n_ps), ("worker", n_worker))
    }
    spec = skein.ApplicationSpec(
        name=f"bench-baseline-{n_ps}ps{n_worker}w",
        services=services,
        master=skein.Master(resources=skein.Resources(memory=512, vcores=1)),
        tags={"tfyarn-benchmark"},
    )
    t0 = time.time()
    app_id = yarn.submit(spec)
    try:
        times = _wait_all_up(yarn, app_id, n_ps + n_worker)
    finally:
        _wait_end(yarn, app_id)
    return {"app": app_id, **{k: round(v - t0, 2) for k, v in times.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="runs per layout and way")
    parser.add_argument(
        "--no_preimport",
        action="store_true",
        help="tfyarn tasks start their script's interpreter after formation",
    )
    parser.add_argument(
        "--compare_preimport",
        action="store_true",
        help="also run tfyarn without preimport in every round",
    )
    args = parser.parse_args()
    if Path(tfyarn.__file__).resolve().parent != REPO / "tfyarn":
        sys.exit(
            f"tfyarn is imported from {tfyarn.__file__}, not from this checkout: "
            f"install it with `pip install -e {REPO}`"
        )
    results: dict[str, Any] = {}
    with client.connect() as yarn, tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for n_ps, n_worker in LAYOUTS:
            tf_runs, base_runs, plain_runs = [], [], []
            for _ in range(args.repeat):
                # Alternate so slow drift on the shared machine hits both alike.
                tf_runs.append(
                    run_tfyarn(yarn, work, n_ps, n_worker, not args.no_preimport)
                )
                if args.compare_preimport:
                    plain_runs.append(run_tfyarn(yarn, work, n_ps, n_worker, False))
                base_runs.append(run_baseline(yarn, work, n_ps, n_worker))
            tf_s = statistics.median(r["up"] for r in tf_runs)
            base_s = statistics.median(r["up"] for r in base_runs)
            results[f"{n_ps}ps+{n_worker}worker"] = {
                "tfyarn_s": round(tf_s, 2),
                "baseline_s": round(base_s, 2),
                "ratio": round(tf_s / base_s, 3),
                "runs": args.repeat,
                # seconds after submit: master RUNNING in YARN (as polled),
                # every address known, every server up
                "tfyarn_runs": tf_runs,
                "baseline_runs": base_runs,
            }
            if plain_runs:
                plain_s = statistics.median(r["up"] for r in plain_runs)
                results[f"{n_ps}ps+{n_worker}worker"].update(
                    {
                        "tfyarn_no_preimport_s": round(plain_s, 2),
                        "tfyarn_no_preimport_runs": plain_runs,
                    }
                )
            print(f"# {n_ps} ps + {n_worker} workers: {results}", file=sys.stderr)
    print(
        json.dumps(
            {
                "benchmark": "formation",
                "preimport": [] if args.no_preimport else spec_preimport(),
                "results": results,
            }
        )
    )


def spec_preimport() -> list[str]:
    """The modules tfyarn tasks pre-imported (the loaded config's)."""
    return list(config.to_spec("x.py", (), config.load()).preimport)


if __name__ == "__main__":
    main()
