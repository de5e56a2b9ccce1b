"""A task's connection to the tfyarn master: mutual TLS with the app's credentials.

The master serves with the application's own skein certificate (CN
``skein-internal``, no SAN), present in every container's working directory as
``.skein.crt`` / ``.skein.pem``; clients present the same pair, as skein's own
``secure_channel`` does.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import grpc

from tfyarn._proto import master_pb2_grpc
from tfyarn.errors import MasterUnavailableError

T = TypeVar("T")

# The certificate has no SAN; its CN is what clients must expect.
TARGET_NAME = "skein-internal"
CHANNEL_OPTIONS = (
    ("grpc.ssl_target_name_override", TARGET_NAME),
    ("grpc.default_authority", TARGET_NAME),
    # A 5000-task ClusterSpec is ~150 kB; leave generous room above the 4 MB default.
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
)
# The master answers a few thousand small calls a second on one core; big jobs
# heartbeat less often so heartbeats stay under this rate (5000 tasks: 10 s).
HEARTBEATS_PER_SECOND = 500
# A task is lost only after missing this many heartbeats in a row.
MISSED_HEARTBEATS = 3

# Worth retrying: the master is starting, restarting or briefly overloaded.
RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)


def heartbeat_interval(configured: float, tasks: int) -> float:
    """Seconds between one task's heartbeats: the configured value, longer for big jobs.

    Examples
    --------
    >>> heartbeat_interval(2.0, 10)
    2.0
    >>> heartbeat_interval(2.0, 5000)
    10.0
    """
    return max(configured, tasks / HEARTBEATS_PER_SECOND)


def heartbeat_timeout(configured: float, interval: float) -> float:
    """The silence after which a task is lost: never under a few intervals."""
    return max(configured, MISSED_HEARTBEATS * interval)


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
    address: str,
    fn: Callable[[float], T],
    *,
    deadline: float,
    attempt_timeout: float = 10.0,
) -> T:
    """Call ``fn(timeout)`` until it succeeds, retrying transient failures.

    Retries UNAVAILABLE / DEADLINE_EXCEEDED with jittered backoff until the
    monotonic ``deadline``; any other gRPC error is raised at once.

    Raises
    ------
    MasterUnavailableError
        The master did not answer before the deadline.
    grpc.RpcError
        The master answered with an error that retrying cannot fix.
    """
    delay = backoff_delays()
    started = time.monotonic()
    last: grpc.RpcError | None = None
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            detail = last.details() if last is not None else "no attempt made"
            raise MasterUnavailableError(
                f"{what}: the tfyarn master at {address} did not answer within "
                f"{time.monotonic() - started:.0f} s (last error: {detail}). "
                "Check the application master's log (yarn logs -applicationId ...)."
            ) from last
        try:
            return fn(min(attempt_timeout, left))
        except grpc.RpcError as exc:
            if exc.code() not in RETRYABLE:
                raise
            last = exc
        time.sleep(min(delay(), max(0.0, deadline - time.monotonic())))


class MasterClient:
    """Blocking client of the master's ``tfyarn.Master`` service.

    Examples
    --------
    >>> master = MasterClient("host:1234")  # doctest: +SKIP
    >>> master.stub.Heartbeat(request, timeout=5)  # doctest: +SKIP
    >>> master.close()  # doctest: +SKIP
    """

    def __init__(
        self, address: str, credentials: tuple[bytes, bytes] | None = None
    ) -> None:
        cert, key = credentials or find_credentials()
        self.address = address
        self.channel = secure_channel(address, cert, key)
        self.stub = master_pb2_grpc.MasterStub(self.channel)

    def close(self) -> None:
        self.channel.close()


def stop_job(
    app: Any, credentials: tuple[bytes, bytes], reason: str, *, bound: float = 60.0
) -> bool:
    """Ask a job's master to stop every task with its grace; wait until they ended.

    ``app`` is the job's ``skein.ApplicationClient``; ``credentials`` its
    (certificate, key). Best effort and bounded (``bound`` seconds beyond the
    grace): returns whether every task ended, so the caller can kill the
    application either way.
    """
    from tfyarn._proto import master_pb2 as pb

    try:
        address = app.kv["tfyarn.master"].decode()
    except Exception:  # noqa: BLE001 -- no master yet (or any more): nothing to stop
        return False
    master = MasterClient(address, credentials)
    try:
        reply = master.stub.StopJob(pb.StopJobRequest(reason=reason), timeout=10)
        deadline = time.monotonic() + reply.grace_seconds + bound
        while time.monotonic() < deadline:
            snap = json.loads(app.kv["tfyarn.status"])
            if all(t["state"] in _ENDED for t in snap.get("tasks", [])):
                return True
            time.sleep(0.5)
        return False
    except Exception:  # noqa: BLE001 -- the hard kill follows anyway
        return False
    finally:
        master.close()


_ENDED = frozenset({"SUCCEEDED", "FAILED", "KILLED", "LOST"})
