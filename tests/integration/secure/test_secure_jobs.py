"""Jobs on the secure cluster: who the client logs in as, and tokens.

The client refuses at once without a ticket, logs in from a keytab with no
ticket cache at all, explains a wrong keytab and a stopped KDC; a task has no
ticket, only the HDFS delegation tokens obtained at submission, and reads and
writes HDFS with them. The stopped-KDC test restarts this package's KDC.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from urllib.parse import urlparse

import pytest

from tfyarn.cluster import LocalCluster
from tfyarn.data import fs

pytestmark = [pytest.mark.kerberos, pytest.mark.yarn, pytest.mark.hdfs]

TFYARN = str(Path(sys.executable).parent / "tfyarn")
# A one-line refusal: no Java exception class or stack frame in it.
JAVA_NOISE = re.compile(r"\bat [\w.$]+\(|Exception:|Traceback")


def tfyarn(
    *argv: str, env: dict[str, str] | None = None, timeout: float = 300
) -> tuple[subprocess.CompletedProcess[str], float]:
    began = time.monotonic()
    done = subprocess.run(
        [TFYARN, *argv],
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return done, time.monotonic() - began


@pytest.fixture
def no_ticket(tmp_path: Path) -> dict[str, str]:
    """An environment whose ticket cache is empty: no ticket at all."""
    empty = tmp_path / "empty-ccache"
    empty.write_bytes(b"")
    return {"KRB5CCNAME": f"FILE:{empty}"}


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "hello.py"
    path.write_text("print('hello from a secure task')\n")
    return path


def keytab_login(cluster: LocalCluster) -> list[str]:
    kerberos = cluster.secure()
    return [
        "--principal",
        kerberos.user_principal,
        "--keytab",
        str(kerberos.user_keytab),
    ]


def refusal(done: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused command printed, checked to be one and Java-free."""
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert not JAVA_NOISE.search(lines[0]), lines[0]
    return lines[0]


def test_without_a_ticket_submit_status_and_data_refuse_at_once(
    local_cluster: LocalCluster, no_ticket: dict[str, str], script: Path
) -> None:
    realm = local_cluster.secure().kdc.realm
    submit, took = tfyarn("submit", "--no_preimport", str(script), env=no_ticket)
    line = refusal(submit)
    assert "no valid Kerberos ticket: run `kinit " in line and f"@{realm}`" in line
    assert "--keytab" in line
    assert took < 15, f"submit took {took:.1f} s to refuse"  # no driver, no retries
    for command in ("status", "logs"):
        done, took = tfyarn(command, "application_1_1", env=no_ticket)
        assert "no valid Kerberos ticket: run `kinit " in refusal(done), command
        assert took < 15, f"{command} took {took:.1f} s to refuse"
    for command, url in (("ls", "hdfs:///"), ("count", "hdfs:///tmp/x-*")):
        done, took = tfyarn("data", command, url, env=no_ticket)
        line = refusal(done)
        assert "no valid Kerberos ticket for hdfs://" in line, line
        assert f"`kinit {local_cluster.secure().user}@{realm}`" in line, line
        assert took < 15
    # The same commands with the user's ticket get past authentication.
    listed, _ = tfyarn("data", "ls", "hdfs:///")
    assert listed.returncode == 0, listed.stderr


