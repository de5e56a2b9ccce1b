"""Jobs longer than their HDFS delegation tokens, on the secure cluster.

The fixture's cluster makes tokens that end ``TOKEN_LIFETIME_S`` (120 s) after
submission. Two jobs run side by side to fit the CI budget:

- with ``--principal/--keytab``: a 2-worker MultiWorkerMirroredStrategy job
  that reads HDFS and checkpoints to it, waits until 15 s past its
  submission's tokens, then opens new NameNode connections, reads, writes and
  checkpoints again, and SUCCEEDS: the master fetched fresh tokens with the
  keytab and every task wrote them into its token file;
- without: the same waiting, no TensorFlow; the master warned at start (status
  ``warnings``), the task's new connection is refused, and the job FAILS with
  diagnostics naming the expired token and the keytab options.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

import tfyarn
from tfyarn.client import jobs
from tfyarn.cluster import LocalCluster
from tfyarn.data import fs

from .conftest import TOKEN_LIFETIME_S

pytestmark = [
    pytest.mark.kerberos,
    pytest.mark.yarn,
    pytest.mark.hdfs,
    pytest.mark.slow,
]

TFYARN = str(Path(sys.executable).parent / "tfyarn")
JOB = Path(__file__).parent.parent / "_long_token_job.py"
NO_TICKET = "KRB5CCNAME=FILE:/nonexistent/tfyarn-no-ticket"  # tasks: tokens only


def submit(*argv: str) -> str:
    done = subprocess.run(
        [TFYARN, "submit", "--detach", "--env", NO_TICKET, *argv],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"application_\d+_\d+", done.stdout)
    assert found, done.stdout
    return found.group(0)


def container_logs(cluster: LocalCluster, app_id: str) -> str:
    logs = cluster.logs_dir / "containers" / app_id
    return "".join(
        f"\n==> {p}\n" + p.read_text(errors="replace")
        for p in sorted(logs.rglob("*"))
        if p.is_file()
    )


def test_a_keytab_job_outlives_its_tokens_and_a_ticket_job_is_told_why_it_cannot(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    kerberos = local_cluster.secure()
    base = f"hdfs:///tmp/tfyarn-long-{uuid.uuid4().hex[:8]}"
    hdfs = fs.resolve(base)
    for name in ("keytab", "ticket"):
        hdfs.mkdirs(f"{base}/{name}")
        with hdfs.open_output(f"{base}/{name}/in.txt") as out:
            out.write(b"sixteen bytes..\n")
    began = time.monotonic()
    with_keytab = submit(
        "--principal", kerberos.user_principal, "--keytab", str(kerberos.user_keytab),
        "--num_worker", "2", "--worker_memory", "768m",
        str(JOB), f"{base}/keytab",
    )  # fmt: skip
    # The user's ticket cache, as after `kinit`: no keytab travels.
    with_ticket = submit(
        "--num_worker", "1", "--worker_memory", "384m", "--no_preimport",
        "--max_restarts", "0",
        str(JOB), f"{base}/ticket", "--plain",
    )  # fmt: skip
    warned = refreshed = ""
    final: dict[str, jobs.JobStatus] = {}
    deadline = time.monotonic() + TOKEN_LIFETIME_S + 240
    with tfyarn.connect() as yarn:
        while len(final) < 2 and time.monotonic() < deadline:
            for app_id in (with_keytab, with_ticket):
                if app_id in final:
                    continue
                st = jobs.status(app_id, client=yarn)
                if st.done:
                    final[app_id] = st
                elif st.master is not None:
                    tokens = st.master.hdfs_tokens or {}
                    if app_id == with_ticket and st.master.warnings:
                        warned = st.master.warnings[0]
                    if app_id == with_keytab and tokens.get("refreshes"):
                        refreshed = str(tokens)
            time.sleep(5)
    took = time.monotonic() - began
    print(f"both jobs took {took:.0f} s")
    assert len(final) == 2, f"not ended within {TOKEN_LIFETIME_S + 240} s"

    # With a keytab: SUCCEEDED, past the tokens' end, with fresh tokens.
    said = container_logs(local_cluster, with_keytab)
    st = final[with_keytab]
    assert st.final_status == "SUCCEEDED", st.diagnostics + said[-6000:]
    assert said.count("PHASE2 ok step=10") == 2, said[-6000:]  # both workers
    assert said.count("new connection read 16 bytes") == 2, said[-6000:]
    assert "keytab in this task: False" in said  # the master's alone
    assert "keytab in this task: True" not in said
    assert re.search(r"fresh HDFS delegation tokens #1 for \S+ in [\d.]+ s", said)
    assert "fresh HDFS delegation tokens #1 (" in said  # written by a task
    assert refreshed, "the status never showed a refresh"
    assert hdfs.exists(f"{base}/keytab/out-1.txt")
    state = b"".join(hdfs.read_chunks(f"{base}/keytab/ckpt/checkpoint")).decode()
    assert 'model_checkpoint_path: "ckpt-2"' in state, state

    # Without: a warning at start, then FAILED naming the expired token.
    st = final[with_ticket]
    assert warned.startswith("HDFS delegation tokens end in"), warned
    assert "--keytab" in warned
    assert st.final_status == "FAILED", st.diagnostics
    assert "HDFS delegation token expired (at 60 s into the job" in st.diagnostics
    # The task's own error (tfyarn.data.fs) says it too.
    assert "the HDFS delegation token for fs.defaultFS was refused" in st.diagnostics
    assert "--principal USER@REALM --keytab FILE" in st.diagnostics
    for line in re.findall(r".*(?:fresh HDFS|HDFS delegation tokens end).*", said):
        print(line)
