"""TensorFlow servers on YARN, the program on the gateway (`tfyarn servers`).

Two ways, each against real servers on the local cluster with real
TensorFlow and the digits data on HDFS:

- The two-step way: `tfyarn servers --detach` prints the legacy flags; a TF1
  in-graph client (examples/in_graph_client.py) given only those places its
  variables on the ps and a copy of the compute on each worker, trains to
  accuracy, checkpoints to hdfs://; `tfyarn kill` ends the set.
- TF2's way: a real notebook (examples/ps_coordinator.ipynb) run by a real
  Jupyter kernel opens the servers with `tfyarn.servers()` and coordinates
  ParameterServerStrategy steps; a worker killed mid-training is replaced at
  its address and training finishes; a lost ps makes `cluster.check()` raise
  naming it; the kernel killed without a word ends the servers within the lease.
"""

from __future__ import annotations

import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from _faults import kill_task, retry_until
from _hdfs import hdfs_dir
from helpers import EXAMPLES, REPO, SMALL, accuracy_from, run_cli

import tfyarn
from tfyarn.data import resolve
from tfyarn.data.example import write_digits

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs, pytest.mark.slow]

DATA = "hdfs:///tmp/tfyarn/digits"
MIN_ACCURACY = 0.9
SERVER_SIZES = [
    f"--{key}={value.replace(' ', '')}"
    for key, value in SMALL.items()
    if key.startswith(("ps_", "worker_", "am_"))
]


@pytest.fixture(scope="session")
def digits(local_cluster: Any) -> str:
    fs = resolve(DATA)
    if not (fs.glob(DATA + "/train-*") and fs.glob(DATA + "/test-*")):
        write_digits(DATA)  # what `tfyarn data make-example` writes
    return DATA


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    yield from hdfs_dir()


