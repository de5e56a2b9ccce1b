"""A container's log files read from its NodeManager's web service.

Used while a task runs (``tfyarn logs -f``) and on clusters without log
aggregation, where the NodeManager keeps every container's files for
``yarn.nodemanager.log.retain-seconds`` and serves them, finished or not.
Measured on Hadoop 3.4.3:

- ``GET /ws/v1/node/containers/<container>/logs``: JSON list of the files
  (``fileName``, ``fileSize``); 404 for a container the node does not hold.
- ``GET /ws/v1/node/containerlogs/<container>/<file>?size=-N``: plain text in
  ``yarn logs``' own layout (``Container: ... on node``, ``LogLength:L``,
  ``LogContents:``, then exactly the last ``min(N, L)`` bytes of the file's
  first ``L`` bytes, then ``End of LogType:...``). ``LogLength`` is the length
  the tail is cut from, which makes reading from an offset exact.
- ``GET /ws/v1/node/apps/<app>``: 200 while the node holds the application
  (until its logs are aggregated or, without aggregation, deleted).

The HTML page ``/node/containerlogs/<container>/<user>/<file>/?start=`` takes
byte offsets too, but escapes the text inside a page; the REST form is plain.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from tfyarn.errors import TfyarnError

# Per request; a NodeManager answers in milliseconds, a dead one must not hang logs -f.
HTTP_TIMEOUT = 10.0
# Tail window asked beyond what is known to be new (the file grows meanwhile).
SLACK = 64 * 1024
# Never ask for more than this at once; what a burst wrote beyond it is skipped
# (and said so) rather than held in memory.
MAX_CHUNK = 8 * 1024 * 1024
_LENGTH = re.compile(rb"^LogLength:\s*(\d+)\s*$", re.MULTILINE)
_CONTENTS = b"LogContents:\n"


class NodeLogsError(TfyarnError):
    """A NodeManager's web service could not be reached or did not answer as expected."""


class NotOnNode(NodeLogsError):
    """The node does not hold this container or application (HTTP 404)."""


def _get(url: str) -> bytes:
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT) as reply:
            return bytes(reply.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise NotOnNode(f"{url}: not on this node (HTTP 404)") from None
        raise NodeLogsError(
            f"the NodeManager answered HTTP {exc.code} to {url}; if it asks for "
            "authentication (SPNEGO), read the logs with `yarn logs` once they are "
            "aggregated, or from the node's log directory"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise NodeLogsError(
            f"cannot reach the NodeManager's web service at {url} ({reason}); "
            "check that the node is up and its web port reachable from here"
        ) from None


def _base(node: str) -> str:
    return node if node.startswith(("http://", "https://")) else f"http://{node}"


def has_app(node: str, app_id: str) -> bool:
    """Whether the NodeManager at ``node`` (host:port of its web UI) holds the app."""
    try:
        _get(f"{_base(node)}/ws/v1/node/apps/{quote(app_id)}")
    except NotOnNode:
        return False
    return True


def log_files(node: str, container: str) -> dict[str, int]:
    """File name -> size of a container's log directory on ``node``.

    Raises
    ------
    NotOnNode
        The node does not hold the container (or no longer).
    NodeLogsError
        The node's web service is unreachable or answered garbage.
    """
    raw = _get(f"{_base(node)}/ws/v1/node/containers/{quote(container)}/logs")
    try:
        doc = json.loads(raw)
        # One container: {"containerLogsInfo": {...}}; Hadoop 3 may wrap a list.
        info = doc.get("containerLogsInfo", doc)
        infos = info if isinstance(info, list) else [info]
        return {
            str(f["fileName"]): int(f["fileSize"])
            for i in infos
            for f in _as_list(i.get("containerLogInfo"))
        }
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise NodeLogsError(
            f"the NodeManager at {node} listed the logs of {container} in an "
            f"unexpected form ({exc}); is it a Hadoop 3 NodeManager?"
        ) from None


def _as_list(value: Any) -> list[Any]:
    # Jersey's JSON gives one element bare, several as a list.
    if value is None:
        return []
    return value if isinstance(value, list) else [value]


def raw_log(node: str, container: str, name: str, tail: int | None = None) -> bytes:
    """The NodeManager's text for one file (``yarn logs`` layout, see module doc)."""
    size = f"?size=-{tail}" if tail is not None else ""
    return _get(
        f"{_base(node)}/ws/v1/node/containerlogs/{quote(container)}/{quote(name)}{size}"
    )


@dataclass(frozen=True)
class Chunk:
    """New bytes of a file: ``data`` starts at ``offset``; ``skipped`` bytes
    before it were never read (a burst larger than :data:`MAX_CHUNK`)."""

    data: bytes
    offset: int
    skipped: int = 0

    @property
    def end(self) -> int:
        return self.offset + len(self.data)


def parse_tail(raw: bytes) -> tuple[int, bytes]:
    """(file length, tail bytes) of one :func:`raw_log` answer."""
    m = _LENGTH.search(raw)
    start = raw.find(_CONTENTS)
    if not m or start < 0:
        raise NodeLogsError(
            "the NodeManager's log text has no LogLength/LogContents header; "
            "is it a Hadoop 3 NodeManager?"
        )
    return int(m.group(1)), raw[start + len(_CONTENTS) :]


def read_from(node: str, container: str, name: str, offset: int, size: int) -> Chunk:
    """The bytes of a file from ``offset`` on, given its listed ``size``.

    The file may have grown since it was listed: the window asked for is
    ``size - offset`` plus :data:`SLACK`, and the answer's ``LogLength`` says
    where the tail it holds begins.
    """
    want = min(max(size - offset, 0) + SLACK, MAX_CHUNK)
    length, tail = parse_tail(raw_log(node, container, name, tail=want))
    n = min(want, length)
    tail = tail[:n]  # drop the "End of LogType" trailer
    if length < offset:  # a shorter file: not the one read before; start over
        return Chunk(tail, length - n, 0)
    new = length - offset
    if new <= n:
        return Chunk(tail[n - new :], offset)
    return Chunk(tail, length - n, skipped=new - n)
