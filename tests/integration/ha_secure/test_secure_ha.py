"""A secure HA cluster, for real: Kerberos and two NameNodes behind
``hdfs://tfyarn``.

The user's ticket lists the name service (``hdfs`` and ``tfyarn data``), and
nothing else does; a job whose tasks hold no ticket, only the
``ha-hdfs:tfyarn`` delegation token obtained at submission, writes HDFS
before a graceful NameNode failover and after a crash of the NameNode that
took over, and SUCCEEDS: the token holds against whichever NameNode is
active. The probes speak HTTPS to the HTTPS_ONLY NameNodes throughout
(``cluster status``, ``failover``, ``kill``).
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from helpers import run_cli

import tfyarn
from tfyarn.client import jobs
from tfyarn.cluster import LocalCluster
from tfyarn.data import fs

pytestmark = [pytest.mark.kerberos, pytest.mark.yarn, pytest.mark.hdfs]

JOB = Path(__file__).with_name("_name_service_job.py")
# Tasks get no ticket: only the delegation tokens of the submission.
NO_TICKET = "KRB5CCNAME=FILE:/nonexistent/tfyarn-no-ticket"
JOB_WAIT_S = 300


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


def where(cluster: LocalCluster) -> list[str]:
    return ["--base-dir", str(cluster.base_dir)]


def namenodes(cluster: LocalCluster) -> dict[str, str]:
    return cluster.status().ha["namenode"]


def active(cluster: LocalCluster) -> str:
    return next(m for m, state in namenodes(cluster).items() if state == "active")


def container_logs(cluster: LocalCluster, app_id: str) -> str:
    # No log aggregation on a secure cluster: the NodeManager's log dirs.
    logs = cluster.logs_dir / "containers" / app_id
    return "".join(
        f"\n==> {p}\n" + p.read_text(errors="replace")
        for p in sorted(logs.rglob("*"))
        if p.is_file()
    )


def listed(url: str) -> None:
    """``hdfs dfs -ls`` and ``tfyarn data ls`` of ``url`` both work."""
    done = run("hdfs", "dfs", "-ls", url)
    assert done.returncode == 0, done.stderr[-2000:]
    done = run_cli("data", "ls", url, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]


def wait_for(path: str, *, timeout: float) -> None:
    hdfs = fs.resolve(path)
    deadline = time.monotonic() + timeout
    while not hdfs.exists(path):
        assert time.monotonic() < deadline, f"no {path} within {timeout:.0f} s"
        time.sleep(1)


def test_the_name_service_lists_with_a_ticket_only(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    states = namenodes(local_cluster)  # probed over HTTPS
    assert sorted(states.values()) == ["active", "standby"], states
    uis = local_cluster.status().web_uis
    assert uis["NameNode nn1"].startswith("https://"), uis
    assert run("hdfs", "dfs", "-mkdir", "-p", "hdfs://tfyarn/tmp").returncode == 0
    listed("hdfs://tfyarn/")
    empty = tmp_path / "empty-ccache"
    empty.write_bytes(b"")
    refused = run(
        "hdfs", "dfs", "-ls", "hdfs://tfyarn/", env={"KRB5CCNAME": f"FILE:{empty}"}
    )
    assert refused.returncode != 0
    assert "Client cannot authenticate via:[TOKEN, KERBEROS]" in refused.stderr


def test_a_job_with_tokens_only_lives_through_a_failover_and_a_crash(
    local_cluster: LocalCluster,
) -> None:
    cluster = local_cluster
    base = f"hdfs://tfyarn/tmp/tfyarn-ha-secure-{uuid.uuid4().hex[:8]}"
    fs.resolve(base).mkdirs(base)
    began = time.monotonic()
    done = run_cli(
        "submit", "--detach", "--no_preimport", "--env", NO_TICKET,
        "--num_worker", "1", "--worker_memory", "384m", "--max_restarts", "0",
        str(JOB), base,
        timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"application_\d+_\d+", done.stdout)
    assert found, done.stdout
    app_id = found.group(0)
    wait_for(f"{base}/before.txt", timeout=180)

    first = active(cluster)
    done = run_cli("cluster", "failover", "namenode", *where(cluster))
    assert done.returncode == 0, done.stdout + done.stderr
    second = active(cluster)
    assert second != first and f"{second} is active" in done.stdout, done.stdout

    # A crash of the one that took over: the first takes the role back.
    done = run_cli("cluster", "kill", "namenode", *where(cluster))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"Killed the NameNode {second} "), done.stdout
    listed(f"{base}/")  # the clients fail over to it, with the user's ticket
    assert namenodes(cluster) == {first: "active", second: "down"}

    with fs.resolve(base).open_output(f"{base}/go") as out:
        out.write(b"go\n")
    with tfyarn.connect() as yarn:
        deadline = time.monotonic() + JOB_WAIT_S
        while not (final := jobs.status(app_id, client=yarn)).done:
            assert time.monotonic() < deadline, f"{app_id} not done in {JOB_WAIT_S} s"
            time.sleep(2)
    print(f"job took {time.monotonic() - began:.0f} s")
    said = container_logs(cluster, app_id)
    assert final.final_status == "SUCCEEDED", final.diagnostics + said[-6000:]
    assert "HDFS tokens for: ha-hdfs:tfyarn" in said, said[-6000:]
    assert "same connection copied 28 bytes" in said, said[-6000:]
    assert "new connection copied 28 bytes" in said, said[-6000:]
    hdfs = fs.resolve(base)
    for name in ("after.txt", "after-new.txt"):
        data = b"".join(hdfs.read_chunks(f"{base}/{name}"))
        assert data == b"written before the failover\n", name
    hdfs.delete(base, recursive=True)
