"""The Python API (tfyarn.submit, wait, status, ...) with a scripted YARN."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import skein
from _fake_yarn import APP_ID, FakeYarn, Report

import tfyarn
from tfyarn.client import narrator, tasklogs
from tfyarn.contract.status import JobStatus, Phase, TaskState, TaskStatus
from tfyarn.errors import JobFailedError, SpecError, TfyarnError


@pytest.fixture
def script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(time, "sleep", lambda s: None)
    path = tmp_path / "train.py"
    path.write_text("")
    return str(path)


def test_submit_returns_the_app_id_and_uses_options(script: str) -> None:
    fake = FakeYarn()
    app_id = tfyarn.submit(
        script,
        num_ps=1,
        num_worker=2,
        worker_memory="1 GiB",
        env={"A": "1"},
        client=fake,
    )
    assert app_id == APP_ID
    (spec,) = fake.submitted
    assert spec.services["worker"].resources.memory == 1024
    assert spec.services["worker"].env["A"] == "1"
    assert not fake.closed  # a client passed in stays open


def test_submit_wait_raises_on_failure(script: str) -> None:
    fake = FakeYarn(
        [Report(state="FINISHED", final_status="FAILED", diagnostics="ps:0 died")]
    )
    events: list[str] = []
    with pytest.raises(JobFailedError) as err:
        tfyarn.submit(script, wait=True, on_event=events.append, client=fake)
    assert err.value.app_id == APP_ID and err.value.final_status == "FAILED"
    assert "ps:0 died" in str(err.value)
    assert events[-1] == "final status: FAILED"


def test_logs_command_is_not_repeated(script: str) -> None:
    diag = f"ps:0 died\nAll task logs: yarn logs -applicationId {APP_ID}"
    fake = FakeYarn([Report(state="FINISHED", final_status="FAILED", diagnostics=diag)])
    with pytest.raises(JobFailedError) as err:
        tfyarn.submit(script, wait=True, client=fake)
    assert str(err.value).count("All task logs") == 1


def test_unknown_option_is_refused(script: str) -> None:
    with pytest.raises(SpecError, match="unknown config key"):
        tfyarn.submit(script, num_workers=2, client=FakeYarn())


def test_wait_times_out_without_killing(script: str) -> None:
    fake = FakeYarn([Report(state="RUNNING")])
    with pytest.raises(TimeoutError, match="keeps running"):
        tfyarn.wait(APP_ID, timeout=0, client=fake)
    assert fake.killed == []


def test_app_stuck_in_accepted_is_killed_after_the_registration_timeout(
    script: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = iter(range(0, 10_000, 50))
    monkeypatch.setattr(time, "monotonic", lambda: float(next(clock)))
    fake = FakeYarn([Report(state="ACCEPTED", diagnostics="waiting for AM container")])
    events: list[str] = []
    with pytest.raises(JobFailedError, match="did not start the application master"):
        tfyarn.submit(
            script,
            registration_timeout=120,
            wait=True,
            on_event=events.append,
            client=fake,
        )
    assert fake.killed == [APP_ID]
    assert any("waiting for AM container" in e for e in events)


def test_list_jobs_sorted_and_filtered() -> None:
    apps = [
        Report(id="application_1700000000000_0010"),
        Report(id="application_1700000000000_0002"),
        Report(id="application_1700000000000_0003", tags=set()),
    ]
    jobs = tfyarn.list_jobs(client=FakeYarn(apps=apps))
    assert [j.app_id for j in jobs] == [
        "application_1700000000000_0002",
        "application_1700000000000_0010",
    ]


def test_kill_of_an_ended_job_does_nothing() -> None:
    fake = FakeYarn([Report(state="FINISHED", final_status="SUCCEEDED")])
    st = tfyarn.kill(APP_ID, client=fake)
    assert st.final_status == "SUCCEEDED" and fake.killed == []


def test_narrator_reports_only_changes() -> None:
    n = narrator.Narrator()
    worker = TaskStatus(
        task="worker:0", role="worker", index=0, state=TaskState.REQUESTED
    )
    base = JobStatus(phase=Phase.REGISTERING, started=10.0, tasks=[worker])
    first = n.update(base)
    assert first == [
        "master: REGISTERING",
        "containers worker 1/0/0 (requested/allocated/registered)",
        "worker:0 REQUESTED",
    ]
    assert n.update(base) == []
    later = JobStatus(
        phase=Phase.RUNNING,
        started=10.0,
        cluster_formed_at=12.5,
        restarts=1,
        restart_reasons=["worker:0 lost"],
        tasks=[
            TaskStatus(
                task="worker:0",
                role="worker",
                index=0,
                state=TaskState.RUNNING,
                attempt=1,
                address="h:1",
            )
        ],
    )
    lines = n.update(later)
    assert "master: RUNNING" in lines
    assert "restart 1: worker:0 lost" in lines
    assert "cluster formed in 2.5 s (generation 0)" in lines
    assert "worker:0 RUNNING (attempt 1, h:1)" in lines


def test_logs_use_the_snapshot_and_survive_truncation() -> None:
    text = (
        "Container: container_1_0001_01_000004 on h_1\n"
        "LogType:ps.log\nLogContents:\nps says hi\nEnd of LogType:ps.log\n"
        "Container: container_1_0001_01_000005 on h_1\n"
        "LogType:worker.log\nLogContents:\ncut short"
    )
    ps = TaskStatus(
        task="ps:1",
        role="ps",
        index=1,
        state=TaskState.RUNNING,
        yarn_container_id="container_1_0001_01_000004",
    )
    entries = tasklogs.split(text, JobStatus(phase=Phase.RUNNING, tasks=[ps]))
    assert [(e.task, e.text) for e in entries] == [
        ("ps:1", "ps says hi"),
        ("worker", "cut short"),
    ]
    assert tasklogs.select(entries, "ps") == entries[:1]


def test_a_restart_reason_naming_another_tasks_container_does_not_claim_its_logs() -> (
    None
):
    old, mine, new = (f"container_1_0001_01_00000{i}" for i in (3, 2, 4))
    text = "".join(
        f"Container: {cid} on h_1\nLogType:worker.log\nLogContents:\n{body}\n"
        "End of LogType:worker.log\n"
        for cid, body in (
            (mine, "x worker:0 attempt 0 holds h:1\nstart_step=0"),
            (old, "start_step=0"),  # its runtime's first line lost with its node
            (new, "x worker:1 attempt 1 holds h:3\nstart_step=100"),
        )
    )
    lead = TaskStatus(
        task="worker:0",
        role="worker",
        index=0,
        state=TaskState.RUNNING,
        yarn_container_id=mine,
        history=[
            f"t ALLOCATED: got {mine} on node1",
            (
                f"t RELAUNCHING: restarting in place in {mine}: the cluster restarts: "
                f"worker:1 (attempt 0, {old}, on node2) sent no heartbeat for 8 s"
            ),
        ],
    )
    other = TaskStatus(
        task="worker:1",
        role="worker",
        index=1,
        state=TaskState.RUNNING,
        attempt=1,
        yarn_container_id=new,
        history=[f"t ALLOCATED: got {new} on node2"],  # older lines dropped
    )
    entries = tasklogs.split(text, JobStatus(phase=Phase.RUNNING, tasks=[lead, other]))
    by_container = {e.container_id: e.task for e in entries}
    assert by_container == {mine: "worker:0", old: "worker", new: "worker:1"}
    assert [e.container_id for e in tasklogs.select(entries, "worker:0")] == [mine]


def test_logs_of_running_containers() -> None:
    text = (
        "Container: container_1_0001_01_000002 on localhost:8041\n"
        "LogAggregationType: LOCAL\n"
        "LogType:worker.log\nLogContents:\n"
        "x tfyarn.runtime INFO: worker:0 attempt 0 holds localhost:1\nsleeper up\n"
        "End of LogType:worker.log.This log file belongs to a running container "
        "(container_1_0001_01_000002) and so may not be complete.\n"
        "Container: container_1_0001_01_000002 on localhost:8041\n"
        "LogType:prelaunch.out\nLogContents:\nSetting up env\n"
        "End of LogType:prelaunch.out.This log file belongs to a running container "
        "(container_1_0001_01_000002) and so may not be complete.\n"
    )
    (entry,) = tasklogs.split(text)
    assert entry.task == "worker:0" and entry.text.endswith("sleeper up")
    assert [e.log_type for e in tasklogs.split(text, yarn_files=True)] == [
        "worker.log",
        "prelaunch.out",
    ]


class _Refusing(FakeYarn):
    def __init__(self, exc: Exception) -> None:
        super().__init__()
        self.exc = exc

    def application_report(self, app_id: str) -> Report:
        raise self.exc


@pytest.mark.parametrize(
    ("exc", "message"),
    [
        # skein 0.8.2's driver answers INVALID_ARGUMENT for an id YARN does not
        # know or that is not a skein application; skein raises ValueError for
        # both, whatever the text says.
        (ValueError("Unknown ApplicationId 'x'"), f"no application {APP_ID}"),
        (ValueError("'x' is not a Skein application"), f"no application {APP_ID}"),
        (ValueError("something new"), f"no application {APP_ID}"),
        (skein.exceptions.ConnectionError("Unable to connect"), "lost skein's"),
        (skein.exceptions.DriverError("boom"), "YARN refused the request: boom"),
    ],
)
def test_skein_errors_are_mapped_by_their_type(exc: Exception, message: str) -> None:
    with pytest.raises(TfyarnError) as err:
        tfyarn.status(APP_ID, client=_Refusing(exc))
    assert message in str(err.value)
    assert err.value.__cause__ is None and err.value.__suppress_context__


def test_narrator_says_a_stop_notice_once_and_each_resize() -> None:
    n = narrator.Narrator()
    worker = TaskStatus(
        task="worker:0", role="worker", index=0, state=TaskState.RUNNING
    )
    running = JobStatus(phase=Phase.RUNNING, tasks=[worker])
    n.update(running)
    notice = "stop notice: resized from 2 to 3 worker(s): tfyarn scale; 0 of 2 ..."
    draining = JobStatus(phase=Phase.RUNNING, tasks=[worker], stop_notice=notice)
    assert n.update(draining) == [notice]
    assert n.update(draining) == []  # said once
    resized = JobStatus(
        phase=Phase.RESTARTING,
        tasks=[worker],
        resizes=1,
        resize_reasons=["resized from 2 to 3 worker(s): tfyarn scale"],
    )
    assert n.update(resized) == [
        "master: RESTARTING",
        "resize 1: resized from 2 to 3 worker(s): tfyarn scale",
    ]
    lines = narrator.restart_lines(resized)
    assert lines == [
        "resizes (1, not charged to max_restarts):",
        "  1. resized from 2 to 3 worker(s): tfyarn scale",
    ]
