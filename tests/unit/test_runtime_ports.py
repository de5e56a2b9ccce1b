"""Port reservation with SO_REUSEPORT (tfyarn/runtime/ports.py): a held
reservation lets a second SO_REUSEPORT socket (TensorFlow with
TF_GRPC_REUSE_PORT=1) bind and serve the port, and keeps every other process out.
"""

from __future__ import annotations

import socket

import pytest

from tfyarn.runtime.ports import reserve_port, reserved_port


def _reuseport_socket(family: socket.AddressFamily) -> socket.socket:
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    return sock


def test_reservation_lets_a_reuseport_server_listen_and_serve() -> None:
    held = reserve_port()
    port = reserved_port(held)
    try:
        # TensorFlow's gRPC server binds "[::]:port" with SO_REUSEPORT.
        server = _reuseport_socket(socket.AF_INET6)
        server.bind(("::", port))
        server.listen()
        client = socket.create_connection(("127.0.0.1", port), timeout=5)
        accepted, _ = server.accept()  # the held socket never takes connections
        client.sendall(b"x")
        assert accepted.recv(1) == b"x"
        for s in (client, accepted, server):
            s.close()
    finally:
        held.close()


@pytest.mark.parametrize(
    ("family", "host"), [(socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")]
)
def test_reservation_keeps_a_plain_bind_out(
    family: socket.AddressFamily, host: str
) -> None:
    held = reserve_port()
    try:
        intruder = socket.socket(family, socket.SOCK_STREAM)
        with pytest.raises(OSError, match="in use"):
            intruder.bind((host, reserved_port(held)))
        intruder.close()
    finally:
        held.close()


def test_two_reservations_of_one_port_share_it() -> None:
    # A replaced task (TFYARN_PORT) may reserve the port its predecessor held.
    first = reserve_port()
    second = reserve_port(reserved_port(first))
    assert reserved_port(second) == reserved_port(first)
    first.close()
    second.close()


def test_port_is_free_again_after_release() -> None:
    held = reserve_port()
    port = reserved_port(held)
    held.close()
    plain = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    plain.bind(("0.0.0.0", port))
    assert plain.getsockname()[1] == port
    plain.close()
