"""The code stays as pyproject.toml's ruff settings want it (lint and format)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from _required import missing

REPO = Path(__file__).resolve().parents[2]
SOURCES = ["tfyarn", "am", "tests", "examples", "proto"]
# ruff formats the Python blocks of Markdown too: the README's code is copied.
DOCS = ["README.md", "ARCHITECTURE.md"]


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]])
def test_ruff_is_clean(command: list[str]) -> None:
    if importlib.util.find_spec("ruff") is None:
        missing("ruff is not installed (it comes with the [dev] extra)")
    docs = DOCS if command[0] == "format" else []
    result = subprocess.run(
        [sys.executable, "-m", "ruff", *command, *SOURCES, *docs],
        check=False,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, (
        f"ruff {' '.join(command)} found problems (fix them, e.g. with "
        f"`ruff check --fix` / `ruff format`):\n{result.stdout}{result.stderr}"
    )
