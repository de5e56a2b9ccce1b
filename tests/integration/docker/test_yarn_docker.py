"""A job whose tasks run in Docker through YARN itself: the LinuxContainerExecutor
and YARN's Docker runtime, on a cluster of its own started with
``tfyarn cluster start --container_executor``.

Needs Hadoop's setuid ``container-executor``, which no package registry
carries: the test runs when ``TFYARN_CONTAINER_EXECUTOR`` names one (root-owned,
mode 6050, outside /tmp) and is skipped otherwise. Containers run as
``nobody``, so the cluster, Hadoop's jars and the master's Python must be
readable by others: the cluster lives under ``/var/tmp``, the jars are copied
there, and the master runs on the system's Python of the client's version with
the client's packages added (the tasks use the image's Python).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _faults import kill_task, retry_until, task_process

from tfyarn.cluster import ClusterSettings, LocalCluster, _hadoop, _lce

EXECUTOR = os.environ.get("TFYARN_CONTAINER_EXECUTOR", "")
WORK = Path(os.environ.get("TFYARN_TEST_DIR", "/var/tmp/tfyarn-tests"))
PORT_OFFSET = int(os.environ.get("TFYARN_LCE_PORT_OFFSET", "600"))
SYSTEM_PYTHON = Path(f"/usr/bin/python{sys.version_info[0]}.{sys.version_info[1]}")

pytestmark = [
    pytest.mark.skipif(
        not EXECUTOR,
        reason="TFYARN_CONTAINER_EXECUTOR does not name Hadoop's container-executor "
        "(a setuid C binary no package registry has; see README, Docker)",
    ),
    pytest.mark.slow,
]

SCRIPT = """\
import os, sys
print("IN_DOCKER", os.path.exists("/.dockerenv"), sys.executable, os.getuid(), flush=True)
"""
# Waits to be killed in its first two attempts, then succeeds.
RECOVERING = """\
import os, sys, time
attempt = int(os.environ["TFYARN_ATTEMPT"])
print("RAN", os.path.exists("/.dockerenv"), attempt, os.environ["CONTAINER_ID"], flush=True)
if attempt < 2:
    time.sleep(600)
"""


def _python_for_nobody() -> Path:
    """A venv of the system's Python with this client's packages: the master's
    interpreter, readable by containers running as nobody."""
    site = Path(sysconfig.get_paths()["purelib"])
    if not SYSTEM_PYTHON.exists():
        pytest.skip(f"no {SYSTEM_PYTHON} for the master (containers run as nobody)")
    blocked = [p for p in (site,) if _lce.hidden_from_others(p)]
    if blocked:
        pytest.skip(f"{site} is not readable by nobody (containers' user)")
    venv = WORK / "lce-python"
    if not (venv / "bin" / "python").exists():
        subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", str(venv)], check=True)
    pth = venv / "lib" / SYSTEM_PYTHON.name / "site-packages" / "00_client.pth"
    pth.write_text(f"import site; site.addsitedir({str(site)!r})\n")
    return venv / "bin" / "python"


@pytest.fixture(scope="module")
def lce_cluster(docker_engine: None) -> Iterator[dict[str, str]]:
    """The cluster on container-executor; its environment for the CLI."""
    cache = WORK / "lce-cache"
    # Hadoop's jars where nobody can read them (the usual cache is under $HOME).
    if not (cache / "hadoop").exists():
        shutil.copytree(_hadoop.cache_root() / "hadoop", cache / "hadoop")
    saved = os.environ.get("TFYARN_CACHE_DIR")
    os.environ["TFYARN_CACHE_DIR"] = str(cache)
    cluster = LocalCluster(WORK / "lce-cluster")
    try:
        cluster.start(
            ClusterSettings(
                port_offset=PORT_OFFSET, memory_mb=4096, container_executor=EXECUTOR
            )
        )
        yield {**os.environ, **cluster.env_vars()}
    finally:
        cluster.stop(wipe=True)
        if saved is None:
            os.environ.pop("TFYARN_CACHE_DIR", None)
        else:
            os.environ["TFYARN_CACHE_DIR"] = saved


def _cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tfyarn.cli", *args],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def _submit(env: dict[str, str], image: str, script: Path, *options: str) -> str:
    """Submit in the background (``--detach``); the application id."""
    submitted = _cli(
        env, "submit", "--detach", "--worker_memory", "512 MiB", "--preimport=",
        "--python", str(_python_for_nobody()), "--docker_image", image,
        *options, str(script),
    )  # fmt: skip
    out = submitted.stdout + submitted.stderr
    assert submitted.returncode == 0, out
    found = re.search(r"application_\d+_\d+", out)
    assert found, out
    return found[0]


def test_a_task_in_docker_recovers_as_on_the_node(
    lce_cluster: dict[str, str], job_image: str, tmp_path: Path
) -> None:
    """Its script SIGKILLed: restarted in place, in the same Docker container.
    Its runtime SIGKILLed (the container ends): a new Docker container."""
    script = tmp_path / "recovering.py"
    script.write_text(RECOVERING)
    app = _submit(lce_cluster, job_image, script, "--num_worker", "1",
                  "--max_restarts", "2", "--stop_grace", "2")  # fmt: skip
    retry_until("attempt 0", lambda: kill_task(app, "worker:0", attempt=0))
    first = retry_until("attempt 1", lambda: task_process(app, "worker:0", attempt=1))
    runtime = task_process(app, "worker:0", script=False)
    assert runtime.container == first.container
    os.kill(runtime.pid, signal.SIGKILL)
    waited = _cli(lce_cluster, "status", app, "--follow")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    deadline = time.monotonic() + 60
    while True:
        logs = _cli(lce_cluster, "logs", app, "--task", "worker")
        ran = re.findall(r"^RAN (\S+) (\d) (\S+)$", logs.stdout, re.MULTILINE)
        if len(ran) == 3 or time.monotonic() > deadline:
            break
        time.sleep(2)
    ran.sort(key=lambda r: r[1])
    assert [(d, a) for d, a, _ in ran] == [("True", "0"), ("True", "1"), ("True", "2")]
    assert ran[0][2] == ran[1][2] != ran[2][2], ran  # in place, then a new container


def test_tasks_run_in_the_image_through_yarns_docker_runtime(
    lce_cluster: dict[str, str], job_image: str, tmp_path: Path
) -> None:
    script = tmp_path / "in_docker.py"
    script.write_text(SCRIPT)
    app = _submit(lce_cluster, job_image, script, "--num_worker", "2",
                  "--max_restarts", "0")  # fmt: skip
    followed = _cli(lce_cluster, "status", app, "--follow")
    assert followed.returncode == 0, followed.stdout + followed.stderr
    # Both workers ran inside the image, on its Python, as nobody (65534);
    # aggregation hands their logs over one by one.
    want = [("True", "/opt/tfyarn/venv/bin/python", "65534")] * 2
    deadline = time.monotonic() + 60
    while True:
        logs = _cli(lce_cluster, "logs", app, "--task", "worker")
        seen = re.findall(r"^IN_DOCKER (\S+) (\S+) (\d+)$", logs.stdout, re.MULTILINE)
        if seen == want or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert seen == want, logs.stdout + logs.stderr
