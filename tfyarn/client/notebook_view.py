"""Following a job inside Jupyter: one display, updated in place.

A terminal gets :class:`~tfyarn.client.progressview.LiveView` (lines, and a
progress line redrawn with control codes). A notebook cell shows those codes
as garbage and grows a line per event, so here one IPython display (one
display id) is updated instead: the job's state and links, a line per role
(or per task for a small job) with its states, step and steps/s, the tasks
that need a look, and the latest events. Its ``text/plain`` form is the same
view as text, which is what ``nbconvert``/``nbclient`` keep and what a plain
console shows.

Above :data:`PER_TASK_UP_TO` tasks the view summarizes by role and state
(``worker 250 RUNNING, 2 FAILED``) and names only the tasks that need a look
(failed, lost, relaunching, restarted), at most :data:`NAMED_TASKS` of them.
"""

from __future__ import annotations

import html
import sys
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfyarn.client.progressview import LiveView, Meter, Progress
from tfyarn.contract.status import JobStatus as MasterStatus
from tfyarn.contract.status import TaskState, TaskStatus
from tfyarn.spec import ROLES, JobSpec

# A job with at most this many tasks is shown task by task.
PER_TASK_UP_TO = 16
# At most this many tasks named as needing a look; the rest are counted.
NAMED_TASKS = 8
# The latest events kept on screen.
EVENTS_SHOWN = 8
# The display is redrawn at most this often (the final state always).
REDRAW_EVERY = 0.5
_NEEDS_LOOK = (TaskState.FAILED, TaskState.LOST, TaskState.RELAUNCHING)


