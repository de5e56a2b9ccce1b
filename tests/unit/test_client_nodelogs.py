"""Logs from the NodeManagers' web services: exact offsets, discovery without
log aggregation, and ``logs -f`` across a restart (a fake NodeManager on loopback)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from _fake_nm import FakeNodeManager, serving

from tfyarn.client import livelogs, nmweb, nodelogs, tasklogs
from tfyarn.contract.status import JobStatus, Phase, TaskState, TaskStatus
from tfyarn.errors import TfyarnError

APP = "application_1700000000000_0007"
AM = "container_1700000000000_0007_01_000001"
C2 = "container_1700000000000_0007_01_000002"
C3 = "container_1700000000000_0007_01_000003"


@pytest.fixture
def nm() -> Iterator[FakeNodeManager]:
    fake = FakeNodeManager()
    with serving(fake):
        yield fake


def test_read_from_returns_exactly_the_new_bytes(nm: FakeNodeManager) -> None:
    nm.write(C2, "worker.log", b"first line\n")
    chunk = nmweb.read_from(nm.address, C2, "worker.log", 0, 11)
    assert (chunk.data, chunk.offset, chunk.skipped) == (b"first line\n", 0, 0)
    nm.write(C2, "worker.log", b"second\n")
    chunk = nmweb.read_from(nm.address, C2, "worker.log", chunk.end, 18)
    assert chunk.data == b"second\n"
    assert chunk.end == 18


def test_read_from_a_file_grown_since_it_was_listed(nm: FakeNodeManager) -> None:
    nm.write(C2, "worker.log", b"a" * 100)
    nm.write(C2, "worker.log", b"b" * 50)  # written after a listing said 100
    chunk = nmweb.read_from(nm.address, C2, "worker.log", 100, 100)
    assert chunk.data == b"b" * 50


def test_a_burst_beyond_the_chunk_is_skipped_and_counted(
    nm: FakeNodeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(nmweb, "MAX_CHUNK", 10)
    nm.write(C2, "worker.log", b"0123456789abcdefghij")
    chunk = nmweb.read_from(nm.address, C2, "worker.log", 0, 20)
    assert (chunk.data, chunk.offset, chunk.skipped) == (b"abcdefghij", 10, 10)


def test_a_container_the_node_does_not_hold_is_not_on_node(nm: FakeNodeManager) -> None:
    with pytest.raises(nmweb.NotOnNode):
        nmweb.log_files(nm.address, C2)


def test_an_unreachable_node_is_named() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # bound, not listening: connection refused
        with pytest.raises(nmweb.NodeLogsError, match=f"127.0.0.1:{port}.*reachable"):
            nmweb.log_files(f"127.0.0.1:{port}", C2)


def _fake_yarn(*addresses: str) -> Any:
    nodes = [SimpleNamespace(http_address=a) for a in addresses]
    return SimpleNamespace(get_nodes=lambda states=None: nodes)


def _job_on(nm: FakeNodeManager) -> None:
    nm.write(AM, "application.master.log", b"INFO Starting " + C2.encode() + b"\n")
    nm.write(AM, "application.master.log", b"INFO Starting " + C3.encode() + b"\n")
    nm.write(C2, "ps.log", b"x ps:0 attempt 0 holds h:1\nps says hi\n")
    nm.write(C3, "worker.log", b"x worker:1 attempt 0 holds h:2\nworker says hi\n")


def test_without_aggregation_every_container_is_found_and_labelled(
    nm: FakeNodeManager,
) -> None:
    _job_on(nm)
    other = FakeNodeManager()  # a node that never ran the job
    with serving(other):
        text = nodelogs.yarn_logs_text(APP, _fake_yarn(other.address, nm.address))
    entries = tasklogs.split(text)
    assert [(e.task, e.log_type) for e in entries] == [
        ("master", "application.master.log"),
        ("ps:0", "ps.log"),
        ("worker:1", "worker.log"),
    ]
    assert entries[2].text.endswith("worker says hi")
    assert other.requests == [f"/ws/v1/node/apps/{APP}"]  # asked once, then skipped


def test_containers_of_a_resourcemanager_that_took_over_are_found(
    nm: FakeNodeManager,
) -> None:
    """After a failover with recovery the ResourceManager names containers
    with its epoch: a second attempt's master and tasks, both epochs."""
    am1, am2 = AM, "container_e02_1700000000000_0007_02_000001"
    c4 = "container_e02_1700000000000_0007_02_000004"
    nm.write(am1, "application.master.log", b"INFO Starting " + C2.encode() + b"\n")
    nm.write(am2, "application.master.log", b"INFO Starting " + c4.encode() + b"\n")
    nm.write(C2, "worker.log", b"x worker:0 attempt 0 holds h:1\nfirst\n")
    nm.write(c4, "worker.log", b"x worker:0 attempt 1 holds h:2\nsecond\n")
    found = nodelogs.containers(APP, [nm.address])
    assert [c for c, _, _ in found] == [am1, C2, am2, c4]


