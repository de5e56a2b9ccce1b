"""``tfyarn logs -f`` against the real cluster: a running task's output arrives
while it runs (from its NodeManager), and the command ends with the job."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, TFYARN, run_cli, running_job

from tfyarn import client

pytestmark = [pytest.mark.yarn]

JOB = Path(__file__).parent / "jobs" / "live_marker.py"


def test_logs_follow_prints_a_running_tasks_line_and_ends_with_the_job(
    skein_client: Any,
) -> None:
    marker = f"live-marker-{uuid.uuid4().hex[:8]}"
    with running_job(
        skein_client,
        JOB,
        args=["--marker", marker],
        num_worker=1,
        preimport=[],
        worker_memory="512 MiB",
    ) as job:
        follower = subprocess.Popen(
            [*TFYARN, "logs", job.app_id, "--task", "worker:0", "-f"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        try:
            assert follower.stdout is not None
            seen = []
            for line in follower.stdout:  # ends if the follower dies
                seen.append(line)
                if line.strip() == marker:
                    break
            assert seen and seen[-1].strip() == marker, "".join(seen)
            # The job waits for test.done, so the line came from the live task.
            assert not client.status(job.app_id, client=skein_client).done
            assert seen[0].startswith("==> worker:0 [container_"), seen[0]
            # Without -f, a running job's logs show what is there now.
            now = run_cli("logs", job.app_id, "--task", "worker:0", timeout=120)
            assert now.returncode == 0, now.stderr
            assert marker in now.stdout.splitlines(), now.stdout
            assert f"{marker} bye" not in now.stdout
            skein_client.connect(job.app_id).kv["test.done"] = b"1"
            rest, err = follower.communicate(timeout=300)
        finally:
            if follower.poll() is None:
                follower.kill()
                follower.communicate()
        final = job.wait(timeout=300)
    assert final.succeeded
    assert follower.returncode == 0, err
    # What the task printed after the last poll came too, once, before the end.
    assert rest.splitlines().count(f"{marker} bye") == 1, rest + err