def test_a_wrong_keytab_is_refused_with_the_reason(
    local_cluster: LocalCluster, no_ticket: dict[str, str], script: Path, tmp_path: Path
) -> None:
    kerberos = local_cluster.secure()
    principal = kerberos.user_principal
    # The principal is not in the keytab: refused before any driver starts.
    other = kerberos.kdc.keytab("nn")
    done, _ = tfyarn(
        "submit", "--principal", principal, "--keytab", str(other), str(script),
        env=no_ticket,
    )  # fmt: skip
    line = refusal(done)
    assert f"the keytab {other} holds no key for {principal}" in line
    assert "nn/localhost@" in line
    # The right principal with keys the KDC never issued (another KDC's keytab).
    forged = tmp_path / "forged.keytab"
    made = subprocess.run(
        ["ktutil"],
        input=(
            f"addent -password -p {principal} -k 1 -e aes256-cts-hmac-sha1-96\n"
            f"not-the-password\nwkt {forged}\nquit\n"
        ),
        capture_output=True,
        text=True,
        check=False,
    )
    assert forged.is_file(), made.stderr
    done, took = tfyarn(
        "submit", "--principal", principal, "--keytab", str(forged), str(script),
        env=no_ticket,
    )  # fmt: skip
    line = refusal(done)
    assert f"the KDC refused the key of {principal} in {forged}" in line
    assert took < 60
    # A keytab that is not there, or not readable.
    done, _ = tfyarn(
        "submit", *keytab_login(local_cluster)[:2], "--keytab", "/nonexistent.keytab",
        str(script), env=no_ticket,
    )  # fmt: skip
    assert refusal(done) == "Error: keytab not found: /nonexistent.keytab"


TASK = """\
import os, subprocess, sys
from tfyarn.data import fs

src, dst = sys.argv[1], sys.argv[2]
tokens = os.environ.get("HADOOP_TOKEN_FILE_LOCATION", "")
print("token file:", tokens, os.path.isfile(tokens), flush=True)
print("klist -s:", subprocess.run(["klist", "-s"]).returncode, flush=True)
data = b"".join(fs.resolve(src).read_chunks(src))
with fs.resolve(dst).open_output(dst) as out:
    out.write(data.upper())
print("copied", len(data), "bytes", flush=True)
assert open("in.txt", "rb").read() == data  # shipped with --files
"""


