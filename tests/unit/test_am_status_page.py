"""The status page the master serves behind YARN's tracking URL."""

from __future__ import annotations

import json
import urllib.request

from am import status_page

SNAPSHOT = {
    "phase": "RUNNING",
    "generation": 1,
    "restarts": 0,
    "lead": "chief:0",
    "diagnostics": "",
    "tasks": [
        {
            "task": "worker:0",
            "attempt": 0,
            "state": "RUNNING",
            "address": "node1:2222",
            "yarn_container_id": "container_1_0001_01_000002",
            "exit_code": None,
            "step": 42,
            "history": ["10:00:00 RUNNING: <received cluster 1>"],
        }
    ],
}


def test_page_shows_every_task_and_escapes_text() -> None:
    html = status_page.render(SNAPSHOT)
    assert "tfyarn job: RUNNING" in html
    assert "<td>worker:0</td>" in html and "<td>node1:2222</td>" in html
    assert "<td>42</td>" in html
    assert "&lt;received cluster 1&gt;" in html


def test_server_answers_html_and_json() -> None:
    server = status_page.serve(lambda: SNAPSHOT, host="127.0.0.1")
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        with urllib.request.urlopen(base + "/", timeout=5) as response:
            assert "worker:0" in response.read().decode()
        with urllib.request.urlopen(base + "/status.json", timeout=5) as response:
            assert json.loads(response.read()) == SNAPSHOT
    finally:
        server.shutdown()
