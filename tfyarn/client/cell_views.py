"""How a job's status and logs show in a notebook cell.

``tfyarn.status(app_id)`` and ``tfyarn.logs(app_id, ...)`` return plain
objects (a :class:`~tfyarn.client.jobs.JobStatus`, a list of
:class:`~tfyarn.client.tasklogs.TaskLog`); as a cell's last value IPython
shows them through ``_repr_html_`` (a notebook) or ``_repr_pretty_`` (a
console), rendered here: the status as a short table with the tasks
summarized as the live view does (:mod:`~tfyarn.client.notebook_view`), each
log under its task's label, long logs cut to their tail.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any, Protocol

from tfyarn.client.notebook_view import ViewState, render_html, render_text, summarize


# What is shown of a job's status and of a task's log. Protocols, not the
# classes: jobs.py and tasklogs.py render through this module, which must not
# import them back.
class JobStatus(Protocol):
    @property
    def name(self) -> str: ...

    @property
    def app_id(self) -> str: ...

    @property
    def state(self) -> str: ...

    @property
    def tracking_url(self) -> str: ...

    @property
    def master(self) -> Any: ...

    @property
    def queue(self) -> str: ...

    @property
    def user(self) -> str: ...

    @property
    def diagnostics(self) -> str: ...

    @property
    def record_missing(self) -> str: ...

    @property
    def done(self) -> bool: ...

    @property
    def outcome(self) -> str: ...


class TaskLog(Protocol):
    @property
    def label(self) -> str: ...

    @property
    def text(self) -> str: ...


# A log longer than this shows its last this many characters in a cell.
LOG_TAIL = 20_000


def _state(st: JobStatus) -> ViewState:
    view = ViewState(
        title=f"tfyarn job {st.name!r}" if st.name else "tfyarn job",
        app_id=st.app_id,
        state=st.state,
        tracking_url=st.tracking_url,
        summary=summarize(st.master) if st.master else None,
    )
    if st.done:
        view.final = st.outcome
    return view


def status_text(st: JobStatus) -> str:
    lines = [render_text(_state(st))]
    lines.append(f"queue {st.queue or '?'}, user {st.user or '?'}")
    if st.diagnostics.strip():
        lines.append("diagnostics: " + st.diagnostics.strip())
    if st.record_missing:
        lines.append(st.record_missing)
    return "\n".join(lines)


def status_html(st: JobStatus) -> str:
    extra = f"<div>queue {html.escape(st.queue or '?')}, user {html.escape(st.user or '?')}</div>"
    if st.diagnostics.strip():
        extra += (
            '<pre style="white-space:pre-wrap;margin:0">'
            + html.escape(st.diagnostics.strip())
            + "</pre>"
        )
    return render_html(_state(st)) + extra


def _tail(text: str) -> str:
    if len(text) <= LOG_TAIL:
        return text
    return f"[... {len(text) - LOG_TAIL} earlier characters]\n" + text[-LOG_TAIL:]


def logs_text(entries: Sequence[TaskLog]) -> str:
    return "\n".join(f"==> {e.label} <==\n{_tail(e.text).rstrip()}\n" for e in entries)


def logs_html(entries: Sequence[TaskLog]) -> str:
    parts = []
    for i, e in enumerate(entries):
        opened = " open" if i == 0 or len(entries) <= 2 else ""
        parts.append(
            f"<details{opened}><summary><b>{html.escape(e.label)}</b></summary>"
            '<pre style="max-height:30em;overflow:auto;margin:0">'
            f"{html.escape(_tail(e.text).rstrip())}</pre></details>"
        )
    return "".join(parts) or "<i>no logs</i>"


class TaskLogs(list):
    """What :func:`tfyarn.logs` returns: a list of TaskLog that shows well in a cell."""

    def _repr_html_(self) -> str:
        return logs_html(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(logs_text(self))
