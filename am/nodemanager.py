"""What a NodeManager says about a container that ended before its task reported.

skein's AM reports such a container only as "Container failed during
execution, see logs for more information.": YARN's own diagnostics (the exit
code, container-executor's and Docker's words) are dropped. The NodeManager
still has them: its web service's ``/ws/v1/node/containers/<id>``
(``exitCode``, ``diagnostics``) while it tracks the container, and the
container's ``stderr`` (where a launch that found no interpreter says so)
until the application's logs are aggregated. Both are read once, in a thread,
with a short timeout; whatever answers goes into the master's diagnostics.
"""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from urllib.parse import quote

HTTP_TIMEOUT = 5.0
STDERR_TAIL = 2048


async def account(node: str, container: str) -> str:
    """The NodeManager's words on ``container`` ("" when it has none)."""
    if not node or not container:
        return ""
    return await asyncio.to_thread(_account, node, container)


def _account(node: str, container: str) -> str:
    base = node if node.startswith(("http://", "https://")) else f"http://{node}"
    parts = []
    raw = _get(f"{base}/ws/v1/node/containers/{quote(container)}")
    if raw:
        try:
            info = json.loads(raw).get("container", {})
        except (ValueError, AttributeError):
            info = {}
        code = info.get("exitCode")
        diagnostics = str(info.get("diagnostics") or "").strip()
        if code is not None and "xit code" not in diagnostics:
            parts.append(f"Exit code: {code}")
        if diagnostics:
            parts.append(diagnostics)
    tail = _get(
        f"{base}/ws/v1/node/containerlogs/{quote(container)}/stderr?size=-{STDERR_TAIL}"
    )
    text = _log_contents(tail)
    if text:
        parts.append("stderr: " + text)
    return "\n".join(parts)


def _get(url: str) -> str:
    try:
        with urllib.request.urlopen(url, timeout=HTTP_TIMEOUT) as reply:
            return bytes(reply.read()).decode(errors="replace")
    except (urllib.error.URLError, OSError, ValueError):
        return ""  # the node forgot it, or is gone: YARN's words are all there is


def _log_contents(raw: str) -> str:
    """The file's text from the NodeManager's ``yarn logs``-style answer."""
    if "LogContents:" in raw:
        raw = raw.split("LogContents:", 1)[1]
    raw = raw.split("End of LogType:", 1)[0]
    lines = [line.strip() for line in raw.splitlines() if line.strip()]
    return " | ".join(lines[-5:])
