"""The job's JVM options: where they go, and that this machine's JVM takes them."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from am.__main__ import configure_process
from tfyarn.client.compile import to_skein
from tfyarn.contract import jvm
from tfyarn.spec import JobSpec


def _spec(tmp_path: Path, **kw: object) -> JobSpec:
    script = tmp_path / "train.py"
    script.write_text("")
    return JobSpec(script=str(script), tasks={"worker": {"count": 1}}, **kw)  # type: ignore[arg-type]


def test_skeins_am_gets_the_options_and_the_tasks_do_not(tmp_path: Path) -> None:
    app = to_skein(_spec(tmp_path), am_source=str(tmp_path / "train.py"))
    assert app.master.env[jvm.TOOL_OPTIONS] == jvm.tool_options()
    assert jvm.TOOL_OPTIONS not in app.services["worker"].env


def test_a_users_java_tool_options_win(tmp_path: Path) -> None:
    spec = _spec(tmp_path, env={jvm.TOOL_OPTIONS: "-Xmx1g"})
    app = to_skein(spec, am_source=str(tmp_path / "train.py"))
    assert app.master.env[jvm.TOOL_OPTIONS] == "-Xmx1g"


def test_the_master_drops_the_variable_only_when_it_is_tfyarns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    thresholds = gc.get_threshold()
    try:
        monkeypatch.setenv(jvm.TOOL_OPTIONS, jvm.tool_options())
        configure_process()
        assert jvm.TOOL_OPTIONS not in os.environ
        monkeypatch.setenv(jvm.TOOL_OPTIONS, "-Xmx1g")
        configure_process()
        assert os.environ[jvm.TOOL_OPTIONS] == "-Xmx1g"
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.skipif(not shutil.which("java"), reason="no JVM on this machine")
def test_this_machines_jvm_takes_the_options() -> None:
    done = subprocess.run(
        ["java", "-version"],
        env={**os.environ, jvm.TOOL_OPTIONS: jvm.tool_options()},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"Picked up {jvm.TOOL_OPTIONS}: {jvm.tool_options()}" in done.stderr
