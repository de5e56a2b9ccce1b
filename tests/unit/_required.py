"""A tool a test needs is missing: skipped on a developer's machine, a failure
in CI (``CI=true``), where a skip would leave the run green having checked
nothing (no types, no lint, only the plugin's fallback route)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def missing(what: str) -> NoReturn:
    """Skip with ``what``; fail instead under ``CI=true``."""
    if in_ci():
        pytest.fail(f"{what}, and CI=true: CI must run this check, not skip it")
    pytest.skip(what)