def in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (ipykernel's shell)."""
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # noqa: BLE001 -- no IPython in a usable state
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


@dataclass(frozen=True)
class RoleLine:
    role: str
    total: int
    states: dict[str, int]
    step: int | None = None  # the furthest step among the role's tasks


@dataclass(frozen=True)
class Summary:
    """A job's tasks by role and state, and the few that need a look."""

    roles: list[RoleLine]
    look: list[str]  # "worker:17 FAILED (attempt 1): exit 1 ..."
    more_to_look: int = 0  # tasks needing a look beyond those named
    tasks: list[TaskStatus] = field(default_factory=list)  # small jobs: all


def needs_look(task: TaskStatus) -> bool:
    return task.state in _NEEDS_LOOK or task.attempt > 0 or bool(task.disruption)


def summarize(master: MasterStatus) -> Summary:
    """Counts per role and state; names the tasks that need a look."""
    by_role: dict[str, list[TaskStatus]] = {}
    for task in master.tasks:
        by_role.setdefault(task.role, []).append(task)
    order = [r.value for r in ROLES] + sorted(set(by_role) - {r.value for r in ROLES})
    roles = []
    for role in order:
        tasks = by_role.get(role)
        if not tasks:
            continue
        counts = Counter(t.state.value for t in tasks)
        steps = [t.step for t in tasks if t.step is not None]
        roles.append(
            RoleLine(role, len(tasks), dict(counts), max(steps) if steps else None)
        )
    flagged = [t for t in master.tasks if needs_look(t)]
    look = [_look_line(t) for t in flagged[:NAMED_TASKS]]
    small = master.tasks if len(master.tasks) <= PER_TASK_UP_TO else []
    return Summary(roles, look, max(0, len(flagged) - NAMED_TASKS), list(small))


def _look_line(task: TaskStatus) -> str:
    why = task.disruption or (task.failures[-1] if task.failures else "")
    why = why.strip().splitlines()[0][:120] if why.strip() else ""
    exit_code = f" exit {task.exit_code}" if task.exit_code not in (None, 0) else ""
    return f"{task.task} {task.state.value} (attempt {task.attempt}){exit_code}" + (
        f": {why}" if why else ""
    )


def _states(line: RoleLine) -> str:
    return ", ".join(f"{n} {s}" for s, n in sorted(line.states.items()))


@dataclass
class ViewState:
    """What the view shows; rendered as text and as HTML from the same data."""

    title: str = "tfyarn job"
    app_id: str = ""
    state: str = "submitting"
    tracking_url: str = ""
    progress: str = ""
    summary: Summary | None = None
    events: deque[str] = field(default_factory=lambda: deque(maxlen=EVENTS_SHOWN))
    final: str = ""


def render_text(v: ViewState) -> str:
    lines = [f"{v.title} {v.app_id}: {v.final or v.state}".rstrip()]
    if v.tracking_url:
        lines.append(f"tracking page: {v.tracking_url}")
    if v.progress:
        lines.append(f"progress: {v.progress}")
    s = v.summary
    if s is not None:
        if s.tasks:
            for t in s.tasks:
                step = f" step {t.step}" if t.step is not None else ""
                retry = f" (attempt {t.attempt})" if t.attempt else ""
                lines.append(f"  {t.task:<12} {t.state.value}{retry}{step}")
        else:
            for r in s.roles:
                step = f", furthest step {r.step}" if r.step is not None else ""
                lines.append(f"  {r.role:<10} {r.total:>4}: {_states(r)}{step}")
        if s.look:
            lines.append("needs a look:")
            lines += [f"  {line}" for line in s.look]
            if s.more_to_look:
                lines.append(f"  ... and {s.more_to_look} more (tfyarn status)")
    if v.events:
        lines.append("latest events:")
        lines += [f"  {e}" for e in v.events]
    return "\n".join(lines)


def render_html(v: ViewState) -> str:
    e = html.escape
    color = {"SUCCEEDED": "#2e7d32", "FAILED": "#c62828", "KILLED": "#c62828"}.get(
        v.final, "#1565c0"
    )
    parts = [
        '<div class="tfyarn-view" style="font-family:monospace;font-size:12px">',
        (
            f"<b>{e(v.title)}</b> {e(v.app_id)}: "
            f'<b style="color:{color}">{e(v.final or v.state)}</b>'
        ),
    ]
    if v.tracking_url:
        parts.append(
            f' &middot; <a href="{e(v.tracking_url)}" target="_blank">tracking page</a>'
        )
    if v.progress:
        parts.append(f"<div>{e(v.progress)}</div>")
    s = v.summary
    if s is not None:
        parts.append('<table style="border-collapse:collapse">')
        if s.tasks:
            parts.append(
                "<tr><th>task</th><th>state</th><th>attempt</th><th>step</th></tr>"
            )
            for t in s.tasks:
                step = "" if t.step is None else str(t.step)
                parts.append(
                    f"<tr><td>{e(t.task)}</td><td>{e(t.state.value)}</td>"
                    f"<td>{t.attempt}</td><td>{step}</td></tr>"
                )
        else:
            parts.append(
                "<tr><th>role</th><th>tasks</th><th>states</th><th>step</th></tr>"
            )
            for r in s.roles:
                step = "" if r.step is None else str(r.step)
                parts.append(
                    f"<tr><td>{e(r.role)}</td><td>{r.total}</td>"
                    f"<td>{e(_states(r))}</td><td>{step}</td></tr>"
                )
        parts.append("</table>")
        if s.look:
            more = f"<li>... and {s.more_to_look} more</li>" if s.more_to_look else ""
            items = "".join(f"<li>{e(x)}</li>" for x in s.look)
            parts.append(f"<div>needs a look:<ul>{items}{more}</ul></div>")
    if v.events:
        parts.append(
            '<details open><summary>latest events</summary><pre style="margin:0">'
            + e("\n".join(v.events))
            + "</pre></details>"
        )
    parts.append("</div>")
    return "".join(parts)


class Rendered:
    """One rendering of the view, for IPython's display machinery."""

    def __init__(self, state: ViewState) -> None:
        self.text = render_text(state)
        self.html = render_html(state)

    def _repr_html_(self) -> str:
        return self.html

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(self.text)

    def __repr__(self) -> str:
        return self.text


class NotebookView:
    """The live view of one job in one notebook output, updated in place."""

    def __init__(
        self,
        title: str = "tfyarn job",
        *,
        display: Callable[..., Any] | None = None,
        clock: Callable[[], float] = time.monotonic,
        stamp: Callable[[], str] = lambda: time.strftime("%H:%M:%S"),
    ) -> None:
        if display is None:
            from IPython.display import display as show

            display = show
        self._display = display
        self._clock = clock
        self._stamp = stamp
        self._meter = Meter(clock)
        self._last: Progress | None = None
        self._drawn_at = float("-inf")
        self.state = ViewState(title=title)
        self._handle = self._display(Rendered(self.state), display_id=True)

    def submitted(self, app_id: str) -> None:
        self.state.app_id = app_id
        self.state.state = "submitted"
        self._draw(force=True)

    def event(self, line: str) -> None:
        self.state.events.append(f"{self._stamp()} {line}")
        if line.startswith("YARN: "):
            self.state.state = line.removeprefix("YARN: ")
        elif line.startswith("master: "):
            self.state.state = line.removeprefix("master: ")
        self._draw()

    def progress(self, p: Progress) -> None:
        if p != self._last:
            self._meter.add(p.step)
        self._last = p
        self.state.progress = self._meter.line(p)
        self._draw()

    def status(self, master: MasterStatus) -> None:
        self.state.summary = summarize(master)
        self._draw()

    def tracking(self, url: str) -> None:
        self.state.tracking_url = url
        self._draw(force=True)

    def finished(self, outcome: str, diagnostics: str) -> None:
        self.state.final = outcome
        if outcome != "SUCCEEDED" and diagnostics.strip():
            self.state.events.append(diagnostics.strip().splitlines()[0][:300])
        self._draw(force=True)

    def close(self) -> None:
        self._draw(force=True)

    def _draw(self, *, force: bool = False) -> None:
        now = self._clock()
        if not force and now - self._drawn_at < REDRAW_EVERY:
            return
        self._drawn_at = now
        if self._handle is not None:
            self._handle.update(Rendered(self.state))


class LinesView:
    """Outside a notebook: the terminal's live view (or a callable's lines)."""

    def __init__(self, say: Callable[[str], None] | None = None) -> None:
        self._live = LiveView(sys.stderr) if say is None else None
        self._say = say

    def submitted(self, app_id: str) -> None:
        # The terminal's view says it; a caller's on_event gets YARN's lines only.
        if self._live is not None:
            self._live.event(f"submitted {app_id}")

    def event(self, line: str) -> None:
        if self._live is not None:
            self._live.event(line)
        elif self._say is not None:
            self._say(line)

    def progress(self, p: Progress) -> None:
        if self._live is not None:
            self._live.progress(p)

    def status(self, master: MasterStatus) -> None:
        del master

    def tracking(self, url: str) -> None:
        del url

    def finished(self, outcome: str, diagnostics: str) -> None:
        if self._live is not None:
            self._live.close()

    def close(self) -> None:
        if self._live is not None:
            self._live.close()


class NoView(LinesView):
    def __init__(self) -> None:
        super().__init__(lambda line: None)


def choose(view: Any, job: JobSpec | None = None) -> NotebookView | LinesView:
    """``view``: False for none, a callable for lines; default by where this runs."""
    if view is False:
        return NoView()
    if callable(view):
        return LinesView(view)
    title = f"tfyarn job {job.name!r}" if job is not None else "tfyarn job"
    if view == "notebook" or (view is None and in_notebook()):
        return NotebookView(title)
    return LinesView()


def for_follow(
    on_event: Callable[[str], None] | None, *, live: bool, title: str = "tfyarn job"
) -> NotebookView | LinesView:
    """The view of ``tfyarn.wait``/``tfyarn.submit(..., wait=True)``.

    ``on_event`` given: its lines, as ever. Else inside Jupyter, or ``live``
    asked (``follow=True``): the live view (the notebook's, or the
    terminal's); else nothing, as a script calling ``wait`` expects.
    """
    if on_event is not None:
        return LinesView(on_event)
    if in_notebook():
        return NotebookView(title)
    return LinesView() if live else NoView()
