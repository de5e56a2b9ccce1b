"""A task asked to run in Docker on a NodeManager without YARN's Docker runtime.

The local cluster's NodeManager uses the DefaultContainerExecutor, which
ignores ``YARN_CONTAINER_RUNTIME_*``: the task's command (the image's
interpreter, ``docker_python``) then runs on the node and is not found. The
container ends before any task could report, so the only account is YARN's
diagnostics; the master must turn them into words naming the image, the
interpreter and the container executor, not a bare exit code.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from helpers import REPO, TFYARN

from tfyarn.contract.exit_codes import MEANING

pytestmark = [pytest.mark.yarn, pytest.mark.slow]


def test_the_master_names_why_a_docker_task_never_started(tmp_path: Path) -> None:
    script = tmp_path / "never.py"
    script.write_text("raise SystemExit('a task must not run')\n")
    done = subprocess.run(
        [
            *TFYARN,
            "submit",
            "--am_memory",
            "512 MiB",
            "--worker_memory",
            "256 MiB",
            "--max_restarts",
            "0",
            "--registration_timeout",
            "120",
            "--docker_image",
            "tfyarn-test/absent:1",
            "--docker_python",
            "/opt/tfyarn-absent/bin/python",
            str(script),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=REPO,
        check=False,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 1, out
    assert "worker:0" in out and "was lost" in out, out
    meaning = [line for line in out.splitlines() if MEANING in line]
    assert any(
        "Docker image tfyarn-test/absent:1" in line
        and "/opt/tfyarn-absent/bin/python" in line
        and "LinuxContainerExecutor" in line
        for line in meaning
    ), out
    assert "a task must not run" not in out
