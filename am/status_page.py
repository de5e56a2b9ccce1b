"""The job's page behind YARN's tracking URL (skein's web UI proxies it).

A stdlib HTTP server in a daemon thread, serving three paths from the latest
snapshot the reconcile loop published (so nothing here touches the state from
another thread): the page (hand-written HTML, refreshed by the browser every
few seconds; every value escaped), ``status.json`` (the snapshot itself) and
``metrics`` (Prometheus text, am/metrics.py). Links are relative, so they work
behind both proxies (the ResourceManager's, then skein's ``/pages/tfyarn/``).
"""

from __future__ import annotations

import html
import json
import logging
import re
import threading
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote, urlsplit

from tfyarn.contract.status import TaskStatus

log = logging.getLogger(__name__)

REFRESH_SECONDS = 5
Rates = Callable[[dict[str, Any]], dict[str, float]]
# (serving, a few words): the job's TensorBoard, when it asked for one.
TensorBoardState = Callable[[], tuple[bool, str]]

# A NodeManager web address as skein reports it (host:port); anything else
# gets no link rather than a crafted one.
_NODE_ADDRESS = re.compile(r"^[A-Za-z0-9.\-]+:\d+$")

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1em 2em;color:#222}
h1{font-size:1.4em} h2{font-size:1.1em;margin-top:1.4em}
.phase{padding:2px 8px;border-radius:4px;background:#ddd}
.phase-RUNNING,.phase-SUCCEEDED{background:#c8efc8}
.phase-FAILED,.phase-KILLED{background:#f4c2c2}
.phase-RESTARTING,.phase-STOPPING,.phase-FINISHING,
.phase-WAITING_FOR_RESOURCES{background:#fbe3b0}
table{border-collapse:collapse} td,th{padding:3px 9px;text-align:left;
border-bottom:1px solid #ddd;font-size:0.92em;white-space:nowrap}
td.wrap{white-space:normal;min-width:9em}
td.wrap:last-child{min-width:10em}
th{background:#f3f3f3}
.bar{width:32em;height:1.1em;background:#eee;border:1px solid #bbb}
.fill{height:100%;background:#4a8fdc}
pre{background:#f7f7f7;padding:0.6em;white-space:pre-wrap}
.muted{color:#777}
"""


def esc(value: object) -> str:
    """Text (or an attribute value) safe in HTML; None is empty."""
    return "" if value is None else html.escape(str(value), quote=True)


def log_url(node: str | None, container: str | None, user: str) -> str | None:
    """The NodeManager's page of a container's logs (while it runs), or None."""
    if not (node and container and user and _NODE_ADDRESS.match(node)):
        return None
    return f"http://{node}/node/containerlogs/{quote(container)}/{quote(user)}"


def render(
    snapshot: dict[str, Any],
    *,
    user: str = "",
    rates: dict[str, float] | None = None,
    now: float | None = None,
    tensorboard: tuple[bool, str] | None = None,
) -> str:
    """The snapshot as one HTML page.

    ``user``: the application's user (the NodeManager's log pages need it);
    ``rates``: steps/s by task; ``now``: wall-clock seconds (tests pin it);
    ``tensorboard``: (serving, words) when the job has a TensorBoard.
    """
    now = time.time() if now is None else now
    rates = rates or {}
    phase = str(snapshot.get("phase") or "UNKNOWN")
    refresh = (
        ""
        if phase in ("SUCCEEDED", "FAILED", "KILLED")
        else f"<meta http-equiv='refresh' content='{REFRESH_SECONDS}'>"
    )
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        refresh,
        # The title reads "tfyarn job: RUNNING" as the first page did (a tab's
        # name; tests/integration/test_master.py looks for it).
        f"<title>tfyarn job: {esc(phase)}</title><style>{_STYLE}</style></head><body>",
        (
            f"<h1>tfyarn job: <span id='phase' class='phase phase-{esc(phase)}'>"
            f"{esc(phase)}</span></h1>"
        ),
        _summary(snapshot, now),
        _tensorboard(tensorboard),
        _progress(snapshot, rates),
        _restarts(snapshot),
        _diagnostics(snapshot),
        "<h2>Tasks</h2>",
        _task_table(snapshot.get("tasks", []), user, rates),
        (
            "<p class='muted'><a href='status.json'>status.json</a> · "
            "<a href='metrics'>metrics</a> (Prometheus) · "
            f"refreshes every {REFRESH_SECONDS} s while the job runs</p>"
        ),
        "</body></html>",
    ]
    return "".join(parts)


def _summary(snap: dict[str, Any], now: float) -> str:
    items = [f"generation {esc(snap.get('generation', 0))}"]
    restarts = f"restarts {esc(snap.get('restarts', 0))}"
    if snap.get("max_restarts") is not None:
        restarts += (
            f" (budget used {esc(snap.get('budget_used', 0))}"
            f" of {esc(snap['max_restarts'])})"
        )
    items.append(restarts)
    if snap.get("disruptions"):
        items.append(
            f"<span id='disruptions'>taken back by YARN "
            f"{esc(snap['disruptions'])} (max_disruptions "
            f"{esc(snap.get('max_disruptions'))}, not charged to max_restarts: "
            f"{esc(_kinds(snap.get('disruption_kinds') or {}))})</span>"
        )
    if snap.get("resizes"):
        workers = sum(t.get("role") == "worker" for t in snap.get("tasks", []))
        items.append(
            f"<span id='resizes'>resizes {esc(snap['resizes'])} (now "
            f"{esc(workers)} workers; not charged to max_restarts)</span>"
        )
    if snap.get("stop_notice"):
        items.append(f"<span id='stop-notice'>{esc(snap['stop_notice'])}</span>")
    items.append(f"lead {esc(snap.get('lead'))}")
    started = snap.get("started")
    if started is not None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started))
        items.append(f"started {esc(stamp)} ({_duration(now - started)} ago)")
        if snap.get("cluster_formed_at") is not None:
            formed = snap["cluster_formed_at"] - started
            items.append(f"cluster formed after {_duration(formed)}")
    if snap.get("master_address"):
        items.append(f"master {esc(snap['master_address'])}")
    return "<p id='summary'>" + " · ".join(items) + "</p>"


def _kinds(kinds: dict[str, int]) -> str:
    """``2 preempted, 1 released``."""
    return ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))


def _tensorboard(state: tuple[bool, str] | None) -> str:
    if state is None:
        return ""
    serving, words = state
    if not serving:
        return f"<p id='tensorboard' class='muted'>{esc(words)}</p>"
    # Relative: skein serves it at /pages/tensorboard/, this page at /pages/tfyarn/.
    return (
        "<p id='tensorboard'><a href='../tensorboard/'>TensorBoard</a> "
        f"<span class='muted'>{esc(words)}</span></p>"
    )


def _progress(snap: dict[str, Any], rates: dict[str, float]) -> str:
    # The lead task's step against total_steps, as in YARN's own progress bar
    # (am/publish.py: yarn_progress) and tfyarn.report_progress's docs.
    lead = next(
        (t for t in snap.get("tasks", []) if t["task"] == snap.get("lead")), None
    )
    if lead is None or lead.get("step") is None:
        return "<p id='progress' class='muted'>no progress reported yet</p>"
    step = lead["step"]
    total = (lead.get("metrics") or {}).get("total_steps")
    rate = rates.get(lead["task"])
    speed = f" · {rate:.2f} steps/s" if rate else ""
    if not total:
        return (
            f"<p id='progress'>{esc(lead['task'])} at step {esc(step)}{speed} "
            "<span class='muted'>(report total_steps for a progress bar)</span></p>"
        )
    percent = max(0.0, min(100.0, 100.0 * step / total))
    eta = ""
    if rate and rate > 0 and step < total:
        eta = f" · about {_duration((total - step) / rate)} left"
    return (
        f"<div id='progress'><div class='bar' role='progressbar' aria-valuemin='0' "
        f"aria-valuemax='100' aria-valuenow='{percent:.0f}'>"
        f"<div class='fill' style='width:{percent:.1f}%'></div></div>"
        f"<p>{esc(lead['task'])}: step {esc(step)} of {esc(int(total))} "
        f"({percent:.0f}%){speed}{eta}</p></div>"
    )


def _restarts(snap: dict[str, Any]) -> str:
    out = ""
    reasons = snap.get("restart_reasons") or []
    if reasons:
        items = "".join(f"<li>{esc(r)}</li>" for r in reasons)
        out += f"<h2>Restarts</h2><ol id='restarts'>{items}</ol>"
    taken = snap.get("disruption_reasons") or []
    if taken:
        items = "".join(f"<li>{esc(r)}</li>" for r in taken)
        out += (
            "<h2>Containers taken back by YARN</h2>"
            f"<ol id='disruption-reasons'>{items}</ol>"
        )
    resized = snap.get("resize_reasons") or []
    if resized:
        items = "".join(f"<li>{esc(r)}</li>" for r in resized)
        out += f"<h2>Resizes</h2><ol id='resize-reasons'>{items}</ol>"
    return out


def _diagnostics(snap: dict[str, Any]) -> str:
    diag = snap.get("diagnostics") or ""
    return (
        f"<h2>Diagnostics</h2><pre id='diagnostics'>{esc(diag)}</pre>" if diag else ""
    )


_COLUMNS = (
    "task",
    "state",
    "host:port",
    "container",
    "attempt",
    "step",
    "steps/s",
    "metrics",
    "gpus",
    "heartbeat",
    "exit",
    "logs",
    "last event",
)
# Long values wrap and container ids are shortened (the full id in a
# tooltip), so the table fits a laptop's window instead of hiding the log
# links past its right edge.
_CELL_CLASS = {
    "container": "id",
    "metrics": "wrap",
    "gpus": "wrap",
    "logs": "wrap",
    "last event": "wrap",
}


def _container_cell(container: str | None) -> str:
    """A container id by what tells it apart in this job (``…01_000002``:
    attempt and number), the whole id as its tooltip."""
    if not container:
        return ""
    short = "…" + "_".join(container.split("_")[-2:])
    return f"<span title='{esc(container)}'>{esc(short)}</span>"


def _gpus_cell(task: dict[str, Any]) -> str:
    """Each GPU's index (its UUID as the tooltip) and nvidia-smi's figures."""
    parts = []
    for g in task.get("gpus") or []:
        text = esc(g.get("index"))
        if g.get("utilization") is not None:
            text += f" {_number(g['utilization'])}% {_number(g.get('memory_used_mib', 0))} MiB"
        parts.append(f"<span title='{esc(g.get('uuid'))}'>{text}</span>")
    error = task.get("gpu_error")
    if error:
        parts.append(f"<span class='error'>nvidia-smi fails: {esc(error)}</span>")
    return ", ".join(parts)


def _task_table(
    tasks: Iterable[dict[str, Any]], user: str, rates: dict[str, float]
) -> str:
    head = "".join(f"<th>{esc(c)}</th>" for c in _COLUMNS)
    rows = []
    for t in tasks:
        rate = rates.get(t["task"])
        age = t.get("last_heartbeat_age")
        metrics = t.get("metrics") or {}
        url = log_url(t.get("node"), t.get("yarn_container_id"), user)
        # skein sends a service's stdout and stderr to <service>.log; the
        # listing also has YARN's launch files.
        output = f"{url}/{quote(t['role'])}.log/?start=-65536" if url else ""
        logs = (
            f"<a href='{esc(output)}'>output</a> · <a href='{esc(url)}'>all logs</a>"
            if url
            else ""
        )
        cells = [
            esc(t["task"]),
            esc(_shown_state(t)),
            esc(t.get("address")),
            _container_cell(t.get("yarn_container_id")),
            esc(t.get("attempt", 0)),
            esc(t.get("step")),
            "" if rate is None else f"{rate:.2f}",
            esc(", ".join(f"{k}={_number(v)}" for k, v in sorted(metrics.items()))),
            _gpus_cell(t),
            "" if age is None else f"{esc(age)} s ago",
            esc(t.get("exit_code")),
            logs,
            esc((t.get("history") or [""])[-1]),
        ]
        rows.append(
            f"<tr class='task' data-task='{esc(t['task'])}' "
            f"data-state='{esc(t['state'])}'>"
            + "".join(
                f"<td class='{_CELL_CLASS[col]}'>{c}</td>"
                if col in _CELL_CLASS
                else f"<td>{c}</td>"
                for col, c in zip(_COLUMNS, cells, strict=True)
            )
            + "</tr>"
        )
    return f"<table id='tasks'><tr>{head}</tr>{''.join(rows)}</table>"


def _shown_state(task: dict[str, Any]) -> str:
    """The task's state; a taken-back attempt's reads PREEMPTED, not LOST."""
    shown = TaskStatus.from_dict(task).shown_state()
    word = task.get("disruption") or ""
    return f"{shown} ({word})" if word and shown == task["state"] else shown


def _number(value: object) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def serve(
    snapshot: Callable[[], dict[str, Any]],
    host: str = "0.0.0.0",
    *,
    user: str = "",
    metrics: Callable[[], tuple[bytes, str]] | None = None,
    rates: Rates | None = None,
    tensorboard: TensorBoardState | None = None,
) -> ThreadingHTTPServer:
    """Start the page on an ephemeral port in a daemon thread; return the server.

    ``metrics`` returns the body and content type of ``/metrics``; ``rates``
    turns a snapshot into steps/s by task (am/metrics.py: StepRates.observe).
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urlsplit(self.path).path.rstrip("/")
            try:
                if path.endswith("/metrics") and metrics is not None:
                    body, kind = metrics()
                else:
                    snap = snapshot()
                    if path.endswith("status.json"):
                        body, kind = json.dumps(snap).encode(), "application/json"
                    else:
                        seen = rates(snap) if rates and snap else {}
                        board = tensorboard() if tensorboard else None
                        page = render(snap, user=user, rates=seen, tensorboard=board)
                        body, kind = page.encode(), "text/html; charset=utf-8"
                status = 200
            except Exception as exc:  # a page error must not cost the job
                log.exception("status page: %s failed", self.path)
                body = f"tfyarn status page error: {exc}".encode()
                kind, status = "text/plain; charset=utf-8", 500
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep the master's log for the job

    server = ThreadingHTTPServer((host, 0), Handler)
    server.daemon_threads = True
    threading.Thread(
        target=server.serve_forever, name="status-page", daemon=True
    ).start()
    return server
