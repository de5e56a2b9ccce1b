"""A connection to the tfyarn master: mutual TLS with the app's credentials.

The master serves with the application's own skein certificate (CN
``skein-internal``, no SAN), present in every container's working directory as
``.skein.crt`` / ``.skein.pem``; clients present the same pair, as skein's own
``secure_channel`` does.

gRPC errors become tfyarn exceptions here and nowhere else
(:func:`translate`), as skein's ``_ClientBase._call`` does: callers catch
:class:`~tfyarn.errors.MasterUnavailableError` (worth retrying) and
:class:`~tfyarn.errors.MasterRefusedError` (not), never ``grpc.RpcError``.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import grpc

from tfyarn._proto import master_pb2 as pb
from tfyarn._proto import master_pb2_grpc
from tfyarn.errors import MasterError, MasterRefusedError, MasterUnavailableError

T = TypeVar("T")

# The certificate has no SAN; its CN is what clients must expect.
TARGET_NAME = "skein-internal"
CHANNEL_OPTIONS = (
    ("grpc.ssl_target_name_override", TARGET_NAME),
    ("grpc.default_authority", TARGET_NAME),
    # A 5000-task ClusterSpec is ~150 kB; leave generous room above the 4 MB default.
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
)

# Worth retrying: the master is starting, restarting or briefly overloaded.
_TRANSIENT = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
# The master refuses this call: the task is unknown or replaced, or the request
# is malformed. Retrying cannot help.
_REFUSED = frozenset(
    {
        grpc.StatusCode.FAILED_PRECONDITION,
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.UNAUTHENTICATED,
    }
)


def translate(exc: grpc.RpcError, what: str, address: str) -> MasterError:
    """The tfyarn exception for a failed call ``what`` to the master at ``address``."""
    code = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    detail = exc.details() if hasattr(exc, "details") else str(exc)
    if code in _TRANSIENT:
        return MasterUnavailableError(
            f"{what}: the tfyarn master at {address} did not answer ({detail})"
        )
    if code in _REFUSED:
        return MasterRefusedError(code.name, f"{what}: the master refused: {detail}")
    return MasterError(f"{what}: the master at {address} failed: {code.name} {detail}")


def find_credentials() -> tuple[bytes, bytes]:
    """The application's (certificate, key) PEM bytes, from this container.

    Looks in the working directory, then in the container's directory among
    YARN's ``LOCAL_DIRS`` (where skein puts them).
    """
    candidates = [Path.cwd()]
    container = os.environ.get("CONTAINER_ID")
    if container:
        for local in os.environ.get("LOCAL_DIRS", "").split(","):
            if local:
                candidates.append(Path(local) / container)
    for directory in candidates:
        cert, key = directory / ".skein.crt", directory / ".skein.pem"
        if cert.is_file() and key.is_file():
            return cert.read_bytes(), key.read_bytes()
    raise MasterUnavailableError(
        "the application's TLS credentials (.skein.crt, .skein.pem) were not found "
        f"in {[str(c) for c in candidates]}; is this running in a tfyarn container?"
    )


def credentials_of(security: Any) -> tuple[bytes, bytes]:
    """(certificate, key) PEM bytes of a ``skein.Security``, through its public fields."""

    def read(kind: str) -> bytes:
        data = getattr(security, f"{kind}_bytes", None)
        if data is not None:
            return bytes(data)
        source = getattr(security, f"{kind}_file").source
        path = source.removeprefix("file://")
        return Path(path).read_bytes()

    return read("cert"), read("key")


def secure_channel(address: str, cert: bytes, key: bytes) -> grpc.Channel:
    """A mutual-TLS channel to ``address`` using the app's certificate and key."""
    creds = grpc.ssl_channel_credentials(
        root_certificates=cert, private_key=key, certificate_chain=cert
    )
    return grpc.secure_channel(address, creds, options=CHANNEL_OPTIONS)