def test_two_step_servers_then_an_in_graph_client_on_the_gateway(
    digits: str, base: str
) -> None:
    started = run_cli(
        "servers", "--num_ps", "1", "--num_worker", "2", "--detach", *SERVER_SIZES
    )
    assert started.returncode == 0, started.stderr
    app_id, flags, tf_config, page = started.stdout.splitlines()
    try:
        assert app_id.startswith("application_") and page.startswith("http")
        assert tf_config.startswith('TF_CONFIG={"cluster":{"chief":')
        assert f"tfyarn kill {app_id}" in started.stderr  # how a detached set ends
        checkpoints = base + "/in_graph"
        client = subprocess.run(
            [
                sys.executable,
                str(EXAMPLES / "in_graph_client.py"),
                *flags.split(),
                "--data",
                digits,
                "--checkpoint_dir",
                checkpoints,
                "--steps",
                "150",
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=REPO,
            check=False,
        )
        assert client.returncode == 0, client.stderr[-4000:]
        out = client.stdout
        # Variables on the ps, a tower of compute on each worker.
        ran_on = out.split("ran_on=", 1)[1].split()[0].split(",")
        assert set(ran_on) >= {
            "/job:ps/replica:0/task:0",
            "/job:worker/replica:0/task:0",
            "/job:worker/replica:0/task:1",
        }, out
        assert accuracy_from(out) >= MIN_ACCURACY, out
        fs = resolve(checkpoints)
        assert fs.glob(checkpoints + "/checkpoint"), "no checkpoint index on HDFS"
        assert fs.glob(checkpoints + "/model-150.index"), fs.glob(checkpoints + "/*")
        # Still up: a detached set has no lease and nothing ended it.
        assert tfyarn.status(app_id).state == "RUNNING"
    finally:
        killed = run_cli("kill", app_id)
    assert killed.returncode == 0, killed.stderr
    assert tfyarn.status(app_id).final_status == "KILLED"


NOTEBOOK = EXAMPLES / "ps_coordinator.ipynb"
LEASE = 15.0  # short, so the kernel's end shows within the test
NOTEBOOK_STEPS = 600
NAME = "test-ps-notebook"


def _parameters(checkpoints: str) -> str:
    options = {
        k: v for k, v in SMALL.items() if k.startswith(("ps_", "worker_", "am_"))
    }
    return (
        f"NUM_PS, NUM_WORKER = 1, 2\nDATA = {DATA!r}\nCHECKPOINT_DIR = {checkpoints!r}\n"
        f"STEPS = {NOTEBOOK_STEPS}\nROUND = 50\nLEASE = {LEASE}\n"
        f"OPTIONS = {{**{options!r}, 'name': {NAME!r}}}\n"
    )


def _app_named(name: str) -> str:
    jobs = [j for j in tfyarn.list_jobs() if j.name == name]
    assert jobs, f"no running job named {name}"
    return jobs[-1].app_id


class _Killer(threading.Thread):
    """Kills worker:1's server once the notebook saved its first checkpoint."""

    def __init__(self, checkpoints: str) -> None:
        super().__init__(daemon=True)
        self.checkpoints = checkpoints
        self.app_id = ""
        self.killed_at_step: int | None = None
        self.killed_wall = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.app_id = retry_until("the set runs", lambda: _app_named(NAME), 240)
            fs = resolve(self.checkpoints)
            index = self.checkpoints + "/checkpoint"
            retry_until("a first checkpoint", lambda: _assert(fs.glob(index)), 300)
            with fs.open_input(index) as f:
                text = f.read().decode()
            self.killed_at_step = int(text.split("ckpt-")[1].split('"')[0])
            kill_task(self.app_id, "worker:1")
            self.killed_wall = time.time()
        except BaseException as exc:  # noqa: BLE001 -- reported by the test
            self.error = exc


def _assert(value: Any) -> Any:
    assert value
    return value


def test_a_notebook_coordinates_servers_on_yarn_survives_a_worker_and_its_end_ends_them(
    digits: str, base: str
) -> None:
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    checkpoints = base + "/notebook"
    nb = nbformat.read(NOTEBOOK, as_version=4)
    for cell in nb.cells:
        if "parameters" in cell.metadata.get("tags", []):
            cell.source = _parameters(checkpoints)
    client = NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(REPO)}},
    )
    client.km = client.create_kernel_manager()
    client.start_new_kernel()
    client.start_new_kernel_client()
    killer = _Killer(checkpoints)
    killer.start()
    app_id = ""
    try:
        for index, cell in enumerate(nb.cells):
            if "release" in cell.metadata.get("tags", []):
                break  # the kernel ends without releasing: the lease must end them
            client.execute_cell(cell, index)
        killer.join(timeout=30)
        assert killer.error is None, killer.error
        app_id = killer.app_id
        text = "".join(
            out.get("text", "") for c in nb.cells for out in c.get("outputs", [])
        )
        assert accuracy_from(text) >= MIN_ACCURACY, text[-3000:]
        # At least once: a step the killed worker had applied to the ps before
        # it died runs again elsewhere, so the counter may pass the target by
        # the few steps in flight on it.
        done = re.search(r"^steps=(\d+)$", text, re.MULTILINE)
        assert done, text[-3000:]
        assert NOTEBOOK_STEPS <= int(done.group(1)) < NOTEBOOK_STEPS + 10, text[-3000:]
        # The worker was killed mid-training and replaced alone, at its address.
        assert killer.killed_at_step is not None
        assert killer.killed_at_step < NOTEBOOK_STEPS
        assert killer.killed_wall < _ended_at(nb, "steps="), "killed after training"
        master = tfyarn.status(app_id).master
        assert master is not None and master.cluster_restarts == 0
        worker1 = master.task("worker:1")
        assert worker1 is not None and worker1.attempt >= 1, worker1

        # A lost ps: the servers restart, and the coordinator is told so.
        kill_task(app_id, "ps:0")
        check = nbformat.v4.new_code_cell(
            "import time\nfor _ in range(60):\n    cluster.check()\n    time.sleep(0.5)"
        )
        nb.cells.append(check)
        with pytest.raises(CellExecutionError) as lost:
            client.execute_cell(check, len(nb.cells) - 1)
        said = str(lost.value)
        assert "ServersRestartedError" in said and "ps:0" in said, said[-2000:]
        assert "restore_or_initialize" in said
    except BaseException:
        if killer.app_id:
            tfyarn.kill(killer.app_id)
        raise
    finally:
        # The kernel ends without a word: no release, no kill.
        pid = client.km.provisioner.process.pid  # type: ignore[union-attr]
        ended = time.time()
        subprocess.run(["kill", "-9", str(pid)], check=False)
        client.kc.stop_channels()
    status = retry_until(
        "the lease ends the set",
        lambda: _assert(_done(app_id)),
        timeout=LEASE + 45,
    )
    assert status.outcome == "KILLED", status
    assert "lease expired" in status.diagnostics, status.diagnostics
    # YARN's own end time: not the polling above (each status call starts a driver).
    assert status.finished is not None
    took = status.finished.timestamp() - ended
    print(f"servers ended {took:.1f} s after the kernel (lease {LEASE:.0f} s)")
    # The master decides within the lease (its log: "lease expired" ~15 s after
    # the kill); YARN's finish follows once the tasks stopped and the record is
    # kept: another ~30 s on this machine under CI load.
    assert took <= LEASE + 45


def _ended_at(nb: Any, printed: str) -> float:
    """When the cell that printed ``printed`` finished (nbclient's timing)."""
    for cell in nb.cells:
        if any(printed in out.get("text", "") for out in cell.get("outputs", [])):
            stamp = cell.metadata["execution"]["shell.execute_reply"]
            return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    raise AssertionError(f"no cell printed {printed!r}")


def _done(app_id: str) -> Any:
    status = tfyarn.status(app_id)
    return status if status.done else None
