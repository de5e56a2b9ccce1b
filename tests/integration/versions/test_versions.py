"""tfyarn end to end on each Hadoop version's cluster, in production's profile
(see conftest.py: Kerberos on both, HA on 3.1.1).

Per version: the cluster runs that version with Kerberos (and HA: both
NameNodes and ResourceManagers up, one active), the user's ticket lists the
name service and nothing else does; ``tfyarn data`` and TensorFlow's
``hdfs://`` plugin work on it; the production job (test_profile_job.py)
rides out failovers and its tokens' end; a job is scaled and stopped
gracefully, and ``tfyarn kill`` ends one.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import EXAMPLES, Job, run_cli, running_job

from tfyarn import client
from tfyarn.cluster import LocalCluster, _gpus

from ._profile import lead_step, name_service, scratch

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs, pytest.mark.kerberos]

# Time enough on a loaded two-core machine for every worker to reach the
# step to save at and write the checkpoint to HDFS.
STOP_GRACE = 60


def run(
    *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def test_the_cluster_runs_its_version_in_its_profile(
    local_cluster: LocalCluster, version: str, tmp_path: Path
) -> None:
    status = local_cluster.status()
    settings = local_cluster.settings()
    assert status.running, status.format()
    text = status.format()
    assert f"Hadoop {version} on JDK " in text, text
    assert status.kerberos and status.kerberos.realm, text
    if settings.ha:
        for daemon in ("namenode", "resourcemanager"):
            states = sorted(status.ha[daemon].values())
            assert states == ["active", "standby"], (daemon, status.ha)
    printed = run("hadoop", "version")
    assert printed.stdout.startswith(f"Hadoop {version}\n"), printed
    root = name_service(local_cluster) + "/"
    listed = run("hdfs", "dfs", "-ls", root)
    assert listed.returncode == 0, listed.stderr[-2000:]
    empty = tmp_path / "empty-ccache"
    empty.write_bytes(b"")
    # Without a ticket. Hadoop's HA client takes a refused login for a
    # NameNode it may fail over from and retries up to 15 times with growing
    # sleeps (over 180 s on a busy machine): one attempt shows the refusal.
    refused = run(
        "hdfs", "dfs", "-D", "dfs.client.failover.max.attempts=1", "-ls", root,
        env={"KRB5CCNAME": f"FILE:{empty}"},
    )  # fmt: skip
    assert refused.returncode != 0
    assert "Client cannot authenticate via:[TOKEN, KERBEROS]" in refused.stderr


def test_yarns_gpu_plugin_finds_the_stand_in_devices(
    local_cluster: LocalCluster,
) -> None:
    """The node's two GPUs reach the ResourceManager's node report only if
    this version's GPU plugin ran the stand-in nvidia-smi and parsed its XML."""
    (node,) = local_cluster.status().nodes or []
    assert node.gpus == 2, node
    log = local_cluster.base_dir / "logs" / "nodemanager.log"
    assert not _gpus.nodemanager_gpu_error(log), _gpus.nodemanager_gpu_error(log)


def test_data_cli_and_the_plugin_on_the_name_service(
    local_cluster: LocalCluster,
) -> None:
    base = scratch(local_cluster, "plugin")
    code = f"""
        import tensorflow as tf, tfyarn
        tfyarn.enable_hdfs()
        root = {base!r}
        tf.io.gfile.makedirs(root)
        with tf.io.TFRecordWriter(root + "/part-0.tfrecord") as w:
            for i in range(3):
                w.write(str(i).encode())
        tf.io.gfile.rename(root + "/part-0.tfrecord", root + "/part-1.tfrecord")
        files = tf.io.gfile.glob(root + "/part-*.tfrecord")
        records = [r.decode() for r in tf.data.TFRecordDataset(files).as_numpy_iterator()]
        print("plugin:", files, records)
    """
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"plugin: ['{base}/part-1.tfrecord'] ['0', '1', '2']" in done.stdout
    counted = run_cli("data", "count", base + "/part-*.tfrecord")
    assert counted.returncode == 0, counted.stderr
    assert re.search(r"\b3  total", counted.stdout), counted.stdout


def _numbers(text: str, key: str) -> list[int]:
    return [int(n) for n in re.findall(rf"^{key}=(\d+)", text, re.MULTILINE)]


