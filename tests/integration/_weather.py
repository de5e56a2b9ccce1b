"""What a job went through, read from its chief's log (``jobs/weather_ps.py``
prints ``round step=N t=T`` per round and ``start_step=N t=T`` per attempt)."""

from __future__ import annotations

import itertools
import re
import statistics

ROUND = re.compile(r"^round step=(\d+) t=([0-9.]+)\s*$", re.MULTILINE)


def rounds(log: str) -> list[tuple[int, float]]:
    """Every round the chief completed: (step, epoch seconds), in order."""
    return [(int(s), float(t)) for s, t in ROUND.findall(log)]


def usual_gap(log: str) -> float:
    """The job's usual seconds between two rounds (their median)."""
    times = [t for _, t in rounds(log)]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    return statistics.median(gaps) if gaps else 0.0


def stall(log: str, event: float, window: float = 120.0) -> float:
    """Seconds training stood still because of an event at ``event`` (epoch
    seconds): the longest gap between rounds that ended within ``window``
    seconds after it, less the job's usual gap between rounds."""
    times = [t for _, t in rounds(log)]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    if not gaps:
        raise ValueError("fewer than two rounds in the log")
    usual = statistics.median(gaps)
    around = [
        b - a
        for a, b in itertools.pairwise(times)
        if b >= event and a <= event + window
    ]
    return max(0.0, max(around, default=usual) - usual)


def steps_lost(log: str, since: float = 0.0, until: float = float("inf")) -> int:
    """Steps trained and then trained again after a restart: for each chief
    attempt after the first (started between ``since`` and ``until``, epoch
    seconds), the last step before it less the step it started from."""
    lost = 0
    last = 0
    for match in re.finditer(
        r"^start_step=(\d+) t=([0-9.]+)\s*$|^round step=(\d+) t=", log, re.MULTILINE
    ):
        start, at, step = match.groups()
        if start is None:
            last = int(step)
        elif since <= float(at) <= until:
            lost += max(0, last - int(start))
    return lost
