"""An ended job's status comes from the final record its master kept on HDFS,
and `tfyarn kill` lets the master keep it before YARN's kill."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from _fake_yarn import (
    APP_ID,
    FakeYarn,
    KillableYarn,
    RecordingMaster,
    Report,
    mutual_tls_server,
    use,
)

import tfyarn
from tfyarn._proto import master_pb2_grpc
from tfyarn.cli import main
from tfyarn.client import jobs
from tfyarn.contract.record import PENDING, RECORD_KEY, WRITTEN, record_url
from tfyarn.contract.status import JobStatus, Phase, TaskState, TaskStatus
from tfyarn.data.fs.errors import HdfsPermissionError

URL = record_url("me", APP_ID)  # the fake report's user


@pytest.fixture(autouse=True)
def _no_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(time, "sleep", lambda s: None)


def final_snapshot() -> JobStatus:
    """A job that succeeded after one in-place restart of worker:0."""
    return JobStatus(
        phase=Phase.SUCCEEDED,
        generation=1,
        restarts=1,
        restart_reasons=["worker:0 restarted in place: exited with code 1"],
        max_restarts=2,
        budget_used=1,
        started=100.0,
        cluster_formed_at=104.0,
        diagnostics="tfyarn: worker:0 finished successfully (1 succeeded)",
        lead="worker:0",
        tasks=[
            TaskStatus(
                task="worker:0",
                role="worker",
                index=0,
                attempt=1,
                state=TaskState.SUCCEEDED,
                address="node1:4000",
                yarn_container_id="container_1700000000000_0007_01_000003",
                exit_code=0,
                failures=["attempt 0 exited with code 1: RuntimeError: first try"],
            )
        ],
    )


def with_record(monkeypatch: pytest.MonkeyPatch, raw: bytes | Exception) -> list[str]:
    """The record's bytes (or the error reading it raises); the URLs read."""
    read: list[str] = []

    def record_bytes(url: str) -> bytes:
        read.append(url)
        if isinstance(raw, Exception):
            raise raw
        return raw

    monkeypatch.setattr(jobs, "_record_bytes", record_bytes)
    return read


def ended(final_status: str = "SUCCEEDED") -> FakeYarn:
    return FakeYarn([Report(state="FINISHED", final_status=final_status)])


def test_an_ended_jobs_status_is_its_final_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    read = with_record(monkeypatch, final_snapshot().to_json().encode())
    st = tfyarn.status(APP_ID, client=ended())
    assert read == [URL]
    assert st.master == final_snapshot()
    assert st.record == URL and st.record_missing == ""
    out = st.to_dict()
    assert out["master"]["restarts"] == 1
    assert out["master"]["tasks"][0]["attempt"] == 1
    assert out["record"] == URL


