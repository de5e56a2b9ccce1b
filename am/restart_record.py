"""What one master attempt leaves the next: the restarts and failures so far.

YARN starts the master again when its container dies (``max_am_attempts``).
The new attempt starts every task again, one more cluster restart not charged
to ``max_restarts``; the failures charged before still count, or a task that
fails every time would get a fresh budget in every attempt. The record is
saved in skein's HDFS application directory by the reconcile loop
(``Launcher.save_restarts``) whenever it changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any, Protocol


class Counts(Protocol):
    """What the record holds, as the job counts it (JobState has these fields)."""

    @property
    def budget_used(self) -> int: ...
    @property
    def restarts(self) -> int: ...
    @property
    def cluster_restarts(self) -> int: ...
    @property
    def restart_reasons(self) -> Sequence[str]: ...
    @property
    def failures(self) -> Sequence[str]: ...
    @property
    def errors_seen(self) -> AbstractSet[str]: ...
    @property
    def disruption_reasons(self) -> Sequence[str]: ...
    @property
    def disruption_kinds(self) -> Mapping[str, int]: ...


@dataclass(frozen=True)
class Resumed:
    """The counts a new master attempt goes on with (the job takes them over)."""

    budget_used: int
    restarts: int
    cluster_restarts: int
    restart_reasons: tuple[str, ...]
    failures: tuple[str, ...]
    errors_seen: frozenset[str]
    disruption_reasons: tuple[str, ...]
    disruption_kinds: Mapping[str, int]


def record_of(state: Counts) -> dict[str, Any]:
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


def resume(attempt: int, record: dict[str, Any] | None) -> Resumed:
    """The counts to go on from an earlier master attempt's record, if it left one.

    This attempt is one more restart, not charged; without a record, each
    earlier attempt counts as one.
    """
    record = record or {}
    kinds = record.get("disruption_kinds", {})
    reasons = [str(r) for r in record.get("restart_reasons", [])]
    reasons.append(f"application master attempt {attempt}: attempt {attempt - 1} ended")
    return Resumed(
        budget_used=int(record.get("budget_used", 0)),
        restarts=int(record.get("restarts", attempt - 2)) + 1,
        cluster_restarts=int(record.get("cluster_restarts", attempt - 2)) + 1,
        restart_reasons=tuple(reasons),
        failures=tuple(str(f) for f in record.get("failures", [])),
        errors_seen=frozenset(str(e) for e in record.get("errors_seen", [])),
        disruption_reasons=tuple(str(r) for r in record.get("disruption_reasons", [])),
        disruption_kinds={str(k): int(n) for k, n in kinds.items()},
    )
