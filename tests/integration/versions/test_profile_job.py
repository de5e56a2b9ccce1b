"""The job production runs, on each version's profile cluster (conftest.py).

Submitted with the user's keytab (``--principal/--keytab``), its tasks
holding no ticket, only delegation tokens. Two workers
(``jobs/profile_job.py``) read TFRecord shards through the ``hdfs://``
plugin every round and checkpoint there, on ``fs.defaultFS`` (the name
service of an HA cluster). While they train: on an HA cluster a crash
of the active NameNode and a ResourceManager failover, then the end of the
submission's HDFS tokens (the cluster's ``--token_lifetime``): the workers
go on with the tokens the master fetched afresh with the keytab.

A NameNode of 3.1.1 may answer a write ``RetriableException: InvalidToken
... can't be found in cache`` (fresh tokens a few seconds before the crash,
or the submission's at the first checkpoint): the ``hdfs://`` plugin sends
it again, as Hadoop's Java client does. The job SUCCEEDS, no task restarted (one
application attempt, the very same processes), the master refreshed its
tokens, and ``tfyarn logs`` shows every task's output.

The shipped environment is a second job, also with the keytab:
``--python_env auto`` from a virtualenv of tfyarn without TensorFlow
(``multihost/_closure.py``), packed, uploaded to the cluster's HDFS cache
and unpacked by YARN, the task's interpreter, tfyarn and grpc from its
container's directory (``jobs/env_probe.py``). TensorFlow is not shipped:
this NodeManager, without Hadoop's native library, forks a ``chmod`` per
unpacked file, and TensorFlow's 10,700 files took more than the tokens'
six minutes to unpack on a loaded machine (``LOCALIZATION_FAILED``: the
localizer's token expired).
"""

from __future__ import annotations

import re
import time
from typing import Any

import _untouched
import pytest
from helpers import REPO, Job, accuracy_from, run_cli
from multihost import _closure

from tfyarn import client
from tfyarn.cluster import LocalCluster
from tfyarn.data import fs

from ._profile import lead_step, scratch
from .conftest import TOKEN_LIFETIME_S

pytestmark = [
    pytest.mark.yarn,
    pytest.mark.hdfs,
    pytest.mark.kerberos,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
]

JOB = REPO / "tests" / "integration" / "jobs" / "profile_job.py"
PROBE = REPO / "tests" / "integration" / "jobs" / "env_probe.py"
TASKS = ("worker:0", "worker:1")
# Tasks get no ticket: only the delegation tokens of the submission.
NO_TICKET = "KRB5CCNAME=FILE:/nonexistent/tfyarn-no-ticket"
# hdfs-native stops using a token this long before its end
# (tfyarn.contract.tokens.CLIENT_SLACK_S).
CLIENT_SLACK_S = 60
APP_ID = re.compile(r"application_\d+_\d+")


