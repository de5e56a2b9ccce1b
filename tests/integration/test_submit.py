"""`tfyarn submit|status|list|logs|kill` against the local YARN cluster.

The task scripts here are plain Python (no TensorFlow import) so the tests are
about tfyarn, and cheap on a 2-core machine.
"""

from __future__ import annotations

import getpass
import json
import re
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import SMALL, run_cli, running_job

import tfyarn
from tfyarn import client
from tfyarn.client.master_code import master_zip
from tfyarn.client.pyenv import cache
from tfyarn.contract import jvm
from tfyarn.errors import JobFailedError

pytestmark = pytest.mark.yarn

# The scripts import no TensorFlow, so their interpreters do not either: at
# 8 CPU-seconds an import, the 21 tasks here would spend about 3 CPU-minutes.
SMALL_ARGS = [*(a for k, v in SMALL.items() for a in (f"--{k}", v)), "--no_preimport"]
PLAIN = {
    "ps_memory": "256 MiB",
    "worker_memory": "256 MiB",
    "am_memory": "512 MiB",
    "preimport": [],
}


@pytest.fixture
def yarn(skein_client: Any) -> Any:
    """The session's skein client (tests/integration/conftest.py)."""
    return skein_client


def write(tmp_path: Path, name: str, body: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return str(path)


HELLO = """\
import json, os, time
time.sleep(3)  # long enough for the client to see the formed cluster
cfg = json.loads(os.environ["TF_CONFIG"])
print("hello from", cfg["task"]["type"], cfg["task"]["index"], "args", os.sys.argv[1:])
"""

FAILING = """\
import json, os, sys, time
task = json.loads(os.environ["TF_CONFIG"])["task"]
if task["type"] == "worker" and task["index"] == 1:
    print("worker 1 about to fail", file=sys.stderr)
    raise SystemExit("boom: worker one cannot go on")
time.sleep(1200)  # the lead would run long: the failure must end the job
"""


def test_submit_follows_a_job_to_success(tmp_path: Path) -> None:
    script = write(tmp_path, "hello.py", HELLO)
    done = run_cli(
        "submit", *SMALL_ARGS, "--worker_memory", "256 MiB",
        "--num_worker", "2", "--name", "test-hello", script, "--greeting", "hi",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    app_id = re.search(r"application_\d+_\d+", out)
    assert app_id, out
    # The id comes first, with the next commands, before any progress
    assert out.index(app_id.group()) < out.index("YARN:")
    assert f"tfyarn logs {app_id.group()}" in out
    assert "YARN: RUNNING" in out
    assert re.search(r"containers worker 2/\d/\d", out), out
    assert "cluster formed" in out
    assert re.search(r"worker:1 (ALLOCATED|REGISTERED|RUNNING)", out), out
    assert "final status: SUCCEEDED" in out

    logs = run_cli("logs", app_id.group(), "--task", "worker:1")
    assert logs.returncode == 0, logs.stderr
    assert "hello from worker 1 args ['--greeting', 'hi']" in logs.stdout
    assert "hello from worker 0" not in logs.stdout


def test_python_api_raises_job_failed(yarn: Any, tmp_path: Path) -> None:
    script = write(tmp_path, "failing.py", FAILING)
    # A ps and a lead that would run long: the failure alone ends the job.
    with pytest.raises(JobFailedError) as err:
        tfyarn.submit(
            script, num_ps=1, num_worker=2, max_restarts=0, wait=True, client=yarn,
            **PLAIN,
        )  # fmt: skip
    assert err.value.final_status == "FAILED"
    # The master's diagnostics name the task, its exit code and its stderr.
    diagnostics = err.value.diagnostics
    assert "worker:1" in diagnostics and "exited with code 1" in diagnostics
    assert "boom: worker one cannot go on" in diagnostics, diagnostics


def test_unsatisfiable_memory_is_refused_before_submitting(
    yarn: Any, tmp_path: Path
) -> None:
    script = write(tmp_path, "hello.py", HELLO)
    before = {j.app_id for j in client.list_jobs(all_states=True, client=yarn)}
    done = run_cli("submit", "--worker_memory", "1000 GiB", script)
    assert done.returncode == 1
    assert done.stderr.startswith(
        "Error: --worker_memory 1024000 MiB is more than any node offers"
    ), done.stderr
    assert "Traceback" not in done.stderr
    after = {j.app_id for j in client.list_jobs(all_states=True, client=yarn)}
    assert after == before, "a job was submitted"


def test_bad_input_is_refused_without_a_traceback(tmp_path: Path) -> None:
    script = write(tmp_path, "hello.py", HELLO)
    for argv, message in [
        (["--num_ps", "1", "--num_worker", "0", script], "needs workers"),
        (["--num_worker", "-2", script], "num_worker"),
        ([str(tmp_path / "missing.py")], "script not found"),
    ]:
        done = run_cli("submit", *argv)
        assert done.returncode == 1, (argv, done.stderr)
        assert done.stderr.startswith("Error: ") and message in done.stderr
        assert "Traceback" not in done.stderr


def test_status_list_logs_kill_on_a_running_job(yarn: Any, tmp_path: Path) -> None:
    script = write(
        tmp_path,
        "sleeper.py",
        """\
        import time
        print("sleeper up", flush=True)
        time.sleep(300)
        """,
    )
    # A budget to spend: a kill must not be taken for a failure and restarted.
    with running_job(yarn, script, num_worker=1, max_restarts=2, **PLAIN) as job:
        deadline = time.monotonic() + 120
        while True:
            st = client.status(job.app_id, client=yarn)
            tasks = st.master.tasks if st.master else []
            if any(t.state == "RUNNING" for t in tasks):
                break
            assert time.monotonic() < deadline, f"never RUNNING: {st}"
            time.sleep(1)

        status = run_cli("status", job.app_id)
        assert status.returncode == 0, status.stderr
        assert "state:        RUNNING" in status.stdout
        assert re.search(r"worker:0\s+RUNNING", status.stdout), status.stdout

        as_json = run_cli("status", job.app_id, "--json")
        assert json.loads(as_json.stdout)["master"]["tasks"][0]["task"] == "worker:0"

        listed = run_cli("list")
        assert job.app_id in listed.stdout and "test-sleeper" in listed.stdout

        logs = run_cli("logs", job.app_id, "--task", "worker:0")
        assert logs.returncode == 0, logs.stderr
        assert "sleeper up" in logs.stdout

        killed = run_cli("kill", job.app_id)
        assert killed.returncode == 0, killed.stderr
        assert "KILLED" in killed.stdout
        final = client.status(job.app_id, client=yarn)
        assert final.state == "KILLED"
        assert job.app_id not in run_cli("list").stdout

    # Once ended, status reads the master's record on HDFS: who stopped it.
    ended = run_cli("status", "--json", job.app_id)
    assert ended.returncode == 0, ended.stderr
    recorded = json.loads(ended.stdout)
    assert recorded["state"] == "KILLED", recorded
    master = recorded["master"]
    assert master is not None, recorded["record_missing"]
    assert master["phase"] == "KILLED"
    assert master["diagnostics"] == "stopped by tfyarn kill"
    assert [t["state"] for t in master["tasks"]] == ["KILLED"], master["tasks"]


def test_status_of_an_unknown_application() -> None:
    done = run_cli("status", "application_1_9999")
    assert done.returncode == 1
    assert "no application application_1_9999" in done.stderr


def test_env_files_and_the_master_code_reach_their_containers(
    yarn: Any, local_cluster: Any, tmp_path: Path
) -> None:
    data = tmp_path / "words.txt"
    data.write_text("shipped with the job\n")
    # The job ends when the worker does; the worker waits until the ps has
    # printed (the containers share this host), or a ps that starts late is
    # stopped before its first line.
    printed = tmp_path / "ps-printed"
    script = write(
        tmp_path,
        "show.py",
        f"""\
        import json, os, pathlib, time
        print("GREETING", os.environ["GREETING"], flush=True)
        print("FILE", open("words.txt").read().strip(), flush=True)
        printed = pathlib.Path({str(printed)!r})
        if json.loads(os.environ["TF_CONFIG"])["task"]["type"] == "ps":
            printed.touch()
        deadline = time.monotonic() + 300
        while not printed.exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        """,
    )
    with running_job(
        yarn,
        script,
        num_ps=1,
        num_worker=1,
        env={"GREETING": "hi there"},
        files=[str(data)],
        worker_grace=5,
        **PLAIN,
    ) as job:
        job.wait()
        for task in ("ps:0", "worker:0"):
            text = job.logs(task)
            assert "GREETING hi there" in text, text
            assert "FILE shipped with the job" in text, text
        # skein's Java AM ran with tfyarn's JVM options (tfyarn.contract.jvm).
        picked = f"Picked up {jvm.TOOL_OPTIONS}: {jvm.tool_options()}"
        assert picked in job.logs(), "skein's AM did not get the JVM options"
    # The master's code came from the user's HDFS cache (uploaded once per
    # version), and the node keeps it unpacked for later jobs (PRIVATE).
    name = Path(master_zip()).name
    assert cache.has(name, cache.MASTER_PATH), cache.url_of(name, cache.MASTER_PATH)
    user = getpass.getuser()
    kept = (
        local_cluster.base_dir / "data" / "nm-local" / "usercache" / user / "filecache"
    )
    assert list(kept.glob(f"*/{name}/__main__.py")), sorted(kept.glob("*/*"))
