"""Restart in place: a live master, real runtimes, fake YARN.

worker:1's script fails; the cluster restarts. Both runtimes stay: worker:0's
stops its script, worker:1's reported the failure and waits for the answer;
each runs the script again as the next attempt on the same port. YARN is
asked for nothing.
"""

from __future__ import annotations

import json
from pathlib import Path

from _am_support import job, run_tasks

from tfyarn.contract.status import Phase

SCRIPT = r"""
import json, os, sys, time
env = os.environ
name = f"{env['TFYARN_TASK_INDEX']}_{env['TFYARN_ATTEMPT']}"
with open(f"run_{name}.json", "w") as f:
    json.dump({"pid": os.getpid(), "port": env["TFYARN_PORT"],
               "restart": env["TFYARN_RESTART"],
               "tf_config": json.loads(env["TF_CONFIG"])}, f)
if env["TFYARN_ATTEMPT"] == "0":
    if env["TFYARN_TASK_INDEX"] == "1":
        time.sleep(0.5)
        raise ValueError("the first attempt breaks")
    time.sleep(60)  # only the master's Stop ends it
"""


def test_both_tasks_restart_in_place_on_their_ports(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    spec = job(tasks={"worker": 2}, max_restarts=1, stop_grace=2)
    master, codes = run_tasks(spec, credentials, tmp_path, script=SCRIPT)
    phase, diagnostics = master.wait_done()
    assert phase is Phase.SUCCEEDED, diagnostics
    assert codes == {"worker:0": 0, "worker:1": 0}
    assert master.launcher.started == [] and master.launcher.killed == []

    runs = {p.stem[4:]: json.loads(p.read_text()) for p in tmp_path.glob("run_*.json")}
    assert set(runs) == {"0_0", "0_1", "1_0", "1_1"}
    # Each ran twice in its one container: same port, a new interpreter, the
    # restart's number and the new cluster in its environment.
    for index in "01":
        before, after = runs[f"{index}_0"], runs[f"{index}_1"]
        assert after["port"] == before["port"] and after["pid"] != before["pid"]
        assert (before["restart"], after["restart"]) == ("0", "1")
    assert runs["0_1"]["tf_config"] == runs["1_1"]["tf_config"] | {
        "task": {"type": "worker", "index": 0}
    }
    assert master.state is not None
    assert master.state.generation == 2 and master.state.budget_used == 1
    history = "\n".join(master.state.tasks[next(iter(master.state.tasks))].history)
    assert "RELAUNCHING: restarting in place in container_" in history
