"""The notebook way in, end to end: a real Jupyter kernel, YARN, HDFS and MLflow.

``examples/notebook_run.ipynb`` is executed headless by nbclient on a real
ipykernel: it writes the digits data set to HDFS, runs a function defined in
the notebook on two workers with MultiWorkerMirroredStrategy through
``tfyarn.run`` (the live view in the cell, the accuracy returned), then a
function that raises (its remote traceback printed in the notebook). A real
MLflow tracking server (its own process, SQLite store, a free loopback port)
(started by ``conftest.py``) receives the first job's run. A tiny job beside them logs to a server that
is down: it costs a warning, and the value still comes back.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tfyarn.data import fs

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
NOTEBOOK = REPO / "examples" / "notebook_run.ipynb"
ARTIFACTS = REPO / "tests" / "artifacts" / "notebook"
MIN_ACCURACY = 0.8
# Enough steps for several of them to reach MLflow (the client polls every
# second; report_progress reaches the master at most once a second).
STEPS = 600
EXPERIMENT = "tfyarn-notebook"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def data(local_cluster: Any) -> Iterator[str]:
    base = f"hdfs:///tmp/tfyarn-test/notebook-{os.getpid()}"
    yield base + "/digits"
    fs.resolve(base).delete(base, recursive=True)


def _outputs(cell: Any) -> str:
    """A cell's outputs as text: streams, results and displays' text/plain."""
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif "data" in out:
            parts.append(out["data"].get("text/plain", ""))
        elif out.get("output_type") == "error":
            parts.append("\n".join(out.get("traceback", [])))
    return "\n".join(parts)


def _cell(nb: Any, tag: str) -> Any:
    return next(c for c in nb.cells if tag in c.get("metadata", {}).get("tags", []))


def test_the_notebook_trains_returns_accuracy_and_shows_remote_errors(
    mlflow_server: str, data: str, down_server_job: subprocess.Popen[str]
) -> None:
    import nbformat
    from mlflow.tracking import MlflowClient
    from nbclient import NotebookClient

    nb = nbformat.read(NOTEBOOK, as_version=4)
    env = {
        "TFYARN_NOTEBOOK_DATA": data,
        "TFYARN_NOTEBOOK_STEPS": str(STEPS),
        "MLFLOW_TRACKING_URI": mlflow_server,
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits this process's environment
    try:
        NotebookClient(
            nb,
            timeout=600,
            kernel_name="python3",
            resources={"metadata": {"path": str(REPO)}},
        ).execute()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        # The executed notebook (outputs, each cell's timing) for a look after.
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        nbformat.write(nb, ARTIFACTS / NOTEBOOK.name)

    train = _cell(nb, "train")
    shown = _outputs(train)
    accuracy = re.search(r"^accuracy: ([0-9.]+)$", shown, re.MULTILINE)
    assert accuracy, shown[-3000:]
    assert float(accuracy.group(1)) >= MIN_ACCURACY, shown[-3000:]
    # The live view's last state: one display, updated in place to the end.
    displays = [o for o in train.outputs if o.get("output_type") == "display_data"]
    assert len(displays) == 1, shown[-3000:]
    final = displays[0]["data"]
    app_id = re.search(r"application_\d+_\d+", final["text/plain"]).group(0)
    assert f"{app_id}: SUCCEEDED" in final["text/plain"], final["text/plain"]
    # Task by task, in their final states (the master's final record).
    assert re.search(r"worker:0\s+SUCCEEDED", final["text/plain"]), final["text/plain"]
    assert re.search(r"worker:1\s+\S+", final["text/plain"])
    assert "SUCCEEDED" in final["text/html"]
    assert "\x1b[" not in shown  # no terminal control codes in the cell

    failure = _outputs(_cell(nb, "failure"))
    assert "ValueError: no labels in" in failure, failure[-3000:]
    assert "Remote traceback (worker:0, attempt 0)" in failure, failure[-3000:]
    assert re.search(r'File ".*", line \d+, in broken', failure), failure[-3000:]

    # The first job's MLflow run: parameters, metric history, final status.
    mlflow = MlflowClient(mlflow_server)
    experiment = mlflow.get_experiment_by_name(EXPERIMENT)
    assert experiment is not None
    runs = mlflow.search_runs([experiment.experiment_id])
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.params["num_worker"] == "2"
    assert run.data.params["worker_memory"] == "1024 MiB"
    assert run.data.params["function"] == "__main__.train"
    assert run.data.params["hadoop_version"].startswith("3.")
    assert run.data.params["tensorflow_version"].startswith("2.")
    assert run.data.tags["tfyarn.app_id"] == app_id
    assert run.data.tags["tfyarn.final_status"] == "SUCCEEDED"
    assert app_id in run.data.tags["tfyarn.tracking_url"]
    assert run.data.tags["tfyarn.logs_command"] == f"yarn logs -applicationId {app_id}"
    steps = [m.step for m in mlflow.get_metric_history(run.info.run_id, "loss")]
    assert len(steps) >= 2 and steps == sorted(steps) and steps[-1] <= STEPS, steps


# The job of the down server's test, as its own Python process: started by
# the notebook's test so that it runs beside the notebook's jobs (it is tiny
# and mostly waits on YARN), its warnings on its stderr.
_DOWN_JOB = """
import sys, tfyarn
def answer(x):
    return x * 6
print("VALUE", tfyarn.run(answer, 7, num_worker=1, worker_memory="512 MiB",
      am_memory="512 MiB", preimport=[], view=False, mlflow=sys.argv[1]))
"""


@pytest.fixture(scope="module")
def down_server_job(local_cluster: Any) -> Iterator[subprocess.Popen[str]]:
    job = subprocess.Popen(
        [sys.executable, "-c", _DOWN_JOB, f"http://127.0.0.1:{_free_port()}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    yield job
    if job.poll() is None:
        job.kill()
        job.communicate()


def test_a_tracking_server_that_is_down_costs_only_a_warning(
    down_server_job: subprocess.Popen[str],
) -> None:
    out, err = down_server_job.communicate(timeout=600)
    assert down_server_job.returncode == 0, err[-3000:]
    assert "VALUE 42" in out, (out, err[-3000:])
    # One warning, and nothing else about MLflow.
    assert err.count("MLflow at http://127.0.0.1:") == 1, err[-3000:]
    assert "goes on without its MLflow run" in err
