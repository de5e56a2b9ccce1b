"""A small status page behind YARN's tracking URL (skein's web UI proxies it).

A stdlib HTTP server in a daemon thread; it only reads the latest snapshot the
reconcile loop published, so it never touches the state from another thread.
"""

from __future__ import annotations

import html
import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def render(snapshot: dict[str, Any]) -> str:
    """The snapshot as one HTML page (refreshes itself every 5 s)."""
    rows = []
    for t in snapshot.get("tasks", []):
        cells = [
            t["task"],
            str(t["attempt"]),
            t["state"],
            t.get("address") or "",
            t.get("yarn_container_id") or "",
            "" if t.get("exit_code") is None else str(t["exit_code"]),
            "" if t.get("step") is None else str(t["step"]),
            (t.get("history") or [""])[-1],
        ]
        rows.append(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"
        )
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "task",
            "attempt",
            "state",
            "address",
            "container",
            "exit",
            "step",
            "last event",
        )
    )
    diag = html.escape(snapshot.get("diagnostics") or "")
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        "<meta http-equiv='refresh' content='5'><title>tfyarn</title>"
        "<style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:left}"
        "</style></head><body>"
        f"<h2>tfyarn job: {html.escape(str(snapshot.get('phase')))}</h2>"
        f"<p>generation {snapshot.get('generation')}, restarts {snapshot.get('restarts')}, "
        f"lead {html.escape(str(snapshot.get('lead')))}</p>"
        f"<pre>{diag}</pre><table><tr>{head}</tr>{''.join(rows)}</table>"
        "<p><a href='status.json'>status.json</a></p></body></html>"
    )


def serve(
    snapshot: Callable[[], dict[str, Any]], host: str = "0.0.0.0"
) -> ThreadingHTTPServer:
    """Start the page on an ephemeral port in a daemon thread; return the server."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            snap = snapshot()
            if self.path.rstrip("/").endswith("status.json"):
                body, kind = json.dumps(snap).encode(), "application/json"
            else:
                body, kind = render(snap).encode(), "text/html; charset=utf-8"
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
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
