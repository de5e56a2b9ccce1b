"""The master's gRPC service on port 0, over real mutual TLS, with YARN faked."""

from __future__ import annotations

import grpc
import pytest
from _am_support import LiveMaster, job, new_credentials
from grpc_health.v1 import health_pb2, health_pb2_grpc

from tfyarn._proto import master_pb2 as pb
from tfyarn._proto import master_pb2_grpc
from tfyarn.contract import clusterspec as _clusterspec
from tfyarn.contract.channel import CHANNEL_OPTIONS, secure_channel
from tfyarn.contract.status import Phase
from tfyarn.spec import Role


@pytest.fixture
def master(credentials: tuple[bytes, bytes]) -> LiveMaster:
    live = LiveMaster(
        job(
            tasks={"ps": 1, "worker": 2, "evaluator": 1},
            worker_grace=0.5,
            stop_grace=0.5,
        ),
        credentials,
    ).start()
    yield live
    if live.state is not None and not live.state.phase.is_terminal():
        live.call(lambda: live.state.request_kill("test over"))
    live.wait_done()


def stub(
    master: LiveMaster, credentials: tuple[bytes, bytes]
) -> master_pb2_grpc.MasterStub:
    return master_pb2_grpc.MasterStub(secure_channel(master.address, *credentials))


def key(role: str, index: int) -> pb.TaskKey:
    return pb.TaskKey(role=role, index=index)


def registering(
    role: str, index: int, host: str, port: int, *, attempt: int = 0
) -> pb.WatchClusterRequest:
    """A task's first call: WatchCluster carrying its registration."""
    task = key(role, index)
    return pb.WatchClusterRequest(
        task=task,
        attempt=attempt,
        register=pb.RegisterTaskRequest(
            task=task, attempt=attempt, host=host, port=port
        ),
    )


def test_health_service_reports_serving(
    master: LiveMaster, credentials: tuple[bytes, bytes]
) -> None:
    channel = secure_channel(master.address, *credentials)
    health = health_pb2_grpc.HealthStub(channel)
    reply = health.Check(
        health_pb2.HealthCheckRequest(service="tfyarn.Master"), timeout=5
    )
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_registration_broadcasts_one_cluster_spec_to_every_task(
    master: LiveMaster, credentials: tuple[bytes, bytes]
) -> None:
    client = stub(master, credentials)
    tasks = [
        ("ps", 0, 3000),
        ("worker", 0, 3001),
        ("worker", 1, 3002),
        ("evaluator", 0, 3003),
    ]
    streams = {
        (role, index): client.WatchCluster(
            registering(role, index, "node", port), timeout=10
        )
        for role, index, port in tasks
    }
    for stream in streams.values():
        event = next(stream)
        assert event.cluster_spec.generation == 1
        jobs = _clusterspec.decode(event.cluster_spec)
        # The evaluator gets the cluster but is not part of it.
        assert jobs == {"ps": ["node:3000"], "worker": ["node:3001", "node:3002"]}

    # The lead (worker 0) succeeds: ps and evaluator are told to stop at once.
    client.ReportTaskEnd(
        pb.ReportTaskEndRequest(task=key("worker", 0), attempt=0, exit_code=0),
        timeout=5,
    )
    assert next(streams[("ps", 0)]).stop.reason == "worker:0 finished"
    assert next(streams[("evaluator", 0)]).HasField("stop")
    for role, index in (("ps", 0), ("evaluator", 0), ("worker", 1)):
        client.ReportTaskEnd(
            pb.ReportTaskEndRequest(task=key(role, index), attempt=0, exit_code=-15),
            timeout=5,
        )
    phase, _ = master.wait_done()
    assert phase is Phase.SUCCEEDED
    assert master.launcher.final is not None and master.launcher.final[0] == "SUCCEEDED"


