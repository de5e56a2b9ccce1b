"""Queues and node labels on the multi-host cluster (see conftest.py: queues
default 70% and prod 30%, label ``ps`` on node1, ``work`` on node2, node3
unlabelled). Jobs here run no TensorFlow: placement is what is tested."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from helpers import run_cli

from tfyarn.cluster import LocalCluster

from .conftest import PYTHON

pytestmark = [pytest.mark.yarn]

SLEEP = Path(__file__).parents[1] / "jobs" / "gang_sleep.py"
CHEAP = [
    "--python", PYTHON, "--no_preimport", "--am_memory", "512m",
    "--ps_memory", "256m", "--worker_memory", "256m", "--chief_memory", "256m",
]  # fmt: skip


def _host(cluster: LocalCluster, name: str) -> str:
    layout = cluster.layout()
    assert layout is not None
    return layout.host(name).host


def test_cluster_status_lists_the_labels(local_cluster: LocalCluster) -> None:
    done = run_cli(
        "cluster", "status", "--json", "--base-dir", str(local_cluster.base_dir)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    status = json.loads(done.stdout)
    labels = {n["name"]: n["labels"] for n in status["nodes"]}
    assert labels == {"node1": ["ps"], "node2": ["work"], "node3": []}
    assert status["settings"]["queues"] == {"default": 70.0, "prod": 30.0}


def test_ps_on_one_label_workers_on_another_in_a_queue(
    local_cluster: LocalCluster,
) -> None:
    began = time.monotonic()
    done = run_cli(
        "submit", *CHEAP, "--queue", "prod", "--detach",
        "--num_ps", "1", "--num_worker", "2", "--num_chief", "1",
        "--ps_node_label", "ps", "--node_label", "work", "--chief_node_label", "ps",
        str(SLEEP), "--seconds", "120",
        timeout=300,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    app_id = re.search(r"Submitted (application_\S+)", out).group(1)  # type: ignore[union-attr]
    try:
        deadline = time.monotonic() + 300
        while True:  # the master's per-task view exists while the job runs
            status = run_cli("status", app_id, "--json", timeout=120)
            assert status.returncode == 0, status.stderr
            report = json.loads(status.stdout)
            tasks = (report.get("master") or {}).get("tasks") or []
            if len(tasks) == 4 and all(t["state"] == "RUNNING" for t in tasks):
                break
            assert time.monotonic() < deadline, report
            time.sleep(2)
        assert report["queue"] in ("prod", "root.prod"), report
        hosts = {t["task"]: t["address"].rsplit(":", 1)[0] for t in tasks}
        ps_host = _host(local_cluster, "node1")
        work_host = _host(local_cluster, "node2")
        assert hosts == {
            "chief:0": ps_host,
            "ps:0": ps_host,
            "worker:0": work_host,
            "worker:1": work_host,
        }, hosts
        # The same placement, one host per task, in the plain `tfyarn status`.
        table = run_cli("status", app_id, timeout=120).stdout
        for task, host in hosts.items():
            assert re.search(rf"{task}\b.*{re.escape(host)}:\d+", table), table
    finally:
        run_cli("kill", app_id, timeout=200)
    print(f"labelled job: {time.monotonic() - began:.1f} s")


def test_unknown_label_and_queue_are_refused_naming_those_there(
    local_cluster: LocalCluster,
) -> None:
    done = run_cli(
        "submit", *CHEAP, "--num_worker", "1", "--worker_node_label", "gpu",
        str(SLEEP), timeout=200,
    )  # fmt: skip
    assert done.returncode != 0
    err = done.stderr
    assert "--worker_node_label gpu: no running node has the label 'gpu'" in err, err
    assert f"ps ({_host(local_cluster, 'node1')})" in err, err
    assert f"work ({_host(local_cluster, 'node2')})" in err, err
    assert "Submitted" not in done.stdout
    done = run_cli(
        "submit", *CHEAP, "--num_worker", "1", "--queue", "nosuch", str(SLEEP),
        timeout=200,
    )  # fmt: skip
    assert done.returncode != 0
    assert "queue 'nosuch' does not exist" in done.stderr, done.stderr
    assert "queues: default, prod" in done.stderr, done.stderr


def test_a_task_must_fit_a_host_of_its_label(local_cluster: LocalCluster) -> None:
    """The fits check reads each host's labels from YARN: a labelled role is
    measured against its label's hosts, the master against unlabelled ones
    (every host here offers 3 GiB; the messages name which hosts counted)."""
    done = run_cli(
        "submit", "--dry_run", *CHEAP, "--num_worker", "1",
        "--worker_node_label", "work", "--worker_memory", "4g", str(SLEEP),
        timeout=200,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    err = done.stderr
    assert "--worker_memory 4096 MiB is more than any node with the label 'work'" in err
    assert f"the largest, {_host(local_cluster, 'node2')}:" in err, err
    assert "another --worker_node_label" in err, err
    done = run_cli(
        "submit", "--dry_run", *CHEAP, "--num_worker", "1", "--am_memory", "4g",
        str(SLEEP), timeout=200,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    err = done.stderr
    assert "--am_memory 4096 MiB is more than any node without a label" in err, err
    assert f"the largest, {_host(local_cluster, 'node3')}:" in err, err
