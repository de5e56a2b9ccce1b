"""The live view: the lead's progress line (terminal redraw vs plain lines) and
reading a big job's small summary instead of its snapshot at every poll."""

from __future__ import annotations

import io
from types import SimpleNamespace
from typing import Any

import pytest

from tfyarn.client import follow as follow_mod
from tfyarn.client.progressview import LiveView, Meter, Progress, lead_progress
from tfyarn.contract.status import (
    STATUS_KEY,
    SUMMARY_KEY,
    JobStatus,
    JobSummary,
    Phase,
    TaskState,
    TaskStatus,
)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_the_line_shows_the_bar_rate_and_eta() -> None:
    clock = Clock()
    meter = Meter(clock)
    meter.add(100)
    clock.now += 10
    meter.add(120)  # 2 steps/s; 280 left: 2m20s
    assert meter.line(Progress("worker:0", 120, 400)) == (
        "worker:0 [#######-----------------] 120/400 30% 2 steps/s ETA 2m20s"
    )
    assert meter.line(Progress("worker:0", 120)) == "worker:0 step 120 2 steps/s"


def test_a_restart_from_a_checkpoint_starts_the_rate_anew() -> None:
    clock = Clock()
    meter = Meter(clock)
    meter.add(500)
    clock.now += 10
    meter.add(50)  # back to the checkpoint's step
    assert meter.rate() is None


def test_on_a_terminal_the_progress_line_is_redrawn_under_the_events() -> None:
    out = io.StringIO()
    view = LiveView(out, tty=True, clock=Clock(), stamp=lambda: "T")
    view.progress(Progress("chief:0", 1, 10))
    view.event("worker:1 RUNNING")
    view.close()
    bar = "chief:0 [##----------------------] 1/10 10%"
    assert out.getvalue() == (f"\r\x1b[K{bar}\r\x1b[KT worker:1 RUNNING\n{bar}\n")


def test_off_a_terminal_plain_lines_each_tenth_and_no_escape_codes() -> None:
    out = io.StringIO()
    clock = Clock()
    view = LiveView(out, tty=False, clock=clock, stamp=lambda: "T")
    for step in range(1, 40):
        clock.now += 1
        view.progress(Progress("chief:0", step, 100))
    view.event("master: FINISHING")
    view.close()
    lines = out.getvalue().splitlines()
    assert "\x1b" not in out.getvalue() and "\r" not in out.getvalue()
    # tenths 0 (step 1), 1 (10), 2 (20), 3 (30), each once; then the event.
    assert [l.split("] ")[1].split("/")[0] for l in lines[:-1]] == [
        "1",
        "10",
        "20",
        "30",
    ]
    assert lines[-1] == "T master: FINISHING"


def _status(step: int, state: TaskState = TaskState.RUNNING) -> JobStatus:
    tasks = [
        TaskStatus(
            task="worker:0",
            role="worker",
            index=0,
            state=state,
            step=step,
            metrics={"total_steps": 50.0},
        )
    ]
    return JobStatus(phase=Phase.RUNNING, lead="worker:0", tasks=tasks)


def test_the_summary_digest_ignores_steps_and_sees_task_changes() -> None:
    a = JobSummary.of(_status(1).to_dict())
    b = JobSummary.of(_status(2).to_dict())
    c = JobSummary.of(_status(2, TaskState.FAILED).to_dict())
    assert a.digest == b.digest != c.digest
    assert (b.lead, b.lead_step, b.total_steps) == ("worker:0", 2, 50.0)
    assert JobSummary.from_json(b.to_json()) == b
    assert lead_progress(b) == lead_progress(_status(2)) == Progress("worker:0", 2, 50)


class _Kv:
    def __init__(self, job: _Job) -> None:
        self.job = job

    def get(self, key: str) -> bytes | None:
        self.job.reads.append(key)
        return self.job.kv.get(key)


class _Job:
    """A fake YARN whose master publishes the snapshot and maybe a summary."""

    def __init__(self, statuses: list[JobStatus], *, summary: bool) -> None:
        self.statuses, self.summary = statuses, summary
        self.kv: dict[str, bytes] = {}
        self.reads: list[str] = []
        self.kv_obj = _Kv(self)

    def application_report(self, app_id: str) -> Any:
        if not self.statuses:
            return SimpleNamespace(
                id=app_id,
                state="FINISHED",
                final_status="SUCCEEDED",
                diagnostics="",
                name="",
                queue="",
                user="",
                progress=1.0,
                tracking_url="",
                host="",
                tags=[],
            )
        st = self.statuses.pop(0)
        self.kv[STATUS_KEY] = st.to_json().encode()
        if self.summary:
            self.kv[SUMMARY_KEY] = JobSummary.of(st.to_dict()).to_json().encode()
        return SimpleNamespace(state="RUNNING")

    def connect(self, app_id: str, wait: bool = False) -> Any:
        return SimpleNamespace(kv=self.kv_obj, close=lambda: None)


@pytest.mark.parametrize("summary", [True, False])
def test_follow_reads_the_snapshot_only_when_the_summary_changed(
    summary: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(follow_mod.time, "sleep", lambda s: None)
    monkeypatch.setattr(follow_mod, "SUMMARY_ABOVE", 0)  # one task counts as big
    statuses = [_status(1), _status(2), _status(3), _status(3, TaskState.SUCCEEDED)]
    job = _Job(statuses, summary=summary)
    events: list[str] = []
    progress: list[Progress] = []
    follow_mod.follow(
        job,
        "application_1700000000000_0001",
        on_event=events.append,
        poll_interval=0,
        on_progress=progress.append,
    )
    assert [p.step for p in progress] == [1, 2, 3, 3]
    assert "worker:0 SUCCEEDED" in events
    snapshots = job.reads.count(STATUS_KEY)
    # With a summary: polls 1 (first) and 4 (a task ended) read the snapshot.
    assert snapshots == (2 if summary else 4)


def test_the_masters_snapshot_and_the_clients_copy_have_one_digest() -> None:
    # The master would publish JobSummary.of(its snapshot dict); the client
    # compares it with the digest of the snapshot it parsed: they must agree,
    # or every poll reads the whole snapshot again.
    import json

    from _am_support import job as job_spec

    from am.launcher import FakeLauncher
    from am.state import JobState
    from tfyarn._proto import master_pb2 as pb

    state = JobState(
        job_spec(tasks={"ps": 1, "worker": 2}), FakeLauncher(), master_address="m:1"
    )
    state.register(
        pb.RegisterTaskRequest(
            task=pb.TaskKey(role="ps", index=0),
            attempt=0,
            host="h",
            port=2002,
            yarn_container_id="container_1_0001_01_000002",
        )
    )
    raw = state.snapshot()
    parsed = JobStatus.from_json(json.dumps(raw))
    assert JobSummary.of(raw).digest == JobSummary.of(parsed.to_dict()).digest
    assert JobSummary.of(raw).tasks == 3
