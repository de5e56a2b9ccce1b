"""What one master attempt leaves the next: the restarts and failures so far.

YARN starts the master again when its container dies (``max_am_attempts``).
The new attempt starts every task again, one more cluster restart not charged
to ``max_restarts``; the failures charged before still count, or a task that
fails every time would get a fresh budget in every attempt. The record is
saved in skein's HDFS application directory by the reconcile loop
(``Launcher.save_restarts``) whenever it changes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from am.state import JobState


def record_of(state: JobState) -> dict[str, Any]:
    """What a later master attempt needs to go on counting (:func:`resume`)."""
    return {
        "budget_used": state.budget_used,
        "restarts": state.restarts,
        "cluster_restarts": state.cluster_restarts,
        "restart_reasons": state.restart_reasons,
        "failures": state.failures,
        "errors_seen": sorted(state.errors_seen),
        "disruption_reasons": state.disruption_reasons,
        "disruption_kinds": state.disruption_kinds,
    }


def resume(state: JobState, attempt: int, record: dict[str, Any] | None) -> None:
    """Go on from an earlier master attempt's record, if it left one."""
    record = record or {}
    state.budget_used = int(record.get("budget_used", 0))
    state.failures = [str(f) for f in record.get("failures", [])]
    state.errors_seen = {str(e) for e in record.get("errors_seen", [])}
    state.restart_reasons = [str(r) for r in record.get("restart_reasons", [])]
    state.disruption_reasons = [str(r) for r in record.get("disruption_reasons", [])]
    kinds = record.get("disruption_kinds", {})
    state.disruption_kinds = {str(k): int(n) for k, n in kinds.items()}
    # Without a record, count each earlier attempt as one restart.
    state.restarts = int(record.get("restarts", attempt - 2))
    state.cluster_restarts = int(record.get("cluster_restarts", attempt - 2)) + 1
    state.restarts += 1
    state.restart_reasons.append(
        f"application master attempt {attempt}: attempt {attempt - 1} ended"
    )
    state.restarts_unsaved = True
