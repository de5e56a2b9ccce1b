"""The DataNode registration probe against a real HTTP server serving the
DataNode's JMX answer."""

from __future__ import annotations

import http.server
import json
from collections.abc import Iterator

import pytest
from _http_server import serving

from tfyarn.cluster import _probe


def _jmx(actor_states: list[str]) -> dict[str, object]:
    actors = [
        {"NamenodeAddress": "localhost:8020", "ActorState": s} for s in actor_states
    ]
    return {"beans": [{"BPServiceActorInfo": json.dumps(actors)}]}


@pytest.fixture
def datanode_web() -> Iterator[tuple[int, list[object]]]:
    """A port answering ``/jmx`` with the last item of the returned list."""
    answers: list[object] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(answers[-1]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as port:
        yield port, answers


def test_a_datanode_is_registered_once_an_actor_runs(
    datanode_web: tuple[int, list[object]],
) -> None:
    port, answers = datanode_web
    answers.append(_jmx(["CONNECTING"]))
    assert not _probe.datanode_registered(port)
    answers.append(_jmx([]))
    assert not _probe.datanode_registered(port)
    # HA: registered with one NameNode of two is enough to serve.
    answers.append(_jmx(["CONNECTING", "RUNNING"]))
    assert _probe.datanode_registered(port)
    answers.append({"beans": [{"BPServiceActorInfo": "not json"}]})
    assert not _probe.datanode_registered(port)


def test_a_datanode_that_does_not_answer_is_not_registered() -> None:
    assert not _probe.datanode_registered(1)
