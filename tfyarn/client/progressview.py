"""The live view's progress line: the lead task's step, steps/s and ETA.

On a terminal the line is redrawn in place under the event lines (like pip's
or Keras' bars); anywhere else (a pipe, a CI log) it is a plain line now and
then, with no escape codes. The numbers come from ``tfyarn.report_progress``:
the lead task's ``step`` and, when the script passes it, ``total_steps`` in its
metrics (the same the master's tracking page and YARN's progress bar use).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TextIO

from tfyarn.contract.status import JobStatus, JobSummary

# steps/s over this many recent seconds (like the tracking page's last minute).
RATE_WINDOW = 60.0
# Off a terminal: a progress line at most this often, and at every tenth done.
PLAIN_EVERY = 30.0
BAR_WIDTH = 24
_CLEAR = "\r\x1b[K"  # to the line's start, erase it


@dataclass(frozen=True)
class Progress:
    """The lead task's progress at one poll."""

    task: str
    step: int
    total: float | None = None

    @property
    def fraction(self) -> float | None:
        if not self.total or self.total <= 0:
            return None
        return max(0.0, min(1.0, self.step / self.total))


def lead_progress(status: JobStatus | JobSummary) -> Progress | None:
    """The lead task's progress in a snapshot or a summary; None before its first step."""
    if isinstance(status, JobSummary):
        if status.lead is None or status.lead_step is None:
            return None
        return Progress(status.lead, status.lead_step, status.total_steps)
    lead = status.task(status.lead) if status.lead else None
    if lead is None or lead.step is None:
        return None
    return Progress(lead.task, lead.step, lead.metrics.get("total_steps"))


class Meter:
    """Steps/s and the ETA, from the steps seen over :data:`RATE_WINDOW`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: deque[tuple[float, int]] = deque()

    def add(self, step: int) -> None:
        now = self._clock()
        if self._seen and step < self._seen[-1][1]:
            self._seen.clear()  # a restart from a checkpoint: a new run
        self._seen.append((now, step))
        while len(self._seen) > 2 and now - self._seen[0][0] > RATE_WINDOW:
            self._seen.popleft()

    def rate(self) -> float | None:
        if len(self._seen) < 2:
            return None
        (t0, s0), (t1, s1) = self._seen[0], self._seen[-1]
        return (s1 - s0) / (t1 - t0) if t1 > t0 else None

    def line(self, p: Progress) -> str:
        """``worker:0 [#####-----] 120/400 30% 2.5 steps/s ETA 1m52s``."""
        rate = self.rate()
        speed = f" {rate:.3g} steps/s" if rate else ""
        frac = p.fraction
        if frac is None or p.total is None:
            return f"{p.task} step {p.step}{speed}"
        filled = round(frac * BAR_WIDTH)
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        eta = ""
        if rate and rate > 0 and p.step < p.total:
            eta = f" ETA {_duration((p.total - p.step) / rate)}"
        total = int(p.total) if float(p.total).is_integer() else p.total
        return f"{p.task} [{bar}] {p.step}/{total} {frac:.0%}{speed}{eta}"


def _duration(seconds: float) -> str:
    s = int(seconds + 0.5)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class LiveView:
    """Event lines plus one progress line; ``tty`` decides redraw or plain lines."""

    def __init__(
        self,
        out: TextIO,
        *,
        tty: bool | None = None,
        clock: Callable[[], float] = time.monotonic,
        stamp: Callable[[], str] = lambda: time.strftime("%H:%M:%S"),
    ) -> None:
        self.out = out
        self.tty = out.isatty() if tty is None else tty
        self.meter = Meter(clock)
        self._clock = clock
        self._stamp = stamp
        self._shown = ""  # the progress line on screen (terminal only)
        self._plain_at = float("-inf")
        self._plain_tenth = -1
        self._plain_step: int | None = None
        self._last: Progress | None = None

    def event(self, line: str) -> None:
        """One event line, above the progress line on a terminal."""
        text = f"{self._stamp()} {line}\n"
        if self.tty and self._shown:
            text = _CLEAR + text + self._shown
        self.out.write(text)
        self.out.flush()

    def progress(self, p: Progress) -> None:
        """The lead's progress at a poll (the same step again is no news)."""
        if p != self._last:
            self.meter.add(p.step)
        self._last = p
        line = self.meter.line(p)
        if self.tty:
            if line != self._shown:
                self.out.write(_CLEAR + line)
                self.out.flush()
                self._shown = line
            return
        frac = p.fraction
        tenth = int(frac * 10) if frac is not None else -1
        now = self._clock()
        due = now - self._plain_at >= PLAIN_EVERY and p.step != self._plain_step
        if tenth != self._plain_tenth or due:
            self._plain_tenth, self._plain_at, self._plain_step = tenth, now, p.step
            self.out.write(f"{self._stamp()} progress: {line}\n")
            self.out.flush()

    def close(self) -> None:
        """End the progress line so what follows starts on a line of its own."""
        if self.tty and self._shown:
            self.out.write("\n")
            self.out.flush()
            self._shown = ""
