"""The master's read of a NodeManager's account of an ended container."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from am import nodemanager

CID = "container_1_0001_01_000002"
PAGES = {
    f"/ws/v1/node/containers/{CID}": json.dumps(
        {
            "container": {
                "exitCode": 7,
                "diagnostics": "Exception from container-launch.\nExit code: 7\n"
                "Shell error output: image: team/tf:1 is not trusted.",
            }
        }
    ),
    f"/ws/v1/node/containerlogs/{CID}/stderr": "Container: c on n\nLogType:stderr\n"
    "LogLength:30\nLogContents:\nUnable to find image 'team/tf:1'\n"
    "End of LogType:stderr\n",
}


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = PAGES.get(self.path.split("?")[0])
        self.send_response(200 if body else 404)
        self.end_headers()
        self.wfile.write((body or "").encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def node() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_the_account_holds_the_diagnostics_and_the_stderr_tail(node: str) -> None:
    text = asyncio.run(nodemanager.account(node, CID))
    assert "Exit code: 7" in text and "is not trusted" in text
    assert "stderr: Unable to find image 'team/tf:1'" in text
    assert "LogLength" not in text and "End of LogType" not in text


def test_a_node_that_forgot_the_container_or_is_gone_says_nothing(node: str) -> None:
    assert asyncio.run(nodemanager.account(node, "container_9_9_9_9")) == ""
    assert asyncio.run(nodemanager.account("127.0.0.1:9", CID)) == ""
    assert asyncio.run(nodemanager.account("", CID)) == ""