def test_a_container_listed_without_files_is_not_held(
    nm: FakeNodeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hadoop 3.1's NodeManager lists an empty directory for any container id
    of an application it knows, not 404."""
    _job_on(nm)
    real = nmweb.log_files

    def empty_for_unknown(node: str, container: str) -> dict[str, int]:
        try:
            return real(node, container)
        except nmweb.NotOnNode:
            return {}

    monkeypatch.setattr(nmweb, "log_files", empty_for_unknown)
    found = nodelogs.containers(APP, [nm.address])
    assert [c for c, _, _ in found] == [AM, C2, C3]


def test_logs_falls_back_to_the_nodes_when_yarn_logs_finds_none(
    nm: FakeNodeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    _job_on(nm)

    def no_aggregation(app_id: str, timeout: float) -> str:
        raise tasklogs.YarnLogsError(
            "Log aggregation has not completed or is not enabled"
        )

    monkeypatch.setattr(tasklogs, "yarn_logs", no_aggregation)
    monkeypatch.setattr(
        tasklogs, "status", lambda app_id, client=None: SimpleNamespace(master=None)
    )
    entries = tasklogs.logs(APP, task="worker:1", client=_fake_yarn(nm.address))
    assert [e.container_id for e in entries] == [C3]


def test_logs_says_both_failed_when_no_node_holds_the_job(
    nm: FakeNodeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_aggregation(app_id: str, timeout: float) -> str:
        raise tasklogs.YarnLogsError("Log aggregation is not enabled")

    monkeypatch.setattr(tasklogs, "yarn_logs", no_aggregation)
    monkeypatch.setattr(
        tasklogs, "status", lambda app_id, client=None: SimpleNamespace(master=None)
    )
    with pytest.raises(TfyarnError, match=r"(?s)not enabled.*No NodeManager holds"):
        tasklogs.logs(APP, client=_fake_yarn(nm.address))


class _Job:
    """A fake YARN + master: each poll (sleep) runs the next scripted step."""

    def __init__(self, nm: FakeNodeManager, steps: list[Any]) -> None:
        self.nm, self.steps = nm, steps
        self.state = "RUNNING"
        self.container = C2
        self.attempt = 0

    def application_report(self, app_id: str) -> Any:
        return SimpleNamespace(state=self.state)

    def master(self, app: Any) -> JobStatus:
        task = TaskStatus(
            task="worker:0",
            role="worker",
            index=0,
            state=TaskState.RUNNING,
            attempt=self.attempt,
            yarn_container_id=self.container,
            node=self.nm.address,
        )
        return JobStatus(phase=Phase.RUNNING, tasks=[task])

    def sleep(self, seconds: float) -> None:
        self.steps.pop(0)(self)


def test_follow_prints_output_as_it_arrives_and_across_a_restart(
    nm: FakeNodeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    nm.write(C2, "worker.log", b"step 1\n")

    def restart(job: _Job) -> None:
        nm.write(C2, "worker.log", b"last words\n")
        job.container, job.attempt = C3, 1
        nm.write(C3, "worker.log", "r\u00e9sum\u00e9 ".encode())

    def end(job: _Job) -> None:
        nm.write(C3, "worker.log", b"done\n")
        job.state = "FINISHED"

    job = _Job(
        nm,
        [
            lambda j: nm.write(C2, "worker.log", b"step 2\n"),
            lambda j: None,  # nothing new
            restart,
            end,
        ],
    )
    monkeypatch.setattr(
        livelogs, "app_client", lambda yarn, app_id: SimpleNamespace(close=lambda: None)
    )
    monkeypatch.setattr(livelogs, "read_master_status", job.master)
    monkeypatch.setattr(livelogs.time, "sleep", job.sleep)
    out: list[str] = []
    final = livelogs.follow_task(APP, "worker:0", write=out.append, client=job)
    assert final == "FINISHED"
    assert "".join(out) == (
        f"==> worker:0 [{C2} on {nm.address}] <==\n"
        "step 1\nstep 2\nlast words\n"
        f"==> worker:0 attempt 1 [{C3} on {nm.address}] <==\n"
        "r\u00e9sum\u00e9 done\n"
    )


@pytest.mark.parametrize("task", [None, "ps", "master", "worker:x", "boss:0"])
def test_follow_wants_one_task(task: str | None) -> None:
    with pytest.raises(TfyarnError, match="ROLE:INDEX"):
        livelogs.parse_task(task)


def _log_dirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, nm: FakeNodeManager
) -> None:
    """The node's files also in a local log dir named by yarn-site.xml."""
    conf, logs = tmp_path / "conf", tmp_path / "nm-logs"
    conf.mkdir(exist_ok=True)
    (conf / "yarn-site.xml").write_text(
        "<configuration><property><name>yarn.nodemanager.log-dirs</name>"
        f"<value>{tmp_path / 'elsewhere'},{logs}</value></property></configuration>"
    )
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    for cid, files in nm.files.items():
        for name, data in files.items():
            path = logs / APP / cid / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)


