"""``tfyarn scale`` and ``tfyarn.scale``: checked first, then asked of the master."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import grpc
import pytest
import skein
from _fake_yarn import APP_ID, FakeYarn, Report, mutual_tls_server, use

import tfyarn
from tfyarn._proto import master_pb2 as pb
from tfyarn._proto import master_pb2_grpc
from tfyarn.cli import main
from tfyarn.contract.status import MASTER_KEY
from tfyarn.errors import SpecError


def resources(memory: int, vcores: int = 1) -> Any:
    return SimpleNamespace(memory=memory, vcores=vcores, gpus=0)


class ScalingMaster(master_pb2_grpc.MasterServicer):
    """A master that takes any count of at least ``min_worker``."""

    def __init__(self, min_worker: int = 1) -> None:
        self.min_worker = min_worker
        self.asked: list[int] = []

    def Resize(self, request: pb.ResizeRequest, context: Any) -> pb.ResizeReply:
        self.asked.append(request.num_worker)
        if request.num_worker < self.min_worker:
            context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"num_worker={request.num_worker} is below the job's "
                f"min_worker={self.min_worker}",
            )
        return pb.ResizeReply(
            previous=2, num_worker=request.num_worker, message="stop notice sent"
        )


class ScalableYarn(FakeYarn):
    """A running job (master 512 MiB, 1 ps of 1 GiB, 2 workers of 1 GiB) whose
    queue may use ``max_capacity`` percent of one 8 GiB, 8-core node."""

    def __init__(
        self,
        address: str,
        credentials: tuple[bytes, bytes],
        *,
        report: Report | None = None,
        max_capacity: float = 100.0,
    ) -> None:
        super().__init__([report or Report(state="RUNNING")])
        cert, key = credentials
        self.security = skein.Security(cert_bytes=cert, key_bytes=key)
        self.max_capacity = max_capacity
        self.spec = SimpleNamespace(
            master=SimpleNamespace(resources=resources(512)),
            services={
                "ps": SimpleNamespace(instances=1, resources=resources(1024)),
                "worker": SimpleNamespace(instances=2, resources=resources(1024)),
            },
        )
        self.kv = {MASTER_KEY: address.encode()}

    def connect(self, app_id: str, wait: bool = True) -> Any:
        return SimpleNamespace(
            kv=self.kv, get_specification=lambda: self.spec, close=lambda: None
        )

    def get_queue(self, name: str) -> Any:
        queue = super().get_queue(name)
        queue.max_capacity = self.max_capacity
        return queue


@pytest.fixture
def master(credentials: tuple[bytes, bytes]) -> Any:
    server, port = mutual_tls_server(credentials)
    servicer = ScalingMaster(min_worker=2)
    master_pb2_grpc.add_MasterServicer_to_server(servicer, server)
    server.start()
    servicer.address = f"127.0.0.1:{port}"
    yield servicer
    server.stop(None)


def test_scale_asks_the_master_and_says_what_it_does(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    credentials: tuple[bytes, bytes],
    master: ScalingMaster,
) -> None:
    use(monkeypatch, ScalableYarn(master.address, credentials))
    assert main(["scale", APP_ID, "--num_worker", "5"]) == 0
    assert master.asked == [5]
    out = capsys.readouterr().out
    assert f"{APP_ID}: 2 -> 5 workers; stop notice sent" in out


def test_the_masters_refusal_is_said_in_its_words(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    credentials: tuple[bytes, bytes],
    master: ScalingMaster,
) -> None:
    use(monkeypatch, ScalableYarn(master.address, credentials))
    assert main(["scale", APP_ID, "--num_worker", "1"]) == 1
    err = capsys.readouterr().err
    assert (
        f"{APP_ID} cannot be scaled: num_worker=1 is below the job's min_worker=2"
        in err
    )
    assert "Traceback" not in err


def test_more_workers_than_the_queue_can_ever_give_are_refused_before_asking(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    credentials: tuple[bytes, bytes],
    master: ScalingMaster,
) -> None:
    # Half of 8 GiB: the master and the ps leave room for 2 workers, not 3.
    yarn = ScalableYarn(master.address, credentials, max_capacity=50.0)
    use(monkeypatch, yarn)
    assert main(["scale", APP_ID, "--num_worker", "3"]) == 1
    err = capsys.readouterr().err
    assert "3 workers (1024 MiB, 1 vcores each)" in err
    assert "queue 'default' can never give more than 4096 MiB" in err
    assert master.asked == []
    assert main(["scale", APP_ID, "--num_worker", "2"]) == 0
    assert master.asked == [2]


@pytest.mark.parametrize(
    ("report", "words"),
    [
        (Report(state="FINISHED", final_status="SUCCEEDED"), "has ended (FINISHED"),
        (Report(state="RUNNING", tags=set()), "is not a tfyarn job"),
    ],
)
def test_only_a_running_tfyarn_job_is_scaled(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    credentials: tuple[bytes, bytes],
    master: ScalingMaster,
    report: Report,
    words: str,
) -> None:
    use(monkeypatch, ScalableYarn(master.address, credentials, report=report))
    assert main(["scale", APP_ID, "--num_worker", "3"]) == 1
    assert words in capsys.readouterr().err
    assert master.asked == []


@pytest.mark.parametrize("count", [0, -2, "3", True, 2.5])
def test_the_python_api_refuses_a_count_before_connecting(
    monkeypatch: pytest.MonkeyPatch, count: Any
) -> None:
    use(monkeypatch, None)  # connecting would fail the test
    with pytest.raises(SpecError, match="num_worker"):
        tfyarn.scale(APP_ID, num_worker=count)


def test_an_unknown_application_is_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    use(monkeypatch, FakeYarn())
    assert main(["scale", "application_1_2", "--num_worker", "3"]) == 1
    assert "no application application_1_2" in capsys.readouterr().err
