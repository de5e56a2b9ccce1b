"""The master's gRPC service: validate each request, call the state, return a proto.

Handlers never block and never call YARN; the state records facts and the
reconcile loop (am/state.py) acts on them.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from am.model import TaskRejected, Watcher
from tfyarn._proto import master_pb2 as pb
from tfyarn._proto import master_pb2_grpc
from tfyarn.contract.status import Phase

if TYPE_CHECKING:
    from am.gpus import GpuLedger
    from am.lease import Lease
    from am.resize import Resizer

log = logging.getLogger(__name__)
SERVICE = "tfyarn.Master"


class Served(Protocol):
    """The job as the handlers call it: each call records a fact in the state."""

    @property
    def gpus(self) -> GpuLedger: ...
    @property
    def resizer(self) -> Resizer: ...
    @property
    def lease(self) -> Lease: ...
    @property
    def generation(self) -> int: ...
    @property
    def cluster_restarts(self) -> int: ...
    @property
    def restart_reasons(self) -> Sequence[str]: ...
    @property
    def phase(self) -> Phase: ...

    def register(self, req: pb.RegisterTaskRequest) -> int: ...
    def watch(
        self,
        role: str,
        index: int,
        attempt: int,
        known: int,
        *,
        known_credentials: int = 0,
    ) -> Watcher: ...
    def unwatch(self, watcher: Watcher) -> None: ...
    def heartbeat(
        self, role: str, index: int, attempt: int, *, heeds_notice: bool = False
    ) -> int: ...
    def progress(
        self, role: str, index: int, attempt: int, step: int, metrics: dict[str, float]
    ) -> None: ...
    def task_end(
        self,
        role: str,
        index: int,
        attempt: int,
        code: int,
        tail: str,
        *,
        container_ending: bool = False,
    ) -> None: ...
    def stop_job(
        self, reason: str, grace: float, *, graceful: bool = False
    ) -> tuple[float, int]: ...
    def renew_lease(self, holder: str) -> None: ...


class MasterServicer(master_pb2_grpc.MasterServicer):
    """``tfyarn.Master``, as declared in proto/tfyarn/_proto/master.proto."""

    def __init__(self, state: Served) -> None:
        self.state = state

    async def WatchCluster(
        self, request: pb.WatchClusterRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        # Yields ClusterEvents already serialized by the state: one
        # serialization per generation, shared by every stream. Called once
        # per task when a job starts, so it calls the state directly.
        try:
            if request.HasField("register"):
                reg = request.register
                if (reg.task, reg.attempt) != (request.task, request.attempt):
                    raise TaskRejected(
                        "INVALID_ARGUMENT",
                        f"WatchCluster for {request.task.role}:{request.task.index} "
                        f"carries the registration of {reg.task.role}:{reg.task.index}",
                    )
                self.state.register(reg)
                self.state.gpus.registered(reg)
            watcher = self.state.watch(
                request.task.role,
                request.task.index,
                request.attempt,
                request.known_generation,
                known_credentials=request.known_credentials,
            )
            self.state.gpus.watching(watcher)
        except TaskRejected as exc:
            await context.abort(getattr(grpc.StatusCode, exc.code), str(exc))
        try:
            async for event in watcher.events():
                yield event
        finally:
            self.state.unwatch(watcher)

    async def Heartbeat(
        self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> pb.HeartbeatReply:
        generation = await _guard(
            context,
            lambda: self.state.heartbeat(
                request.task.role,
                request.task.index,
                request.attempt,
                heeds_notice=request.heeds_notice,
            ),
        )
        self.state.gpus.heartbeat(request)
        return pb.HeartbeatReply(generation=generation)

    async def ReportProgress(
        self, request: pb.ReportProgressRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReportProgressReply:
        await _guard(
            context,
            lambda: self.state.progress(
                request.task.role,
                request.task.index,
                request.attempt,
                request.step,
                dict(request.metrics),
            ),
        )
        return pb.ReportProgressReply()

    async def ReportTaskEnd(
        self, request: pb.ReportTaskEndRequest, context: grpc.aio.ServicerContext
    ) -> pb.ReportTaskEndReply:
        await _guard(
            context,
            lambda: self.state.task_end(
                request.task.role,
                request.task.index,
                request.attempt,
                request.exit_code,
                request.stderr_tail,
                container_ending=request.container_ending,
            ),
        )
        return pb.ReportTaskEndReply()

    async def StopJob(
        self, request: pb.StopJobRequest, context: grpc.aio.ServicerContext
    ) -> pb.StopJobReply:
        grace, tasks = await _guard(
            context,
            lambda: self.state.stop_job(
                request.reason or "stopped by tfyarn kill",
                request.grace_seconds,
                graceful=request.graceful,
            ),
        )
        return pb.StopJobReply(grace_seconds=grace, tasks=tasks)

    async def Resize(
        self, request: pb.ResizeRequest, context: grpc.aio.ServicerContext
    ) -> pb.ResizeReply:
        before, message = await _guard(
            context,
            lambda: self.state.resizer.request(
                request.num_worker, request.reason or "tfyarn scale"
            ),
        )
        return pb.ResizeReply(
            previous=before, num_worker=request.num_worker, message=message
        )

    async def Renew(
        self, request: pb.RenewRequest, context: grpc.aio.ServicerContext
    ) -> pb.RenewReply:
        # A server set's lease (am/lease.py); the reply tells the client of a
        # cluster restart, after which its coordinator's state is gone.
        state = self.state
        state.renew_lease(request.holder)
        return pb.RenewReply(
            lease_seconds=state.lease.bound,
            generation=state.generation,
            cluster_restarts=state.cluster_restarts,
            last_restart=state.restart_reasons[-1] if state.restart_reasons else "",
            phase=state.phase.value,
        )


async def _guard(context: grpc.aio.ServicerContext, call: Callable[[], Any]) -> Any:
    """Run a state call; turn a rejection into the matching gRPC status."""
    try:
        return call()
    except TaskRejected as exc:
        await context.abort(getattr(grpc.StatusCode, exc.code), str(exc))


def _serialize(message: bytes | Any) -> bytes:
    return message if isinstance(message, bytes) else message.SerializeToString()


OnCall = Callable[[str, str], None]  # (method, status code name) per answered call


def _code(context: grpc.aio.ServicerContext) -> str:
    code = context.code()
    return code.name if isinstance(code, grpc.StatusCode) else "UNKNOWN"


def _counted_unary(name: str, method: Callable[..., Any], on_call: OnCall) -> Any:
    async def counted(request: Any, context: grpc.aio.ServicerContext) -> Any:
        try:
            reply = await method(request, context)
        except BaseException:
            on_call(name, _code(context))  # an abort (TaskRejected) or a crash
            raise
        on_call(name, "OK")
        return reply

    return counted


def _counted_stream(name: str, method: Callable[..., Any], on_call: OnCall) -> Any:
    # A stream lives as long as its task: count it once, when it is accepted
    # (its first event) or refused.
    async def counted(
        request: Any, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[Any]:
        seen = False
        try:
            async for event in method(request, context):
                if not seen:
                    seen = True
                    on_call(name, "OK")
                yield event
        except BaseException:
            if not seen:
                seen = True
                on_call(name, _code(context))
            raise
        finally:
            if not seen:
                on_call(name, "OK")

    return counted


def _handlers(
    servicer: MasterServicer, on_call: OnCall | None = None
) -> dict[str, grpc.RpcMethodHandler]:
    # As the generated add_MasterServicer_to_server, except that responses may
    # be pre-serialized bytes (WatchCluster's shared ClusterSpec), and each
    # call may be counted for /metrics (am/metrics.py).
    def unary(method: Callable[..., Any], request: Any) -> grpc.RpcMethodHandler:
        if on_call is not None:
            method = _counted_unary(method.__name__, method, on_call)
        return grpc.unary_unary_rpc_method_handler(
            method,
            request_deserializer=request.FromString,
            response_serializer=_serialize,
        )

    return {
        "WatchCluster": grpc.unary_stream_rpc_method_handler(
            servicer.WatchCluster
            if on_call is None
            else _counted_stream("WatchCluster", servicer.WatchCluster, on_call),
            request_deserializer=pb.WatchClusterRequest.FromString,
            response_serializer=_serialize,
        ),
        "Heartbeat": unary(servicer.Heartbeat, pb.HeartbeatRequest),
        "ReportProgress": unary(servicer.ReportProgress, pb.ReportProgressRequest),
        "ReportTaskEnd": unary(servicer.ReportTaskEnd, pb.ReportTaskEndRequest),
        "StopJob": unary(servicer.StopJob, pb.StopJobRequest),
        "Resize": unary(servicer.Resize, pb.ResizeRequest),
        "Renew": unary(servicer.Renew, pb.RenewRequest),
    }


def create_server(
    state: Served,
    cert: bytes,
    key: bytes,
    address: str = "0.0.0.0:0",
    *,
    health_servicer: health.aio.HealthServicer | None = None,
    on_call: OnCall | None = None,
) -> tuple[grpc.aio.Server, int]:
    """Build (not start) the master's server with mutual TLS; return it and its port.

    Clients must present a certificate signed by the application's own
    certificate (skein gives every container the same pair), so a process
    without the app's credentials cannot even complete the TLS handshake.
    ``on_call(method, code)`` is told of every answered call (the master's
    /metrics counts them).
    """
    server = grpc.aio.server(
        options=[
            ("grpc.max_send_message_length", 64 * 1024 * 1024),
            # Thousands of tasks may register at once
            # (tests/benchmarks/registry_scale.py): gRPC core cancels requests
            # beyond 1000 waiting for the Python loop unless told otherwise.
            ("grpc.max_concurrent_streams", 100_000),
            ("grpc.server.max_pending_requests", 100_000),
            ("grpc.server.max_pending_requests_hard_limit", 100_000),
        ]
    )
    handlers = _handlers(MasterServicer(state), on_call)
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(SERVICE, handlers),)
    )
    health_pb2_grpc.add_HealthServicer_to_server(
        health_servicer or health.aio.HealthServicer(), server
    )
    credentials = grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=cert, require_client_auth=True
    )
    port = server.add_secure_port(address, credentials)
    if not port:
        raise OSError(f"the tfyarn master could not bind {address}")
    return server, port


async def mark_serving(health_servicer: health.aio.HealthServicer) -> None:
    """Tell the health service the master (and tfyarn.Master) is up."""
    for name in ("", SERVICE):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