@pytest.fixture(scope="session")
def shipped_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The interpreter of the environment ``--python_env auto`` packs."""
    venv = _closure.small_venv(tmp_path_factory.mktemp("envs") / "small")
    return str(venv / "bin" / "python")


def _progress(job: Job, beyond: int, timeout: float = 180) -> int:
    """Wait until every worker reported a step past ``beyond``; the least."""
    deadline = time.monotonic() + timeout
    while True:
        snap = _untouched.snapshot(job)
        steps = [t.get("step") or 0 for t in snap.get("tasks", [])]
        if len(steps) == len(TASKS) and min(steps) > beyond:
            return min(steps)
        status = client.status(job.app_id, client=job.yarn)
        assert not status.done, f"job ended early: {status.diagnostics}"
        assert time.monotonic() < deadline, f"no step past {beyond}: {snap}"
        time.sleep(1)


@pytest.mark.heavy  # 7-8 min a version under load: run by hand (tests/README.md)
def test_the_production_job_rides_out_failovers_and_its_tokens_end(
    local_cluster: LocalCluster, yarn: Any, digits: str
) -> None:
    cluster = local_cluster
    ha = cluster.settings().ha
    kerberos = cluster.secure()
    base = scratch(cluster, "job")
    stop = f"{base}/stop"
    submitted = time.time()
    done = run_cli(
        "submit", "--detach", "--env", NO_TICKET,
        "--principal", kerberos.user_principal, "--keytab", str(kerberos.user_keytab),
        "--num_worker", "2", "--worker_memory", "768m", "--max_restarts", "1",
        "--heartbeat_interval", "1",
        str(JOB), "--data", digits, "--checkpoint_dir", f"{base}/ckpt", "--until", stop,
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
    found = APP_ID.search(done.stdout)
    assert found, done.stdout
    job = Job(found.group(0), yarn)
    print(f"submitted in {time.time() - submitted:.0f} s")
    try:
        step = _progress(job, 0, timeout=300)
        print(f"training after {time.time() - submitted:.0f} s")
        pids = _untouched.scripts(job, TASKS)
        where = ["--base-dir", str(cluster.base_dir)]
        if ha:
            killed = run_cli("cluster", "kill", "namenode", *where)
            assert killed.returncode == 0, killed.stdout + killed.stderr
            step = _progress(job, step + 10)
            # Back as the standby, for the tests after this one.
            crashed = killed.stdout.split()[3]  # "Killed the NameNode nn2 ..."
            back = run_cli("cluster", "restart", "namenode", crashed, *where)
            assert back.returncode == 0, back.stdout + back.stderr
            moved = run_cli("cluster", "failover", "resourcemanager", *where)
            assert moved.returncode == 0, moved.stdout + moved.stderr
            step = _progress(job, step + 10)
        # Past the submission's tokens: new connections need the fresh ones.
        ends = submitted + TOKEN_LIFETIME_S - CLIENT_SLACK_S
        while time.time() < ends + 20:
            step = _progress(job, step)
            time.sleep(2)
        step = _progress(job, step + 10)
        _untouched.assert_nothing_restarted(job, pids)
        tokens = (_untouched.snapshot(job).get("hdfs_tokens") or {}).get("refreshes")
        assert tokens, _untouched.snapshot(job).get("hdfs_tokens")
        with fs.resolve(stop).open_output(stop) as out:
            out.write(b"stop\n")
        final = job.wait(timeout=300)
    except BaseException:
        print("\n".join(job.events))
        with_logs = run_cli("logs", job.app_id, timeout=120)
        print(with_logs.stdout[-6000:], with_logs.stderr[-2000:])
        if not client.status(job.app_id, client=yarn).done:
            client.kill(job.app_id, client=yarn)
        raise
    took = time.time() - submitted
    print(f"job took {took:.0f} s, the last step reported {lead_step(job)}")
    assert final.succeeded, final.diagnostics
    _untouched.assert_nothing_restarted(job, pids, running=False)

    # tfyarn logs: every task's output, from the NodeManager's log dirs (a
    # secure local cluster aggregates no logs).
    for task in TASKS:
        logs = run_cli("logs", job.app_id, "--task", task, timeout=120)
        assert logs.returncode == 0, logs.stderr[-2000:]
        text = logs.stdout
        assert text.count("start_step=0") == 1, text[-3000:]
        assert accuracy_from(text) >= 0.4  # ten classes; 200 steps of SGD
    # The master's own log, in the NodeManager's log dir.
    logs = cluster.logs_dir / "containers" / job.app_id
    said = "".join(p.read_text(errors="replace") for p in logs.rglob("*.log"))
    assert "fresh HDFS delegation tokens #1" in said, said[-3000:]


def test_a_keytab_job_runs_from_its_shipped_environment(
    local_cluster: LocalCluster, shipped_python: str
) -> None:
    kerberos = local_cluster.secure()
    began = time.monotonic()
    done = run_cli(
        "submit", "--env", NO_TICKET, "--no_preimport",
        "--principal", kerberos.user_principal, "--keytab", str(kerberos.user_keytab),
        "--python_env", "auto", "--python_env_compression", "0",
        "--num_worker", "1", "--worker_memory", "512m", "--am_memory", "512m",
        "--max_am_attempts", "1", str(PROBE),
        timeout=900, python=shipped_python,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "final status: SUCCEEDED" in out, out[-3000:]
    found = APP_ID.search(out)
    assert found, out[-2000:]
    print(f"packed, shipped and run in {time.monotonic() - began:.0f} s")
    logs = run_cli("logs", found.group(0), "--task", "worker:0", timeout=300)
    assert "env_probe OK" in logs.stdout, logs.stdout[-3000:] + logs.stderr[-2000:]
    assert "/filecache/" in logs.stdout or "/appcache/" in logs.stdout
