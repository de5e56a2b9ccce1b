"""Can this machine reach every server? A TCP connect to each, before the spec is given out.

A gateway behind a firewall is common, and TensorFlow's own symptom of an
unreachable server is a hang or a retrying gRPC error minutes later. A server
set's TensorFlow servers start a moment after the cluster forms (the script
binds the port the runtime holds), so a refused connection is retried until
the deadline; what still fails is named, with what to do.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass

from tfyarn.errors import TfyarnError


class UnreachableServersError(TfyarnError, ConnectionError):
    """This machine cannot open a TCP connection to some servers."""


@dataclass(frozen=True)
class Reach:
    """The outcome of :func:`probe`: this machine's address as the servers see
    it ("" if none answered) and, per unreachable task, why."""

    local_host: str
    failures: dict[str, str]


def probe(
    addresses: Mapping[str, str], *, within: float = 30.0, timeout: float = 3.0
) -> Reach:
    """Connect to each ``task: host:port`` until it accepts or ``within`` passes."""
    deadline = time.monotonic() + within
    left = dict(addresses)
    failures: dict[str, str] = {}
    local_host = ""
    while True:
        for task, address in list(left.items()):
            host, _, port = address.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=timeout) as s:
                    local_host = local_host or s.getsockname()[0]
                del left[task]
                failures.pop(task, None)
            except (OSError, ValueError) as exc:
                failures[task] = _why(exc)
        if not left or time.monotonic() >= deadline:
            return Reach(local_host, {t: failures[t] for t in left})
        time.sleep(0.5)


def check(addresses: Mapping[str, str], *, within: float = 30.0) -> str:
    """This machine's address as the servers see it; raise naming the unreachable.

    Raises
    ------
    UnreachableServersError
        Some servers did not accept a TCP connection within ``within`` seconds.
    """
    reach = probe(addresses, within=within)
    if reach.failures:
        raise UnreachableServersError(unreachable_text(addresses, reach.failures))
    return reach.local_host


def unreachable_text(addresses: Mapping[str, str], failures: Mapping[str, str]) -> str:
    """The message naming each unreachable server and what to do."""
    names = "; ".join(f"{t} at {addresses[t]} ({why})" for t, why in failures.items())
    return (
        f"this machine cannot reach {len(failures)} of {len(addresses)} "
        f"TensorFlow server(s): {names}. The program on the gateway talks to "
        "every server directly: ask the cluster's "
        "administrators to allow TCP from this host to the NodeManagers' "
        "ephemeral ports, or run the program on a host inside the "
        "cluster's network; `tfyarn logs APP --task ROLE:INDEX` shows whether "
        "the server started"
    )


def _why(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused: nothing listens there, or a firewall rejects it"
    if isinstance(exc, (socket.timeout, TimeoutError)):
        return "timed out: a firewall drops the packets, or the host is down"
    if isinstance(exc, socket.gaierror):
        return f"unknown host ({exc.strerror})"
    return str(exc) or type(exc).__name__
