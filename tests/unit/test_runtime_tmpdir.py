"""A task's temporary files stay in its container's directory, which YARN deletes.

TensorFlow's autograph and tfyarn's checkpoint and TensorBoard helpers use
``tempfile``; with /tmp as its directory their files outlived every job.
"""

from __future__ import annotations

import json
import os
import tempfile
import threading
from pathlib import Path

import pytest
from _am_support import LiveMaster, job, task_env

from tfyarn.contract.status import Phase
from tfyarn.runtime import Runtime, TaskContext, prelude
from tfyarn.spec import JobSpec

# What a script sees of its temporary directory, and where its files land.
SCRIPT = r"""
import json, os, tempfile
scratch = tempfile.mkdtemp(prefix="tfyarn-ckpt-")
with open("seen.json", "w") as f:
    json.dump({"TMPDIR": os.environ.get("TMPDIR"),
               "gettempdir": tempfile.gettempdir(), "scratch": scratch}, f)
"""


def run_one(
    spec: JobSpec, credentials: tuple[bytes, bytes], workdir: Path
) -> dict[str, str]:
    """Run the single worker of ``spec`` in ``workdir``; what its script saw."""
    (workdir / spec.script_name).write_text(SCRIPT)
    master = LiveMaster(spec, credentials).start()
    master.grant_all()
    # TMPDIR as the NodeManager's environment may hold it: not the task's.
    env = task_env(spec, master, "worker", 0, **{"TMPDIR": "/tmp", **spec.env})
    rt = Runtime(
        TaskContext.from_env(env), credentials=credentials, workdir=workdir, env=env
    )
    done: list[int] = []
    thread = threading.Thread(target=lambda: done.append(rt.run()))
    thread.start()
    thread.join(60)
    phase, diagnostics = master.wait_done()
    assert phase is Phase.SUCCEEDED, diagnostics
    assert done == [0]
    return json.loads((workdir / "seen.json").read_text())


@pytest.mark.parametrize("preimport", [(), ("json",)], ids=["plain", "prestarted"])
def test_the_script_gets_the_containers_tmp(
    credentials: tuple[bytes, bytes], tmp_path: Path, preimport: tuple[str, ...]
) -> None:
    spec = job(tasks={"worker": 1}, preimport=preimport)
    seen = run_one(spec, credentials, tmp_path)
    tmp = str(tmp_path / "tmp")
    assert seen["TMPDIR"] == tmp
    assert seen["gettempdir"] == tmp
    assert Path(seen["scratch"]).parent == tmp_path / "tmp"


def test_a_tmpdir_from_the_jobs_env_wins(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    container = tmp_path / "container"
    container.mkdir()
    spec = job(tasks={"worker": 1}, env={"TMPDIR": str(scratch)})
    seen = run_one(spec, credentials, container)
    assert seen["TMPDIR"] == str(scratch)
    assert Path(seen["scratch"]).parent == scratch


def test_the_runtime_process_uses_it_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", None)
    monkeypatch.setenv("TMPDIR", "/tmp")
    ctx = TaskContext.from_env(
        {
            "TFYARN_JOB": job(tasks={"worker": 1}).to_env(),
            "TFYARN_ROLE": "worker",
            "TFYARN_TASK_INDEX": "0",
        }
    )
    tmpdir = prelude.task_tmpdir(tmp_path)
    prelude.use_tmpdir(tmpdir, ctx)
    assert os.environ["TMPDIR"] == str(tmp_path / "tmp")
    assert tempfile.gettempdir() == str(tmp_path / "tmp")
