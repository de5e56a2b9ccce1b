"""A stand-in for ``skein.Client`` that scripts an application's life.

Only for unit tests of the client and CLI: the integration tests run the real
thing on the local cluster.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from datetime import datetime
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
import skein

from tfyarn._proto import master_pb2 as pb
from tfyarn._proto import master_pb2_grpc
from tfyarn.client import connection
from tfyarn.contract.status import (
    MASTER_KEY,
    STATUS_KEY,
    JobStatus,
    Phase,
    TaskState,
    TaskStatus,
)

APP_ID = "application_1700000000000_0007"


@dataclass
class Report:
    state: str = "ACCEPTED"
    final_status: str = "UNDEFINED"
    diagnostics: str = ""
    id: str = APP_ID
    name: str = "tfyarn"
    queue: str = "default"
    user: str = "me"
    progress: float = 0.0
    tracking_url: str = ""
    host: str = "node1"
    tags: set[str] = field(default_factory=lambda: {"tfyarn"})
    start_time: datetime | None = None
    finish_time: datetime | None = None


class FakeKV:
    """The application's key-value store: each read returns the next status."""

    def __init__(self, snaps: Iterator[JobStatus | None]) -> None:
        self._snaps = snaps

    def get(self, key: str) -> bytes | None:
        assert key == STATUS_KEY
        snap = next(self._snaps, None)
        return None if snap is None else snap.to_json().encode()


class FakeApp:
    def __init__(self, kv: FakeKV) -> None:
        self.kv = kv

    def close(self) -> None:
        pass


class FakeYarn:
    """Each application_report() call returns the next scripted report."""

    def __init__(
        self,
        reports: list[Report] | None = None,
        snaps: list[JobStatus | None] | None = None,
        nodes: list[tuple[int, int, int]] | None = None,
        apps: list[Report] | None = None,
        queues: dict[str, tuple[str, list[str]]] | None = None,
    ) -> None:
        self.reports = list(
            reports or [Report(state="FINISHED", final_status="SUCCEEDED")]
        )
        self.snaps = iter(snaps or [])
        self.nodes = [(8192, 8, 0)] if nodes is None else nodes
        self.apps = apps or []
        # queue name -> (state, child queue names)
        self.queues = {"default": ("RUNNING", [])} if queues is None else queues
        self.submitted: list[Any] = []
        self.killed: list[str] = []
        self.closed = False

    def __enter__(self) -> FakeYarn:  # noqa: PYI034
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.closed = True

    def get_nodes(self, states: Any = None) -> list[Any]:
        return [
            SimpleNamespace(
                # Nodes on this machine, as the local cluster's: the client's
                # own interpreter is a valid default there (pyenv.choose).
                id=f"localhost:{45450 + i}",
                total_resources=SimpleNamespace(memory=m, vcores=v, gpus=g),
            )
            for i, (m, v, g) in enumerate(self.nodes)
        ]

    def submit(self, spec: Any) -> str:
        self.submitted.append(spec)
        return APP_ID

    def application_report(self, app_id: str) -> Report:
        if app_id != APP_ID:
            # what skein 0.8.2 raises for an unknown id
            raise ValueError(f"Unknown ApplicationId '{app_id}'")
        report = self.reports[0] if len(self.reports) == 1 else self.reports.pop(0)
        if self.killed:
            return Report(
                state="KILLED", final_status="KILLED", diagnostics="killed by user"
            )
        return report

    def connect(self, app_id: str, wait: bool = True) -> FakeApp:
        return FakeApp(FakeKV(self.snaps))

    def kill_application(self, app_id: str, user: str = "") -> None:
        self.killed.append(app_id)

    def get_applications(self, states: Any = None) -> list[Report]:
        return self.apps

    def get_queue(self, name: str) -> Any:
        if name not in self.queues:
            raise ValueError(f"Queue '{name}' does not exist")  # as skein 0.8.2
        return SimpleNamespace(name=name, state=self.queues[name][0])

    def get_child_queues(self, name: str) -> list[Any]:
        self.get_queue(name)
        return [self.get_queue(c) for c in self.queues[name][1]]

    def get_all_queues(self) -> list[Any]:
        return [self.get_queue(q) for q, (_, kids) in self.queues.items() if not kids]


def use(monkeypatch: pytest.MonkeyPatch, fake: FakeYarn | None) -> None:
    def connect() -> FakeYarn:
        if fake is None:
            raise AssertionError("the CLI connected to YARN but should not have")
        return fake

    monkeypatch.setattr(connection, "connect", connect)


class RecordingMaster(master_pb2_grpc.MasterServicer):
    """A real gRPC master (mutual TLS) that records StopJob and what came before."""

    def __init__(self, fake: FakeYarn) -> None:
        self.fake = fake
        self.stops: list[tuple[str, list[str]]] = []
        self.graceful: list[bool] = []  # StopJobRequest.graceful, per call

    def StopJob(self, request: pb.StopJobRequest, context: Any) -> pb.StopJobReply:
        self.stops.append((request.reason, list(self.fake.killed)))
        self.graceful.append(request.graceful)
        return pb.StopJobReply(grace_seconds=0.1, tasks=2)


class KillableYarn(FakeYarn):
    """A running job whose master listens at ``address``; its tasks have ended."""

    def __init__(self, address: str, credentials: tuple[bytes, bytes]) -> None:
        super().__init__([Report(state="RUNNING")])
        cert, key = credentials
        self.security = skein.Security(cert_bytes=cert, key_bytes=key)
        self.kv = {
            MASTER_KEY: address.encode(),
            STATUS_KEY: JobStatus(
                phase=Phase.STOPPING,
                tasks=[
                    TaskStatus(task="ps:0", role="ps", index=0, state=TaskState.KILLED)
                ],
            )
            .to_json()
            .encode(),
        }

    def connect(self, app_id: str, wait: bool = True) -> Any:
        return SimpleNamespace(kv=self.kv, close=lambda: None)


def mutual_tls_server(credentials: tuple[bytes, bytes]) -> tuple[Any, int]:
    """A gRPC server on a free port that, like the master, accepts only clients
    with the application's key pair; not started. ``(server, port)``."""
    cert, key = credentials
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    port = server.add_secure_port(
        "127.0.0.1:0",
        grpc.ssl_server_credentials(
            [(key, cert)], root_certificates=cert, require_client_auth=True
        ),
    )
    return server, port
