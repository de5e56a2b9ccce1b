"""``--python_env`` on the multi-host cluster, whose hosts lack the client's venv.

The first job packs the environment the client runs in (``auto``, with
tfyarn's editable sources as a layer) and uploads it to the HDFS cache; the
next job reuses it. That client runs from a virtualenv the test makes of
tfyarn and its dependencies without TensorFlow, TensorBoard and pyarrow
(``_closure.small_venv``, about 80 MB: packing, uploading and unpacking this
session's 2 GB venv took four minutes of a loaded CI run and the script needs
none of it); ``TFYARN_TEST_ENV_FULL=1`` packs this session's whole venv
instead. Jobs are tiny (``tests/integration/jobs/env_probe.py``: no TensorFlow
import) and the script itself checks that its interpreter, tfyarn and grpc
came from the container's own directory, not from the client's environment
on the shared filesystem.
"""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from helpers import REPO, run_cli

from tfyarn.cluster import LocalCluster

from . import _closure

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs]

PROBE = str(REPO / "tests" / "integration" / "jobs" / "env_probe.py")
FULL = os.environ.get("TFYARN_TEST_ENV_FULL") == "1"
# A tiny job: two workers (one per host, as the master takes room too).
SMALL = (
    "--no_preimport",
    "--num_worker",
    "2",
    "--worker_memory",
    "1g",
    "--am_memory",
    "512m",
    "--max_am_attempts",
    "1",
)
APP_ID = re.compile(r"Submitted (application_\d+_\d+)")


def _submit(*argv: str, python: str = "") -> tuple[int, str, float]:
    """``tfyarn submit ARGV``, run by ``python`` if given."""
    began = time.monotonic()
    done = run_cli("submit", *argv, timeout=900, python=python)
    return done.returncode, done.stdout + done.stderr, time.monotonic() - began


@pytest.fixture(scope="module")
def client_python(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The interpreter of the environment ``auto`` packs: "" for this session's."""
    if FULL:
        return ""
    venv = _closure.small_venv(tmp_path_factory.mktemp("envs") / "small")
    return str(venv / "bin" / "python")


def test_without_python_env_refused_before_submission(
    local_cluster: LocalCluster,
) -> None:
    code, out, took = _submit(*SMALL, PROBE)
    assert code == 1, out[-3000:]
    assert "Submitted" not in out
    assert "--python_env auto" in out and "other hosts than this client" in out
    print(f"refused in {took:.1f} s")


@pytest.mark.slow
def test_python_env_auto_runs_from_the_shipped_environment(
    local_cluster: LocalCluster, client_python: str
) -> None:
    # A plain tar: on one machine gzip's CPU costs more than the bytes it saves.
    fast = ("--python_env_compression", "0")
    code, out, took = _submit(
        "--python_env", "auto", *fast, *SMALL, PROBE, python=client_python
    )
    assert code == 0, out[-4000:]
    assert "final status: SUCCEEDED" in out
    app_id = APP_ID.search(out)
    assert app_id, out[-2000:]
    logs = run_cli("logs", app_id.group(1), "--task", "worker:0", timeout=300)
    assert "env_probe OK" in logs.stdout, logs.stdout[-3000:] + logs.stderr[-2000:]
    assert "/appcache/" in logs.stdout or "/filecache/" in logs.stdout
    print(f"first submit to the end: {took:.1f} s")

    # Again: every archive is in the HDFS cache, nothing is packed or uploaded.
    code, out, again = _submit(
        "--python_env", "auto", *fast, "--detach", *SMALL, PROBE, python=client_python
    )
    assert code == 0, out[-4000:]
    assert "packing" not in out and "uploaded" not in out, out[-3000:]
    app_id = APP_ID.search(out)
    assert app_id
    run_cli("kill", app_id.group(1), timeout=300)
    print(f"cached resubmit (--detach): {again:.1f} s")

    # Preparing the cached environment again, in the client's interpreter.
    timed = (
        "import time; from tfyarn.client import pyenv; t = time.monotonic(); "
        "pyenv.ship('auto', level=0); print(time.monotonic() - t)"
    )
    done = subprocess.run(
        [client_python or sys.executable, "-c", timed],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    cached = float(done.stdout.split()[-1])
    print(f"cached environment, keys + HDFS lookups: {cached:.3f} s")
    assert cached < 5, f"a cached environment took {cached:.1f} s to prepare"


def test_missing_base_interpreter_is_named_at_start(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    """A venv archive whose base interpreter no node has: the container's own
    shell says which node lacks which interpreter, and the job fails."""
    archive = tmp_path / "broken-venv.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        link = tarfile.TarInfo("bin/python")
        link.type = tarfile.SYMTYPE
        link.linkname = "/opt/tfyarn-no-such-python/bin/python3.11"
        tar.addfile(link)
        cfg = b"home = /opt/tfyarn-no-such-python/bin\n"
        info = tarfile.TarInfo("pyvenv.cfg")
        info.size = len(cfg)
        tar.addfile(info, io.BytesIO(cfg))
    code, out, _ = _submit("--python_env", str(archive), *SMALL, PROBE)
    assert code == 1, out[-3000:]
    # The master is first to run it: skein reports its exit code, the client
    # says what 127 means for a shipped environment and where the line is.
    assert "exit code 127" in out, out[-3000:]
    assert "the Python shipped with --python_env" in out, out[-3000:]
    app_id = APP_ID.search(out)
    assert app_id
    deadline = time.monotonic() + 120  # log aggregation takes a few seconds
    while True:
        logs = run_cli("logs", app_id.group(1), "--task", "master", timeout=300)
        text = logs.stdout + logs.stderr
        if "cannot run the shipped Python" in text or time.monotonic() > deadline:
            break
        time.sleep(5)
    assert "/opt/tfyarn-no-such-python/bin/python3.11" in text, text[-3000:]
    assert "cannot run the shipped Python" in text
    assert re.search(r"node node\d\.", text), text[-3000:]
