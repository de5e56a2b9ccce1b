"""Reserve a TCP port for a task's TensorFlow server and hold it for the task's life.

A port chosen by binding and closing a socket can be taken by another process
before TensorFlow binds it (a classic race on busy nodes). Instead we bind with
``SO_REUSEPORT`` and never listen: the socket keeps the port out of every other
process's reach, while TensorFlow, started with ``TF_GRPC_REUSE_PORT=1``, binds
the same port with ``SO_REUSEPORT`` too and listens on it. Linux lets two
sockets share a port only when both set ``SO_REUSEPORT`` and have the same
owner, so unrelated processes still get ``EADDRINUSE``.
"""

from __future__ import annotations

import logging
import socket
import time

log = logging.getLogger("tfyarn.runtime")


def reserve_port(port: int = 0) -> socket.socket:
    """Bind (without listening) a ``SO_REUSEPORT`` socket on ``port`` (0: any).

    Keep the returned socket open for as long as the port must stay reserved;
    ``sock.getsockname()[1]`` is the port.

    Raises
    ------
    OSError
        The port is held by a process that did not set ``SO_REUSEPORT``.
    """
    # IPv6 dual-stack where available: TensorFlow binds "[::]:port", and an
    # IPv4-only reservation would leave the IPv6 side of the port unguarded.
    family = socket.AF_INET6 if socket.has_ipv6 else socket.AF_INET
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError:
        family = socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            sock.bind(("::", port))
        else:
            sock.bind(("0.0.0.0", port))
    except OSError:
        sock.close()
        raise
    return sock


def reserved_port(sock: socket.socket) -> int:
    """The port a socket from :func:`reserve_port` holds."""
    return int(sock.getsockname()[1])


def reserve_task_port(port: int, *, wait: float, poll: float = 0.5) -> socket.socket:
    """Hold a task's port: ``port`` if given and free, else any.

    A replaced task asks for its predecessor's port so its address stays the
    same. Another process of this user may still be serving there (a
    TensorFlow server that outlived its task for a moment): both would bind
    with SO_REUSEPORT and share the connections, so wait up to ``wait``
    seconds until nothing listens there.
    """
    if not port:
        return reserve_port(0)
    deadline = time.monotonic() + wait
    while listening(port) and time.monotonic() < deadline:
        time.sleep(poll)
    try:
        if listening(port):
            raise OSError(f"a server still listens on port {port}")
        return reserve_port(port)
    except OSError as exc:
        # The predecessor's port was taken meanwhile: the master sees the new
        # address and decides (a PS-mode worker's cluster restarts).
        log.warning("port %d is taken (%s); reserving another", port, exc)
        return reserve_port(0)


def listening(port: int) -> bool:
    """Whether something accepts connections on this port of this host."""
    for host in ("127.0.0.1", "::1"):
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            continue
    return False