def test_a_node_that_cannot_open_files_is_read_from_its_local_log_dir(
    nm: FakeNodeManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _job_on(nm)
    nm.cannot_open = True
    with pytest.raises(nmweb.NodeLogsError, match="HTTP 500"):
        nodelogs.yarn_logs_text(APP, _fake_yarn(nm.address))
    _log_dirs(tmp_path, monkeypatch, nm)
    entries = tasklogs.split(nodelogs.yarn_logs_text(APP, _fake_yarn(nm.address)))
    assert [(e.task, e.text) for e in entries if e.task != "master"] == [
        ("ps:0", "x ps:0 attempt 0 holds h:1\nps says hi"),
        ("worker:1", "x worker:1 attempt 0 holds h:2\nworker says hi"),
    ]


def test_follow_reads_the_local_log_dir_when_the_node_cannot_open_files(
    nm: FakeNodeManager, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nm.write(C2, "worker.log", b"one\n")
    nm.cannot_open = True
    _log_dirs(tmp_path, monkeypatch, nm)

    def grow(job: _Job) -> None:
        nm.write(C2, "worker.log", b"two\n")
        _log_dirs(tmp_path, monkeypatch, nm)
        job.state = "FINISHED"

    job = _Job(nm, [grow])
    monkeypatch.setattr(
        livelogs, "app_client", lambda yarn, app_id: SimpleNamespace(close=lambda: None)
    )
    monkeypatch.setattr(livelogs, "read_master_status", job.master)
    monkeypatch.setattr(livelogs.time, "sleep", job.sleep)
    out: list[str] = []
    livelogs.follow_task(APP, "worker:0", write=out.append, client=job)
    assert "".join(out).splitlines()[1:] == ["one", "two"]


def test_follow_rides_out_a_503_and_ends_with_the_aggregated_rest(
    nm: FakeNodeManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    nm.write(C2, "worker.log", b"one\n")

    def unavailable(job: _Job) -> None:
        nm.unavailable = True

    def back(job: _Job) -> None:
        nm.unavailable = False
        nm.write(C2, "worker.log", b"two\n")

    def end(job: _Job) -> None:  # the last line lands as the node stops serving
        nm.write(C2, "worker.log", b"bye\n")
        nm.unavailable = True
        job.state = "FINISHED"

    aggregated = [
        SimpleNamespace(container_id=C2, log_type="worker.log", text="one\ntwo\nbye\n")
    ]
    tries: list[int] = []

    def logs(app_id: str, task: str, client: Any) -> list[Any]:
        tries.append(1)
        if len(tries) == 1:  # aggregation not done at the first look
            raise TfyarnError("Log aggregation has not completed")
        return aggregated

    job = _Job(nm, [lambda j: None, unavailable, back, end, lambda j: None])
    monkeypatch.setattr(
        livelogs, "app_client", lambda yarn, app_id: SimpleNamespace(close=lambda: None)
    )
    monkeypatch.setattr(livelogs, "read_master_status", job.master)
    monkeypatch.setattr(livelogs.time, "sleep", job.sleep)
    monkeypatch.setattr(livelogs.tasklogs, "logs", logs)
    out: list[str] = []
    final = livelogs.follow_task(APP, "worker:0", write=out.append, client=job)
    assert final == "FINISHED"
    assert "".join(out).splitlines()[1:] == ["one", "two", "bye"]
    assert len(tries) == 2