def test_status_json_of_an_ended_job_has_the_final_master(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with_record(monkeypatch, final_snapshot().to_json().encode())
    use(monkeypatch, ended())
    assert main(["status", "--json", APP_ID]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["state"] == "FINISHED"
    assert out["master"]["phase"] == "SUCCEEDED"
    assert out["master"]["restarts"] == 1
    assert out["master"]["tasks"][0]["task"] == "worker:0"
    assert out["master"]["tasks"][0]["attempt"] == 1


def test_status_text_of_an_ended_job_shows_its_tasks_marked_as_the_final_record(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with_record(monkeypatch, final_snapshot().to_json().encode())
    use(monkeypatch, ended())
    assert main(["status", APP_ID]) == 0
    out = capsys.readouterr().out
    assert (
        "master:       phase SUCCEEDED, generation 1, restarts 1, cluster "
        "formed: yes (final record)" in out
    )
    assert f"record:       {URL}, kept by the master as the job ended" in out
    assert "worker:0  SUCCEEDED  1" in out  # the task table: state, attempt
    assert "1. worker:0 restarted in place: exited with code 1" in out
    assert "worker:0 attempt 0: attempt 0 exited with code 1" in out


def test_an_ended_job_without_a_record_says_so_plainly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The conftest's default: no record on (a pretend) HDFS.
    use(monkeypatch, ended("FAILED"))
    assert main(["status", APP_ID]) == 0
    out = capsys.readouterr().out
    assert f"record:       none: no final record at {URL}" in out
    assert f"tfyarn logs {APP_ID} --task master" in out
    assert "master:" not in out
    assert main(["status", "--json", APP_ID]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["master"] is None and doc["record"] == ""
    assert doc["record_missing"].startswith(f"no final record at {URL}")


def test_someone_elses_record_is_named_as_the_owners_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with_record(monkeypatch, HdfsPermissionError(f"HDFS open of {URL}: denied"))
    st = tfyarn.status(APP_ID, client=ended())
    assert st.master is None
    assert (
        st.record_missing
        == f"the final record at {URL} is readable by its owner (me) only"
    )


def test_a_record_that_is_not_a_status_is_named_not_raised(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with_record(monkeypatch, b"{not json")
    st = tfyarn.status(APP_ID, client=ended())
    assert st.master is None
    assert st.record_missing.startswith(f"the final record at {URL} cannot be read:")


def test_a_running_job_reads_no_record(monkeypatch: pytest.MonkeyPatch) -> None:
    read = with_record(monkeypatch, final_snapshot().to_json().encode())
    running = FakeYarn([Report(state="RUNNING")], snaps=[final_snapshot()])
    st = tfyarn.status(APP_ID, client=running)
    assert read == [] and st.record == "" and st.record_missing == ""
    assert st.master is not None


def test_list_reads_no_records(monkeypatch: pytest.MonkeyPatch) -> None:
    read = with_record(monkeypatch, final_snapshot().to_json().encode())
    done = Report(state="FINISHED", final_status="SUCCEEDED")
    found = tfyarn.list_jobs(all_states=True, client=FakeYarn(apps=[done]))
    assert [j.app_id for j in found] == [APP_ID] and read == []


class _Kv(dict[str, bytes]):
    """A key-value store whose record key turns from pending to ``then`` after
    ``reads`` reads, noting for each read whether YARN had killed the app."""

    def __init__(self, base: dict[str, bytes], fake: Any, reads: int, then: bytes):
        super().__init__(base)
        self.fake, self.reads, self.then = fake, reads, then
        self.seen: list[list[str]] = []

    def get(self, key: str, default: Any = None) -> Any:
        if key != RECORD_KEY:
            return super().get(key, default)
        self.seen.append(list(self.fake.killed))
        return PENDING.encode() if len(self.seen) <= self.reads else self.then


def test_wait_for_record_until_kept_or_bounded() -> None:
    app = type("App", (), {})()
    app.kv = _Kv({}, FakeYarn(), reads=3, then=WRITTEN.encode())
    assert jobs.wait_for_record(app) is True and len(app.kv.seen) == 4
    app.kv = _Kv({}, FakeYarn(), reads=10**9, then=b"")
    clock = iter(range(1000))
    real = time.monotonic
    try:
        time.monotonic = lambda: float(next(clock))  # type: ignore[assignment]
        assert jobs.wait_for_record(app, bound=5) is False
    finally:
        time.monotonic = real  # type: ignore[assignment]
    app.kv = {}  # a master that keeps no record: nothing to wait for
    assert jobs.wait_for_record(app) is True


def test_kill_lets_the_master_keep_the_record_before_yarn_kills(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    credentials: tuple[bytes, bytes],
) -> None:
    server, port = mutual_tls_server(credentials)
    fake = KillableYarn(f"127.0.0.1:{port}", credentials)
    fake.kv = _Kv(fake.kv, fake, reads=2, then=WRITTEN.encode())
    master_pb2_grpc.add_MasterServicer_to_server(RecordingMaster(fake), server)
    server.start()
    try:
        use(monkeypatch, fake)
        assert main(["kill", APP_ID]) == 0
    finally:
        server.stop(None)
    # Asked while pending, and every time before YARN's kill.
    assert fake.kv.seen == [[], [], []]
    assert fake.killed == [APP_ID]
