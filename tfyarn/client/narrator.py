"""Turn the master's successive published statuses into lines for a person.

The master publishes a :class:`~tfyarn.contract.status.JobStatus` under
``tfyarn.status`` (phase, generation, restarts, every task). :class:`Narrator`
remembers the previous one and says only what changed, so following a job
prints one line per event instead of a table per poll. Task states are the
contract's :class:`~tfyarn.contract.status.TaskState`, asked through its
predicates, never retyped here.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from tfyarn.contract.exit_codes import explain_exit
from tfyarn.contract.failure import first_line
from tfyarn.contract.status import JobStatus, Phase, TaskState, TaskStatus
from tfyarn.spec import ROLES


class Narrator:
    """Diff published statuses into lines like ``worker:1 RUNNING``."""

    def __init__(self) -> None:
        self._phase: Phase | None = None
        self._formed = False
        self._restarts = 0
        self._disruptions = 0
        self._resizes = 0
        self._notice = ""
        self._counts: dict[str, tuple[int, int, int]] = {}
        self._tasks: dict[str, tuple[TaskState, int, str]] = {}

    def update(self, status: JobStatus) -> list[str]:
        """Lines describing what changed since the previous status."""
        lines: list[str] = []
        if status.phase != self._phase:
            lines.append(f"master: {status.phase.value}")
            self._phase = status.phase
        if status.restarts > self._restarts:
            reasons = status.restart_reasons
            for n in range(self._restarts, status.restarts):
                why = reasons[n] if n < len(reasons) else "no reason given"
                lines.append(f"restart {n + 1}: {why}")
            self._restarts = status.restarts
        if status.disruptions > self._disruptions:
            taken = status.disruption_reasons
            for n in range(self._disruptions, status.disruptions):
                why = taken[n] if n < len(taken) else "no reason given"
                lines.append(
                    f"taken back by YARN {n + 1} (not charged to max_restarts): "
                    f"{first_line(why)}"
                )
            self._disruptions = status.disruptions
        if status.stop_notice and not self._notice:
            lines.append(status.stop_notice)
        self._notice = status.stop_notice
        if status.resizes > self._resizes:
            for n in range(self._resizes, status.resizes):
                why = status.resize_reasons[n] if n < len(status.resize_reasons) else ""
                lines.append(f"resize {n + 1}: {why or 'no reason given'}")
            self._resizes = status.resizes
        counts = role_counts(status.tasks)
        if counts != self._counts and counts:
            lines.append("containers " + format_counts(counts))
            self._counts = counts
        if status.cluster_formed_at and not self._formed:
            self._formed = True
            started = status.started or status.cluster_formed_at
            lines.append(
                f"cluster formed in {status.cluster_formed_at - started:.1f} s "
                f"(generation {status.generation})"
            )
        for task in status.tasks:
            seen = (task.state, task.attempt, task.disruption)
            if self._tasks.get(task.task) == seen:
                continue
            self._tasks[task.task] = seen
            lines.append(describe_task(task))
        return lines


def role_counts(tasks: Sequence[TaskStatus]) -> dict[str, tuple[int, int, int]]:
    """role -> (requested, allocated, registered), roles in launch order."""
    out: dict[str, list[int]] = {}
    for task in tasks:
        allocated = task.state.has_container()
        c = out.setdefault(task.role, [0, 0, 0])
        c[0] += 1
        c[1] += allocated
        # A task that registered keeps its address after it ends.
        c[2] += task.state.is_registered() or (allocated and bool(task.address))
    order = [r.value for r in ROLES]
    return {
        r: (c[0], c[1], c[2])
        for r, c in sorted(out.items(), key=lambda kv: _order(order, kv[0]))
    }


def format_counts(counts: Mapping[str, tuple[int, int, int]]) -> str:
    """``ps 1/1/1, worker 2/2/1 (requested/allocated/registered)``."""
    parts = [f"{r} {a}/{b}/{c}" for r, (a, b, c) in counts.items()]
    return ", ".join(parts) + " (requested/allocated/registered)"


def describe_task(task: TaskStatus) -> str:
    """``worker:1 RUNNING (h:2, container_..._000003)``; a task whose latest
    container YARN took back reads ``worker:1 PREEMPTED``, then
    ``worker:1 REQUESTED (attempt 1, preempted)`` until it is back."""
    bits = []
    state = task.shown_state()
    if task.disruption and state == task.state.value:
        bits.append(task.disruption)
    if task.attempt:
        bits.append(f"attempt {task.attempt}")
    if task.address:
        bits.append(task.address)
    if task.yarn_container_id:
        bits.append(task.yarn_container_id)
    if task.exit_code is not None and task.state.has_exit_code():
        # Words only for an end nobody asked for: a KILLED task's -15 is the
        # master's own stop.
        failed = task.state is TaskState.FAILED and not task.disruption
        words = explain_exit(task.exit_code) if failed else ""
        bits.append(f"exit code {task.exit_code}" + (f": {words}" if words else ""))
    return f"{task.task} {state}" + (f" ({', '.join(bits)})" if bits else "")


def task_table(status: JobStatus, *, now: float | None = None) -> str:
    """A fixed-width table of every task."""
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
    for t in status.tasks:
        age = t.last_heartbeat_age
        rows.append(
            (
                t.task,
                t.shown_state(),
                str(t.attempt),
                t.address or "-",
                t.yarn_container_id or t.container_id or "-",
                "-" if t.exit_code is None else str(t.exit_code),
                "-" if t.step is None else str(t.step),
                "-" if age is None else f"{age:.0f}s ago",
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
        for r in rows
    )


def gpu_lines(status: JobStatus) -> list[str]:
    """Each task's GPUs (index and UUID), who chose them, nvidia-smi's figures."""
    lines = []
    for t in status.tasks:
        if not t.gpus and not t.gpu_error:
            continue
        shown = []
        for g in t.gpus:
            text = f"{g.get('index')} {g.get('uuid') or ''}".strip()
            if g.get("utilization") is not None:
                text += (
                    f" ({g['utilization']:.0f}% busy, "
                    f"{g.get('memory_used_mib', 0):.0f}/"
                    f"{g.get('memory_total_mib', 0):.0f} MiB)"
                )
            shown.append(text)
        line = f"  {t.task}: " + ("; ".join(shown) or "none")
        if t.gpu_source:
            line += f" [{t.gpu_source}]"
        if t.gpu_error:
            line += f"; nvidia-smi fails: {t.gpu_error}"
        lines.append(line)
    return ["gpus:", *lines] if lines else []


def restart_lines(status: JobStatus) -> list[str]:
    """Why the job restarted, and per task why each earlier attempt ended."""
    lines = []
    budget = status.max_restarts
    reasons = status.restart_reasons
    if reasons:
        head = f"restarts ({status.budget_used} of max_restarts={budget} used):"
        lines.append(head if budget is not None else "restarts:")
        lines += [f"  {n}. {first_line(r)}" for n, r in enumerate(reasons, 1)]
    taken = status.disruption_reasons
    if taken:
        limit = status.max_disruptions
        lines.append(
            f"containers taken back by YARN ({status.disruptions} of "
            f"max_disruptions={limit}, not charged to max_restarts):"
        )
        lines += [f"  {n}. {first_line(r)}" for n, r in enumerate(taken, 1)]
    if status.resize_reasons:
        lines.append(f"resizes ({status.resizes}, not charged to max_restarts):")
        lines += [
            f"  {n}. {first_line(r)}" for n, r in enumerate(status.resize_reasons, 1)
        ]
    for t in status.tasks:
        for n, why in enumerate(t.failures):
            lines.append(f"  {t.task} attempt {n}: {first_line(why)}")
    return lines


def _order(order: list[str], role: str) -> int:
    return order.index(role) if role in order else len(order)