def test_requests_for_unknown_tasks_or_stale_attempts_are_refused(
    master: LiveMaster, credentials: tuple[bytes, bytes]
) -> None:
    client = stub(master, credentials)
    with pytest.raises(grpc.RpcError) as unknown:
        next(client.WatchCluster(registering("worker", 9, "h", 1), timeout=5))
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
    assert "no task worker:9" in unknown.value.details()
    with pytest.raises(grpc.RpcError) as stale:
        client.Heartbeat(
            pb.HeartbeatRequest(task=key("worker", 0), attempt=3), timeout=5
        )
    assert stale.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    mixed = client.WatchCluster(
        pb.WatchClusterRequest(
            task=key("worker", 0),
            register=pb.RegisterTaskRequest(task=key("worker", 1), host="h", port=5),
        ),
        timeout=5,
    )
    with pytest.raises(grpc.RpcError) as mismatch:
        next(mixed)
    assert mismatch.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as bad:
        next(client.WatchCluster(registering("worker", 0, "", 0), timeout=5))
    assert bad.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "without a usable address" in bad.value.details()


def test_client_without_the_apps_credentials_is_refused(
    master: LiveMaster, credentials: tuple[bytes, bytes]
) -> None:
    request = registering("worker", 0, "evil", 1)

    def refused(stub: master_pb2_grpc.MasterStub) -> grpc.RpcError:
        with pytest.raises(grpc.RpcError) as error:
            next(stub.WatchCluster(request, timeout=5))
        return error.value

    # Another application's certificate and key: the TLS handshake fails.
    other = master_pb2_grpc.MasterStub(
        secure_channel(master.address, *new_credentials())
    )
    assert refused(other).code() == grpc.StatusCode.UNAVAILABLE
    # The right CA but no client certificate: refused too (mutual TLS).
    server_only = grpc.ssl_channel_credentials(root_certificates=credentials[0])
    anonymous = master_pb2_grpc.MasterStub(
        grpc.secure_channel(master.address, server_only, options=CHANNEL_OPTIONS)
    )
    assert refused(anonymous).code() == grpc.StatusCode.UNAVAILABLE
    # Trusts the master (its certificate is no secret) but presents its own
    # key pair: the master refuses the client certificate.
    other_cert, other_key = new_credentials()
    impostor_creds = grpc.ssl_channel_credentials(
        root_certificates=credentials[0],
        private_key=other_key,
        certificate_chain=other_cert,
    )
    impostor = master_pb2_grpc.MasterStub(
        grpc.secure_channel(master.address, impostor_creds, options=CHANNEL_OPTIONS)
    )
    assert refused(impostor).code() == grpc.StatusCode.UNAVAILABLE
    # Plain text: refused.
    plain = master_pb2_grpc.MasterStub(grpc.insecure_channel(master.address))
    refused(plain)
    # Nothing got registered.
    assert master.call(lambda: master.state.tasks_registered()) == 0


def test_resize_answers_what_the_master_does_and_refuses_with_a_code(
    master: LiveMaster, credentials: tuple[bytes, bytes]
) -> None:
    client = stub(master, credentials)
    with pytest.raises(grpc.RpcError) as zero:
        client.Resize(pb.ResizeRequest(num_worker=0), timeout=5)
    assert zero.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "at least 1" in zero.value.details()
    same = client.Resize(pb.ResizeRequest(num_worker=2), timeout=5)
    assert (same.previous, same.num_worker) == (2, 2)
    assert "already has 2 worker(s)" in same.message
    # Nothing runs yet: no script to wait for, the next generation forms at once.
    grown = client.Resize(pb.ResizeRequest(num_worker=3, reason="test"), timeout=5)
    assert (grown.previous, grown.num_worker) == (2, 3)
    assert master.call(lambda: master.state.spec.count(Role.WORKER)) == 3
    assert master.call(lambda: master.state.resizer.reasons) == [
        "resized from 2 to 3 worker(s): test"
    ]
