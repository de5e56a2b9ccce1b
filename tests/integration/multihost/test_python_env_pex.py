"""``--python_env app.pex`` on the multi-host cluster, whose hosts lack the client's venv.

The test builds the pex itself with pex (a dev dependency), from the packages of
this session's own environment (``--venv-repository``: nothing is downloaded)
and tfyarn's sources: tfyarn's dependencies without TensorFlow, TensorBoard and
pyarrow, which neither the master nor the runtime imports, so the pex is about
30 MB and builds in seconds. ``TFYARN_TEST_PEX_FULL=1`` builds it with all of
them instead (about 430 MB, about a minute) and has the script run a
TensorFlow op. The script (``tests/integration/jobs/pex_probe.py``) checks that
it runs from the virtualenv pex made of the pex on its node. The first job's
workers run pre-started (``--preimport yaml``), the second's plainly.
"""

from __future__ import annotations

import importlib.metadata
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, run_cli

from tfyarn.cluster import LocalCluster

from . import _closure

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs]

PROBE = str(REPO / "tests" / "integration" / "jobs" / "pex_probe.py")
FULL = os.environ.get("TFYARN_TEST_PEX_FULL") == "1"
# Three workers of 2 GiB on hosts of 3 GiB, the master (512 MiB) beside one:
# one worker per host, so every host makes the pex's venv, one of them while
# the master does too (pex's lock).
SMALL = (
    "--num_worker",
    "3",
    "--worker_memory",
    "2g",
    "--am_memory",
    "512m",
    "--max_am_attempts",
    "1",
)
APP_ID = re.compile(r"Submitted (application_\d+_\d+)")


def _venv_with_the_dependencies() -> Path:
    """The virtualenv whose site-packages holds tfyarn's dependencies (this
    session's, or the one a worktree's venv stacks on)."""
    site = Path(str(importlib.metadata.distribution("skein").locate_file("")))
    prefix = site.parents[2]  # lib/pythonX.Y/site-packages
    assert (prefix / "pyvenv.cfg").is_file(), f"{prefix} is not a virtualenv"
    return prefix


def _build(out: Path, src: Path, *, shebang: str, requirements: list[str]) -> float:
    began = time.monotonic()
    command = [sys.executable, "-m", "pex", "--venv", "-D", str(src)]
    if requirements:
        command += ["--venv-repository", str(_venv_with_the_dependencies())]
    done = subprocess.run(
        [*command, *requirements, "--python-shebang", shebang, "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return time.monotonic() - began


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _closure.tfyarn_sources(tmp_path_factory.mktemp("pex-src"))


def _submit(*argv: str) -> tuple[int, str, float]:
    began = time.monotonic()
    done = run_cli("submit", *argv, timeout=900)
    return done.returncode, done.stdout + done.stderr, time.monotonic() - began


def _logs(app_id: str, task: str, want: str) -> str:
    deadline = time.monotonic() + 120  # log aggregation takes a few seconds
    while True:
        done = run_cli("logs", app_id, "--task", task, timeout=300)
        text = done.stdout + done.stderr
        if want in text or time.monotonic() > deadline:
            return text
        time.sleep(5)


@pytest.mark.slow
def test_a_pex_runs_master_runtime_and_script(
    local_cluster: LocalCluster, sources: Path, tmp_path: Path
) -> None:
    pex = tmp_path / "app.pex"
    # The nodes share this machine's filesystem: the test's base interpreter
    # is there at the same path (a real cluster's pex names `python3.11`).
    took = _build(
        pex,
        sources,
        shebang=os.path.realpath(sys.executable),
        requirements=_closure.requirements(full=FULL),
    )
    size = pex.stat().st_size / 2**20
    print(f"pex built in {took:.1f} s, {size:.0f} MiB (full: {FULL})")
    env = ("--env", "PEX_PROBE_TF=1") if FULL else ()

    code, out, first = _submit(
        "--python_env", str(pex), "--preimport", "yaml", *env, *SMALL, PROBE
    )
    assert code == 0, out[-4000:]
    assert "final status: SUCCEEDED" in out
    app_id = APP_ID.search(out)
    assert app_id, out[-2000:]
    hosts = set()
    for task in ("worker:0", "worker:1", "worker:2"):
        logs = _logs(app_id.group(1), task, "pex_probe OK")
        assert "pex_probe OK" in logs, logs[-3000:]
        hosts.update(re.findall(r" on (node\d)\.", logs))
    assert len(hosts) >= 2, hosts  # the venv was made on several hosts
    print(f"first submit to the end: {first:.1f} s (workers on {sorted(hosts)})")

    # Again: the pex is in the HDFS cache and each node has its venv.
    code, out, again = _submit(
        "--python_env", str(pex), "--no_preimport", *env, *SMALL, PROBE
    )
    assert code == 0, out[-4000:]
    assert "uploaded" not in out, out[-3000:]
    app_id = APP_ID.search(out)
    assert app_id
    logs = _logs(app_id.group(1), "worker:2", "pex_probe OK")
    assert "pex_probe OK" in logs, logs[-3000:]
    print(f"second submit to the end: {again:.1f} s")


def test_a_node_without_the_pexs_python_is_named(
    local_cluster: LocalCluster, sources: Path, tmp_path: Path
) -> None:
    """A pex whose shebang names a Python no node has: the master's container
    says which node lacks which interpreter, and the job fails."""
    pex = tmp_path / "nopython.pex"
    _build(pex, sources, shebang="/usr/bin/env tfyarn-no-such-python3", requirements=[])
    code, out, _ = _submit("--python_env", str(pex), "--no_preimport", *SMALL, PROBE)
    assert code == 1, out[-3000:]
    assert "exit code 127" in out, out[-3000:]
    app_id = APP_ID.search(out)
    assert app_id
    text = _logs(app_id.group(1), "master", "cannot run the shipped pex")
    assert "cannot run the shipped pex" in text, text[-3000:]
    assert "tfyarn-no-such-python3" in text
    assert re.search(r"node node\d\.", text), text[-3000:]
