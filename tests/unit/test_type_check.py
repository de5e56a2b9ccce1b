"""The code type-checks as pyproject.toml's mypy settings want it."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from _required import missing

REPO = Path(__file__).resolve().parents[2]


def test_mypy_is_clean() -> None:
    if importlib.util.find_spec("mypy") is None:
        missing("mypy is not installed (it comes with the [dev] extra)")
    # The configured files, with mypy's cache in the per-user tfyarn cache (as
    # the plugin's cargo builds): a fresh checkout's run takes seconds, not
    # minutes of full analysis. mypy checks each entry against its source's
    # hash, so an entry from another checkout is never taken for this one.
    cache = Path(
        os.environ.get("TFYARN_CACHE_DIR") or Path.home() / ".cache" / "tfyarn"
    )
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache / "mypy")],
        check=False,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, (
        f"mypy found problems (run `PYTHONPATH=$PWD mypy` to see them):\n"
        f"{result.stdout}{result.stderr}"
    )
    assert result.stdout.startswith("Success: no issues found in "), result.stdout


def test_mypy_checks_against_the_oldest_supported_python() -> None:
    tomllib = pytest.importorskip("tomllib", reason="tomllib is Python 3.11's")
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    oldest = re.fullmatch(r">=(\d+\.\d+)", project["project"]["requires-python"])
    assert oldest, project["project"]["requires-python"]
    assert project["tool"]["mypy"]["python_version"] == oldest.group(1)
