"""Following a running job from a benchmark: the master's view of it, and
waiting for something to happen with a bound."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tfyarn import client

TIMEOUT_S = 300.0


def snapshot(yarn: Any, app_id: str) -> dict[str, Any]:
    """The master's published status of the job ({} before it has one)."""
    master = client.status(app_id, client=yarn).master
    return master.to_dict() if master else {}


def task(yarn: Any, app_id: str, name: str) -> dict[str, Any]:
    """One task's entry in the snapshot ("chief:0"), {} if not there yet."""
    tasks = snapshot(yarn, app_id).get("tasks", [])
    return next((t for t in tasks if t["task"] == name), {})


def until(
    benchmark: str, what: str, check: Callable[[], Any], timeout: float = TIMEOUT_S
) -> Any:
    """``check()``'s first true value, polled every 0.2 s; the benchmark ends
    (SystemExit naming ``what``) when there is none within ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise SystemExit(f"{benchmark} benchmark: {what} did not happen in {timeout:.0f} s")
