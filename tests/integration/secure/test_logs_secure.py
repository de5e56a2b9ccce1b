"""``tfyarn logs`` on the secure local cluster, where log aggregation is off:
the finished task's output comes from the NodeManager."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.kerberos, pytest.mark.yarn, pytest.mark.hdfs]

TFYARN = str(Path(sys.executable).parent / "tfyarn")


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [TFYARN, *argv],
        env=dict(os.environ),  # the fixture's: this cluster, the user's ticket
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_logs_shows_a_finished_tasks_output_without_log_aggregation(
    tmp_path: Path,
) -> None:
    marker = f"secure-logs-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "hello.py"
    script.write_text(f"print({marker!r})\n")
    done = run(
        "submit",
        "--num_worker",
        "1",
        "--no_preimport",
        "--worker_memory",
        "512m",
        str(script),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = re.search(r"application_\d+_\d+", done.stdout)
    assert found, done.stdout
    app_id = found.group(0)
    # `yarn logs` alone fails here: nothing is aggregated.
    yarn = subprocess.run(
        ["yarn", "logs", "-applicationId", app_id],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert marker not in yarn.stdout

    logs = run("logs", app_id, "--task", "worker:0")
    assert logs.returncode == 0, logs.stdout + logs.stderr
    head = logs.stdout.splitlines()[0]
    assert head.startswith("==> worker:0 [container_") and "worker.log" in head, head
    assert marker in logs.stdout.splitlines(), logs.stdout

    every = run("logs", app_id)
    assert every.returncode == 0, every.stderr
    tasks = re.findall(r"^==> (\S+)", every.stdout, re.MULTILINE)
    assert tasks[0] == "master" and "worker:0" in tasks, tasks
