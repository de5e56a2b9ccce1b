"""What a job went through, read from its chief's log (``jobs/weather_ps.py``
prints ``round step=N t=T`` per round and ``start_step=N`` per attempt)."""

from __future__ import annotations

import itertools
import re
import statistics

ROUND = re.compile(r"^round step=(\d+) t=([0-9.]+)\s*$", re.MULTILINE)
START = re.compile(r"^start_step=(\d+)\s*$", re.MULTILINE)


def rounds(log: str) -> list[tuple[int, float]]:
    """Every round the chief completed: (step, epoch seconds), in order."""
    return [(int(s), float(t)) for s, t in ROUND.findall(log)]


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


def steps_lost(log: str) -> int:
    """Steps trained and then trained again after a restart: for each chief
    attempt after the first, the last step before it less its start step."""
    lost = 0
    last = 0
    for match in re.finditer(
        r"^start_step=(\d+)\s*$|^round step=(\d+) t=", log, re.MULTILINE
    ):
        start, step = match.groups()
        if start is not None:
            lost += max(0, last - int(start))
        else:
            last = int(step)
    return lost
