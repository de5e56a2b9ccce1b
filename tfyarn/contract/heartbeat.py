"""How often tasks heartbeat and when the master counts a silent task lost.

The runtime sends at :func:`heartbeat_interval`; the master declares a task
lost after :func:`heartbeat_timeout`. Both compute them from the same job
spec, so they cannot disagree.
"""

from __future__ import annotations

# The master answers a few thousand small calls a second on one core; big jobs
# heartbeat less often so heartbeats stay under this rate (5000 tasks: 10 s).
HEARTBEATS_PER_SECOND = 500
# A task is lost only after missing this many heartbeats in a row.
MISSED_HEARTBEATS = 3


def heartbeat_interval(configured: float, tasks: int) -> float:
    """Seconds between one task's heartbeats: the configured value, longer for big jobs.

    Examples
    --------
    >>> heartbeat_interval(2.0, 10)
    2.0
    >>> heartbeat_interval(2.0, 5000)
    10.0
    """
    return max(configured, tasks / HEARTBEATS_PER_SECOND)


def heartbeat_timeout(configured: float, interval: float) -> float:
    """The silence after which a task is lost: never under a few intervals."""
    return max(configured, MISSED_HEARTBEATS * interval)