def backoff_delays(
    first: float = 0.1, cap: float = 2.0, rng: random.Random | None = None
) -> Callable[[], float]:
    """Exponential backoff with full jitter: each call returns the next delay."""
    rng = rng or random.Random()
    state = {"ceiling": first}

    def next_delay() -> float:
        delay = rng.uniform(0, state["ceiling"])
        state["ceiling"] = min(cap, state["ceiling"] * 2)
        return delay

    return next_delay


def call_until(
    what: str,
    fn: Callable[[float], T],
    *,
    deadline: float,
    attempt_timeout: float = 10.0,
) -> T:
    """Call ``fn(timeout)`` until it succeeds, retrying while the master is unavailable.

    ``fn`` makes one call through :class:`MasterClient` (which raises tfyarn
    errors). Retries :class:`MasterUnavailableError` with jittered backoff until
    the monotonic ``deadline``.

    Raises
    ------
    MasterUnavailableError
        The master did not answer before the deadline.
    MasterRefusedError
        The master answered and refused; retrying cannot fix it.
    """
    delay = backoff_delays()
    started = time.monotonic()
    last: MasterUnavailableError | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise MasterUnavailableError(
                f"{what}: no answer within {time.monotonic() - started:.0f} s "
                f"(last error: {last or 'no attempt made'}). Check the application "
                "master's log (yarn logs -applicationId ...)."
            ) from last
        try:
            return fn(min(attempt_timeout, left))
        except MasterUnavailableError as exc:
            last = exc
        time.sleep(min(delay(), max(0.0, deadline - time.monotonic())))


class MasterClient:
    """Blocking client of the master's ``tfyarn.Master`` service.

    Every method raises tfyarn errors (see :func:`translate`).

    Examples
    --------
    >>> master = MasterClient("host:1234")  # doctest: +SKIP
    >>> master.heartbeat(request, timeout=5)  # doctest: +SKIP
    >>> master.close()  # doctest: +SKIP
    """

    def __init__(
        self, address: str, credentials: tuple[bytes, bytes] | None = None
    ) -> None:
        cert, key = credentials or find_credentials()
        self.address = address
        self.channel = secure_channel(address, cert, key)
        self._stub = master_pb2_grpc.MasterStub(self.channel)

    def _unary(self, rpc: str, request: Any, timeout: float) -> Any:
        try:
            return getattr(self._stub, rpc)(request, timeout=timeout)
        except grpc.RpcError as exc:
            raise translate(exc, rpc, self.address) from exc

    def heartbeat(
        self, request: pb.HeartbeatRequest, *, timeout: float
    ) -> pb.HeartbeatReply:
        return self._unary("Heartbeat", request, timeout)

    def report_progress(
        self, request: pb.ReportProgressRequest, *, timeout: float
    ) -> pb.ReportProgressReply:
        return self._unary("ReportProgress", request, timeout)

    def report_task_end(
        self, request: pb.ReportTaskEndRequest, *, timeout: float
    ) -> pb.ReportTaskEndReply:
        return self._unary("ReportTaskEnd", request, timeout)

    def stop_job(
        self, request: pb.StopJobRequest, *, timeout: float
    ) -> pb.StopJobReply:
        return self._unary("StopJob", request, timeout)

    def resize(self, request: pb.ResizeRequest, *, timeout: float) -> pb.ResizeReply:
        return self._unary("Resize", request, timeout)

    def renew(self, request: pb.RenewRequest, *, timeout: float) -> pb.RenewReply:
        return self._unary("Renew", request, timeout)

    def watch_cluster(
        self, request: pb.WatchClusterRequest
    ) -> Iterator[pb.ClusterEvent]:
        """The task's event stream; ends when the master closes it."""
        try:
            yield from self._stub.WatchCluster(request)
        except grpc.RpcError as exc:
            raise translate(exc, "WatchCluster", self.address) from exc

    def close(self) -> None:
        self.channel.close()
