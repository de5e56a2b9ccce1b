"""The notebook's live view: one display updated in place, and its summary at size."""

from __future__ import annotations

from typing import Any

from tfyarn.client import notebook_view as nv
from tfyarn.client.progressview import Progress
from tfyarn.contract.status import JobStatus, Phase, TaskState, TaskStatus


def _job(ps: int, workers: int) -> JobStatus:
    tasks = [TaskStatus(f"ps:{i}", "ps", i, TaskState.RUNNING) for i in range(ps)]
    tasks += [
        TaskStatus(f"worker:{i}", "worker", i, TaskState.RUNNING, step=100 + i)
        for i in range(workers)
    ]
    return JobStatus(phase=Phase.RUNNING, lead="worker:0", tasks=tasks)


def test_256_tasks_summarize_by_role_and_name_only_those_needing_a_look() -> None:
    job = _job(4, 252)
    job.tasks[10] = TaskStatus(
        "worker:6",
        "worker",
        6,
        TaskState.FAILED,
        attempt=1,
        exit_code=1,
        failures=["exit 1: ValueError: bad batch\nmore"],
    )
    job.tasks[50] = TaskStatus(
        "worker:46", "worker", 46, TaskState.LOST, disruption="preempted"
    )
    for i in range(100, 112):  # twelve relaunching: more than are named
        job.tasks[i] = TaskStatus(
            f"worker:{i - 4}", "worker", i - 4, TaskState.RELAUNCHING, attempt=1
        )
    summary = nv.summarize(job)
    assert [(r.role, r.total) for r in summary.roles] == [("ps", 4), ("worker", 252)]
    worker = summary.roles[1]
    assert worker.states == {"RUNNING": 238, "FAILED": 1, "LOST": 1, "RELAUNCHING": 12}
    assert worker.step == 100 + 251
    assert (
        len(summary.look) == nv.NAMED_TASKS
        and summary.more_to_look == 14 - nv.NAMED_TASKS
    )
    assert (
        summary.look[0]
        == "worker:6 FAILED (attempt 1) exit 1: exit 1: ValueError: bad batch"
    )
    assert summary.look[1] == "worker:46 LOST (attempt 0): preempted"
    assert summary.tasks == []  # too many to list one by one
    text = nv.render_text(nv.ViewState(app_id="application_1_0001", summary=summary))
    # A screenful, not 256 lines.
    assert len(text.splitlines()) < 20
    assert "worker      252: 1 FAILED, 1 LOST, 12 RELAUNCHING, 238 RUNNING" in text
    assert f"... and {14 - nv.NAMED_TASKS} more" in text
    assert "<td>252</td>" in nv.render_html(nv.ViewState(summary=summary))


def test_a_small_job_is_listed_task_by_task() -> None:
    summary = nv.summarize(_job(1, 2))
    assert [t.task for t in summary.tasks] == ["ps:0", "worker:0", "worker:1"]
    assert summary.look == []
    text = nv.render_text(nv.ViewState(summary=summary))
    assert "worker:1     RUNNING step 101" in text


class _Handle:
    def __init__(self) -> None:
        self.shown: list[Any] = []

    def update(self, obj: Any) -> None:
        self.shown.append(obj)


def test_the_view_updates_one_display_and_ends_on_the_final_state() -> None:
    handle = _Handle()
    displayed: list[tuple[Any, dict[str, Any]]] = []

    def display(obj: Any, **kw: Any) -> _Handle:
        displayed.append((obj, kw))
        return handle

    now = [0.0]
    view = nv.NotebookView(
        "tfyarn job 'x'",
        display=display,
        clock=lambda: now[0],
        stamp=lambda: "12:00:00",
    )
    view.submitted("application_1_0002")
    for step in (10, 20):
        now[0] += 1.0
        view.progress(Progress("worker:0", step, 40))
        view.event(f"worker:0 step {step}")
    view.status(_job(0, 2))
    view.finished("SUCCEEDED", "")
    assert len(displayed) == 1 and displayed[0][1] == {"display_id": True}
    final = handle.shown[-1]
    assert "application_1_0002: SUCCEEDED" in repr(final)
    assert "10 steps/s" in repr(final)  # 10 steps in 1 s
    assert "\x1b" not in repr(final)  # no terminal control codes
    assert "SUCCEEDED" in final._repr_html_()


def test_choose_picks_lines_outside_a_notebook() -> None:
    lines: list[str] = []
    view = nv.choose(lines.append)
    view.submitted("application_1_0003")
    view.event("YARN: ACCEPTED")
    assert lines == ["YARN: ACCEPTED"]
    assert not nv.in_notebook()
    assert isinstance(nv.choose(None), nv.LinesView)


def test_status_and_logs_render_readably_in_a_cell() -> None:
    from IPython.lib.pretty import pretty

    from tfyarn.client.cell_views import LOG_TAIL, TaskLogs
    from tfyarn.client.jobs import JobStatus as Status
    from tfyarn.client.tasklogs import TaskLog

    st = Status(
        app_id="application_1_0004",
        name="digits",
        state="FINISHED",
        final_status="FAILED",
        diagnostics="worker:1 exit 1: ValueError <bad>",
        tracking_url="http://rm:8088/proxy/application_1_0004/",
        master=_job(1, 2),
    )
    text = pretty(st)
    assert text.startswith("tfyarn job 'digits' application_1_0004: FAILED")
    assert "worker:1     RUNNING step 101" in text
    assert "diagnostics: worker:1 exit 1: ValueError <bad>" in text
    page = st._repr_html_()
    assert "ValueError &lt;bad&gt;" in page and 'href="http://rm:8088/proxy/' in page

    logs = TaskLogs(
        [
            TaskLog(
                "worker:0", "container_1", "h", "stderr", "x" * (LOG_TAIL + 5) + "END"
            )
        ]
    )
    shown = pretty(logs)
    assert shown.startswith("==> worker:0 [container_1 on h, stderr] <==")
    assert "[... 8 earlier characters]" in shown and shown.rstrip().endswith("END")
    assert "<details open><summary><b>worker:0" in logs._repr_html_()
    assert isinstance(logs, list) and logs[0].task == "worker:0"
