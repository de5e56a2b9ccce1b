"""Turn successive master status snapshots into progress lines for a person.

The master publishes a JSON snapshot under the skein key ``tfyarn.status``
(phase, generation, restarts, per-task state). :class:`Narrator` remembers the
previous snapshot and says only what changed, so following a job prints one
line per event instead of a table per poll.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any

from tfyarn.spec import ROLES

# Task states in which the task has been given a container / has registered.
_ALLOCATED = {
    "ALLOCATED",
    "REGISTERED",
    "RUNNING",
    "SUCCEEDED",
    "FAILED",
    "KILLED",
    "LOST",
}
_REGISTERED = {"REGISTERED", "RUNNING", "SUCCEEDED"}


class Narrator:
    """Diff master snapshots into lines like ``worker:1 RUNNING``."""

    def __init__(self) -> None:
        self._phase: str | None = None
        self._formed = False
        self._restarts = 0
        self._counts: dict[str, tuple[int, int, int]] = {}
        self._tasks: dict[str, tuple[str, int]] = {}

    def update(self, snap: Mapping[str, Any]) -> list[str]:
        """Lines describing what changed since the previous snapshot."""
        lines: list[str] = []
        phase = str(snap.get("phase", ""))
        if phase and phase != self._phase:
            lines.append(f"master: {phase}")
            self._phase = phase
        restarts = int(snap.get("restarts") or 0)
        if restarts > self._restarts:
            reasons = list(snap.get("restart_reasons") or [])
            for n in range(self._restarts, restarts):
                why = reasons[n] if n < len(reasons) else "no reason given"
                lines.append(f"restart {n + 1}: {why}")
            self._restarts = restarts
        tasks: Sequence[Mapping[str, Any]] = snap.get("tasks") or []
        counts = role_counts(tasks)
        if counts != self._counts and counts:
            lines.append("containers " + format_counts(counts))
            self._counts = counts
        formed_at = snap.get("cluster_formed_at")
        if formed_at and not self._formed:
            self._formed = True
            started = snap.get("started") or formed_at
            lines.append(
                f"cluster formed in {float(formed_at) - float(started):.1f} s "
                f"(generation {snap.get('generation', 0)})"
            )
        for task in tasks:
            name = str(task.get("task", "?"))
            state = str(task.get("state", "?"))
            attempt = int(task.get("attempt") or 0)
            if self._tasks.get(name) == (state, attempt):
                continue
            self._tasks[name] = (state, attempt)
            lines.append(describe_task(task))
        return lines


def role_counts(tasks: Sequence[Mapping[str, Any]]) -> dict[str, tuple[int, int, int]]:
    """role -> (requested, allocated, registered)."""
    out: dict[str, list[int]] = {}
    for task in tasks:
        role = str(task.get("role") or str(task.get("task", "?")).split(":")[0])
        state = str(task.get("state", ""))
        c = out.setdefault(role, [0, 0, 0])
        c[0] += 1
        c[1] += state in _ALLOCATED
        c[2] += state in _REGISTERED or (
            state in _ALLOCATED and bool(task.get("address"))
        )
    order = [r.value for r in ROLES]
    return {
        r: (c[0], c[1], c[2])
        for r, c in sorted(out.items(), key=lambda kv: _order(order, kv[0]))
    }


def format_counts(counts: Mapping[str, tuple[int, int, int]]) -> str:
    """``ps 1/1/1, worker 2/2/1 (requested/allocated/registered)``."""
    parts = [f"{r} {a}/{b}/{c}" for r, (a, b, c) in counts.items()]
    return ", ".join(parts) + " (requested/allocated/registered)"


def describe_task(task: Mapping[str, Any]) -> str:
    name = task.get("task", "?")
    state = task.get("state", "?")
    bits = []
    if task.get("attempt"):
        bits.append(f"attempt {task['attempt']}")
    if task.get("address"):
        bits.append(str(task["address"]))
    if task.get("yarn_container_id"):
        bits.append(str(task["yarn_container_id"]))
    if task.get("exit_code") is not None and state in ("SUCCEEDED", "FAILED", "KILLED"):
        bits.append(f"exit code {task['exit_code']}")
    return f"{name} {state}" + (f" ({', '.join(bits)})" if bits else "")


def task_table(snap: Mapping[str, Any], *, now: float | None = None) -> str:
    """A fixed-width table of every task in a snapshot."""
    now = time.time() if now is None else now
    header = (
        "TASK",
        "STATE",
        "ATTEMPT",
        "ADDRESS",
        "CONTAINER",
        "EXIT",
        "STEP",
        "HEARTBEAT",
    )
    rows = [header]
    for t in snap.get("tasks") or []:
        age = t.get("last_heartbeat_age")
        rows.append(
            (
                str(t.get("task", "?")),
                str(t.get("state", "?")),
                str(t.get("attempt", 0)),
                str(t.get("address") or "-"),
                str(t.get("yarn_container_id") or t.get("container_id") or "-"),
                "-" if t.get("exit_code") is None else str(t["exit_code"]),
                "-" if t.get("step") is None else str(t["step"]),
                "-" if age is None else f"{float(age):.0f}s ago",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in rows
    )


def restart_lines(snap: Mapping[str, Any]) -> list[str]:
    """Why the job restarted, and per task why each earlier attempt ended."""
    lines = []
    budget = snap.get("max_restarts")
    reasons = list(snap.get("restart_reasons") or [])
    if reasons:
        used = snap.get("budget_used", len(reasons))
        head = f"restarts ({used} of max_restarts={budget} used):"
        lines.append(head if budget is not None else "restarts:")
        lines += [f"  {n}. {_first_line(r)}" for n, r in enumerate(reasons, 1)]
    for t in snap.get("tasks") or []:
        for n, why in enumerate(t.get("failures") or []):
            lines.append(f"  {t.get('task')} attempt {n}: {_first_line(why)}")
    return lines


def _first_line(text: str) -> str:
    return str(text).strip().splitlines()[0] if str(text).strip() else ""


def _order(order: list[str], role: str) -> int:
    return order.index(role) if role in order else len(order)
