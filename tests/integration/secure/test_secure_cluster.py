"""The secure local cluster: Kerberos for HDFS and YARN, for real.

Every command runs with the environment ``tfyarn cluster env`` exports (the
fixture put it in ``os.environ``): the user's ticket in the cluster's own
cache, ``KRB5_CONFIG``, and the krb5.conf flag for the JVMs.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from tfyarn.cluster import LocalCluster

from .conftest import SECURE_PORT_OFFSET, TOKEN_LIFETIME_S

pytestmark = [pytest.mark.kerberos, pytest.mark.yarn, pytest.mark.hdfs]


def run(
    *argv: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        list(argv),
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def no_ticket(tmp_path: Path) -> dict[str, str]:
    """KRB5CCNAME pointing to an empty cache: no ticket at all."""
    empty = tmp_path / "empty-ccache"
    empty.write_bytes(b"")
    return {"KRB5CCNAME": f"FILE:{empty}"}


def test_hdfs_put_and_cat_work_with_the_users_ticket(tmp_path: Path) -> None:
    local = tmp_path / "hello.txt"
    local.write_text("hello, secure HDFS\n")
    path = f"/tmp/tfyarn-secure-{uuid.uuid4().hex[:8]}.txt"
    assert run("hdfs", "dfs", "-mkdir", "-p", "/tmp").returncode == 0
    put = run("hdfs", "dfs", "-put", str(local), path)
    assert put.returncode == 0, put.stderr
    cat = run("hdfs", "dfs", "-cat", path)
    assert cat.returncode == 0, cat.stderr
    assert cat.stdout == "hello, secure HDFS\n"


def test_hdfs_refuses_a_client_without_a_ticket(tmp_path: Path) -> None:
    refused = run("hdfs", "dfs", "-ls", "/", env=no_ticket(tmp_path))
    assert refused.returncode != 0
    assert "Client cannot authenticate via:[TOKEN, KERBEROS]" in refused.stderr
    # The same command with the user's ticket: the refusal was the ticket's.
    assert run("hdfs", "dfs", "-ls", "/").returncode == 0


def test_auth_to_local_maps_daemon_principals_to_the_daemons_user(
    local_cluster: LocalCluster,
) -> None:
    kerberos = local_cluster.secure()
    realm, user = kerberos.kdc.realm, kerberos.user
    names = [f"{s}/localhost@{realm}" for s in ("nn", "dn", "rm", "nm", "HTTP")]
    done = run(
        "hadoop",
        "org.apache.hadoop.security.HadoopKerberosName",
        *names,
        f"{user}@{realm}",
    )
    assert done.returncode == 0, done.stderr
    for name in [*names, f"{user}@{realm}"]:
        assert f"Name: {name} to {user}\n" in done.stdout


def test_status_reports_the_realm_and_probes_hdfs_over_https(
    local_cluster: LocalCluster,
) -> None:
    done = run(
        str(Path(sys.executable).parent / "tfyarn"),
        "cluster",
        "status",
        "--json",
        "--base-dir",
        str(local_cluster.base_dir),
    )
    assert done.returncode == 0, done.stderr
    status = json.loads(done.stdout)
    kerberos = status["kerberos"]
    assert kerberos["realm"] == local_cluster.secure().kdc.realm
    assert kerberos["kdc"] == f"127.0.0.1:{10088 + SECURE_PORT_OFFSET}"
    assert kerberos["kdc_pid"] and Path(f"/proc/{kerberos['kdc_pid']}").exists()
    assert Path(kerberos["user_keytab"]).stat().st_mode & 0o077 == 0
    # HTTPS_ONLY: the NameNode's HTTP port is closed, its HTTPS JMX answers.
    assert status["hdfs"] is not None and status["hdfs"]["live_datanodes"] == 1
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", 9870 + SECURE_PORT_OFFSET)) != 0
    assert status["web_uis"]["NameNode"].startswith("https://")


def test_a_skein_application_with_a_keytab_succeeds_with_short_tokens(
    local_cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import skein

    kerberos = local_cluster.secure()
    # No ticket in the cache: the driver must log in from the keytab.
    for name, value in no_ticket(tmp_path).items():
        monkeypatch.setenv(name, value)
    marker = f"secure-hello-{uuid.uuid4().hex[:8]}"
    spec = skein.ApplicationSpec(
        name="tfyarn-secure-test",
        master=skein.Master(
            resources=skein.Resources(memory="256 MiB", vcores=1),
            script=f"echo {marker}; exit 0",
        ),
    )
    driver_log = tmp_path / "driver.log"
    with skein.Client(
        principal=kerberos.user_principal,
        keytab=str(kerberos.user_keytab),
        log=str(driver_log),
        log_level="info",
    ) as client:
        app_id = client.submit(spec)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            report = client.application_report(app_id)
            if str(report.state) in ("FINISHED", "FAILED", "KILLED"):
                break
            time.sleep(1)
        else:
            client.kill_application(app_id)
            pytest.fail(f"{app_id} not finished within 120 s: {report.state}")
    assert (str(report.state), str(report.final_status)) == (
        "FINISHED",
        "SUCCEEDED",
    ), report.diagnostics
    # Log aggregation is off: the output stays in the NodeManager's log dirs.
    app_logs = local_cluster.logs_dir / "containers" / app_id
    assert marker in "".join(p.read_text() for p in app_logs.rglob("*.log"))
    # The HDFS delegation token skein got lives --token-lifetime, not 7 days.
    created = re.search(
        r"Created token for .*issueDate=(\d+), maxDate=(\d+)", driver_log.read_text()
    )
    assert created, "the driver logged no HDFS delegation token"
    issued, max_date = int(created.group(1)), int(created.group(2))
    assert max_date - issued == TOKEN_LIFETIME_S * 1000


def test_tfyarn_submit_with_the_users_ticket_succeeds(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    marker = f"secure-task-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "hello.py"
    script.write_text(f"print({marker!r})\n")
    done = run(
        str(Path(sys.executable).parent / "tfyarn"),
        "submit",
        "--num_worker",
        "1",
        "--no_preimport",
        "--worker_memory",
        "512m",
        str(script),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "final status: SUCCEEDED" in done.stdout + done.stderr
    app_id = re.search(r"application_\d+_\d+", done.stdout)
    assert app_id, done.stdout
    # No log aggregation: the task's output is in the NodeManager's log dirs.
    app_logs = local_cluster.logs_dir / "containers" / app_id.group(0)
    logs = [p for p in app_logs.rglob("*") if p.is_file()]
    assert marker in "".join(p.read_text(errors="replace") for p in logs)