@pytest.mark.slow
def test_a_task_reads_and_writes_hdfs_with_tokens_only(
    local_cluster: LocalCluster, no_ticket: dict[str, str], tmp_path: Path
) -> None:
    base = f"/tmp/tfyarn-tokens-{uuid.uuid4().hex[:8]}"
    src_fs = fs.resolve(f"hdfs://{base}")
    src_fs.mkdirs(f"hdfs://{base}")
    with src_fs.open_output(f"hdfs://{base}/in.txt") as put:
        put.write(b"read with a delegation token\n")
    # Not copy.py: next to the script, it would shadow the stdlib's copy.
    task = tmp_path / "hdfs_roundtrip.py"
    task.write_text(TASK)
    # The output goes through an extra name for the same NameNode, by host
    # name: its token must be obtained (hdfs_namenodes) and found (by ip:port).
    port = urlparse(fs.default_fs() or "").port
    assert port, fs.default_fs()
    namenode = f"hdfs://localhost:{port}"
    dst = f"{namenode}{base}/out.txt"
    done, took = tfyarn(
        "submit",
        *keytab_login(local_cluster),
        "--hdfs_namenodes", namenode,
        # Checked to exist by the client itself (GSSAPI from the keytab).
        "--files", f"hdfs://{base}/in.txt",
        "--num_worker", "1", "--no_preimport", "--worker_memory", "512m",
        # No ticket in the task, whatever the host's default cache holds.
        "--env", "KRB5CCNAME=FILE:/nonexistent/tfyarn-no-ticket",
        str(task), f"hdfs://{base}/in.txt", dst,
        env=no_ticket,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "final status: SUCCEEDED" in said
    print(f"token-only job took {took:.1f} s")
    app_id = re.search(r"application_\d+_\d+", done.stdout)
    assert app_id, said
    logs = local_cluster.logs_dir / "containers" / app_id.group(0)
    task_said = "".join(
        p.read_text(errors="replace") for p in logs.rglob("*") if p.is_file()
    )
    assert "klist -s: 1" in task_said, task_said[
        -3000:
    ]  # no Kerberos ticket in the task
    assert re.search(r"token file: \S+ True", task_said), task_said[-3000:]
    assert "copied 29 bytes" in task_said
    written = b"".join(src_fs.read_chunks(f"hdfs://{base}/out.txt"))
    assert written == b"READ WITH A DELEGATION TOKEN\n"


READ_SECRET = """\
import sys

from tfyarn.data import fs

url = sys.argv[1]
print(b"".join(fs.resolve(url).read_chunks(url)).decode())
"""


@pytest.mark.slow
def test_a_job_cannot_read_a_path_its_user_may_not(
    local_cluster: LocalCluster, no_ticket: dict[str, str], tmp_path: Path
) -> None:
    """HDFS enforces the job's user (the delegation tokens' owner) in its
    tasks, and the job's diagnostics say so plainly, naming that user."""
    secure = local_cluster.secure()
    other = "tfyarnother"  # a second user of the realm, no superuser
    principal = f"{other}@{secure.kdc.realm}"
    keytab = secure.kdc.add_principal(principal, tmp_path / "other.keytab")
    base = f"/tmp/tfyarn-private-{uuid.uuid4().hex[:8]}"
    owner = fs.resolve(f"hdfs://{base}")  # the cluster's user, with its ticket
    owner.mkdirs(f"hdfs://{base}")
    with owner.open_output(f"hdfs://{base}/secret.txt") as out:
        out.write(b"not for tfyarnother\n")
    owner.set_permission(f"hdfs://{base}", 0o700)
    # skein stages the job's files in the submitter's HDFS home.
    owner.mkdirs(f"hdfs:///user/{other}")
    owner.set_owner(f"hdfs:///user/{other}", other)
    task = tmp_path / "read_secret.py"
    task.write_text(READ_SECRET)
    done, took = tfyarn(
        "submit", "--principal", principal, "--keytab", str(keytab),
        "--num_worker", "1", "--no_preimport", "--worker_memory", "512m",
        "--max_restarts", "0",
        str(task), f"hdfs://{base}/secret.txt",
        env=no_ticket,
    )  # fmt: skip
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "final status: FAILED" in said, said[-3000:]
    assert "not for tfyarnother" not in said
    denied = [line for line in said.splitlines() if "permission denied for" in line]
    assert denied, said[-3000:]
    assert f"on hdfs://{base}/secret.txt as user '{other}'" in denied[0], denied[0]
    print(f"refused job took {took:.1f} s: {denied[0][:200]}")


def test_a_stopped_kdc_is_named_for_keytab_ticket_and_hdfs(
    local_cluster: LocalCluster, no_ticket: dict[str, str], script: Path, tmp_path: Path
) -> None:
    """Last in this package: it stops the fixture's KDC, and restarts it."""
    kerberos = local_cluster.secure()
    kdc = kerberos.kdc
    # A cache with the TGT alone: every service ticket must come from the KDC.
    tgt_only = tmp_path / "tgt-only"
    kdc.kinit(kerberos.user_principal, kerberos.user_keytab, tgt_only)
    with_tgt = {"KRB5CCNAME": f"FILE:{tgt_only}"}
    said = f"the Kerberos KDC of realm {kdc.realm} did not answer"
    kdc.stop()
    try:
        assert kdc.pid() is None
        submit, took = tfyarn(
            "submit", *keytab_login(local_cluster), str(script), env=no_ticket
        )
        assert said in refusal(submit)
        print(f"keytab login, KDC stopped: refused in {took:.1f} s")
        status, took = tfyarn("status", "application_1_1", env=with_tgt)
        assert said in refusal(status)
        print(f"ticket cache, KDC stopped: refused in {took:.1f} s")
        assert took < 60
        listed, took = tfyarn("data", "ls", "hdfs:///", env=with_tgt)
        assert "the Kerberos KDC did not answer" in refusal(listed)
        assert took < 30
    finally:
        kdc.start()
    assert tfyarn("data", "ls", "hdfs:///")[0].returncode == 0