def _wait_for_workers(job: Job, workers: int, timeout: float = 180) -> int:
    """Wait until ``workers`` workers run and the lead reported in that
    generation; the lead's step then."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        master = client.status(job.app_id, client=job.yarn).master
        if master is not None and master.phase.value == "RUNNING":
            mine = [t for t in master.tasks if t.role == "worker"]
            lead = master.task(master.lead or "")
            if (
                len(mine) == workers
                and all(t.state.value == "RUNNING" for t in mine)
                and lead is not None
                and lead.step is not None
            ):
                return lead.step
        time.sleep(1)
    status = client.status(job.app_id, client=job.yarn)
    tasks = status.master.tasks if status.master else []
    raise AssertionError(
        f"{job.app_id} never ran with {workers} workers in {timeout:.0f} s: "
        f"{status.state}, phase {status.master.phase if status.master else None}, "
        + ", ".join(f"{t.task} {t.state.value}" for t in tasks)
    )


@pytest.mark.slow
@pytest.mark.heavy  # 4-6 min a version under load: run by hand (tests/README.md)
def test_a_job_is_scaled_then_stopped_gracefully(
    local_cluster: LocalCluster, yarn: Any, digits: str
) -> None:
    """``tfyarn scale`` 2 -> 3 workers while it trains, then ``tfyarn kill
    --graceful``: the workers save where they stopped, no step is trained twice."""
    base = scratch(local_cluster, "elastic")
    args = ["--data", digits, "--checkpoint_dir", base + "/mwms", "--steps",
            "100000", "--checkpoint_every", "0"]  # fmt: skip
    # With the keytab: the job may outlive the cluster's short tokens.
    kerberos = local_cluster.secure()
    done = run_cli(
        "submit", "--detach", "--num_worker", "2", "--max_restarts", "0",
        "--stop_grace", str(STOP_GRACE), "--worker_memory", "768m",
        "--principal", kerberos.user_principal, "--keytab", str(kerberos.user_keytab),
        str(EXAMPLES / "mwms_graceful.py"), *args,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    found = re.search(r"application_\d+_\d+", done.stdout)
    assert found, done.stdout
    job = Job(found.group(0), yarn)
    try:
        _wait_for_workers(job, 2)
        scaled = run_cli("scale", job.app_id, "--num_worker", "3")
        assert scaled.returncode == 0, scaled.stderr
        assert "-> 3 workers" in scaled.stdout, scaled.stdout
        step = _wait_for_workers(job, 3, timeout=360)  # three TensorFlow starts
        deadline = time.monotonic() + 120
        while lead_step(job) < step + 5:
            assert time.monotonic() < deadline, "no progress with 3 workers"
            time.sleep(1)
        time.sleep(3)  # a heartbeat has said the scripts heed notices
        killed = run_cli("kill", "--graceful", job.app_id)
        assert killed.returncode == 0, killed.stderr
        assert "KILLED" in killed.stdout
        final = job.wait_for_end(timeout=180)
        assert final.outcome == "KILLED", final.diagnostics
        text = job.logs("worker:0")
    except BaseException:
        # What the master saw and each task said: the failure's evidence is
        # gone with the cluster's wipe at the session's end.
        print("\n".join(job.events))
        said = run_cli("logs", job.app_id, timeout=120)
        print(said.stdout[-6000:], said.stderr[-2000:])
        raise
    finally:
        if not client.status(job.app_id, client=yarn).done:
            client.kill(job.app_id, client=yarn)
    # One save when scaled, one when stopped; each generation starts where
    # the one before saved.
    starts, saved = _numbers(text, "start_step"), _numbers(text, "saved_at")
    assert _numbers(text, "workers") == [2, 3], text[-3000:]
    assert len(saved) == 2 and starts == [0, saved[0]], (starts, saved)
    assert final.master is not None and final.master.restarts == 0


def test_tfyarn_kill_ends_a_running_job(yarn: Any, tmp_path: Path) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text('import time\nprint("sleeper up", flush=True)\ntime.sleep(300)\n')
    plain = {"worker_memory": "256 MiB", "am_memory": "512 MiB", "preimport": []}
    with running_job(yarn, script, num_worker=1, **plain) as job:
        deadline = time.monotonic() + 120
        while True:
            status = client.status(job.app_id, client=yarn)
            tasks = status.master.tasks if status.master else []
            if any(t.state == "RUNNING" for t in tasks):
                break
            assert time.monotonic() < deadline, f"never RUNNING: {status}"
            time.sleep(1)
        killed = run_cli("kill", job.app_id)
        assert killed.returncode == 0, killed.stderr
        assert "KILLED" in killed.stdout
        assert client.status(job.app_id, client=yarn).state == "KILLED"
