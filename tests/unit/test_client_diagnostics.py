"""Diagnostics read as sentences: tfyarn's part first, YARN's after, apart
(YARN appends the master's words to its own without a separator)."""

from __future__ import annotations

from types import SimpleNamespace

from tfyarn.client.diagnostics import separate
from tfyarn.client.jobs import status_from_report
from tfyarn.contract.status import JobStatus as MasterStatus
from tfyarn.contract.status import Phase

GLUED = "Attempt recovered after RM restarttfyarn: worker:0 finished successfully"
OURS = "tfyarn: worker:0 finished successfully"


def test_yarns_words_glued_before_ours_move_after_them() -> None:
    assert separate(GLUED) == f"{OURS}\nYARN: Attempt recovered after RM restart"


def test_the_masters_published_diagnostics_are_found_exactly() -> None:
    # A failure's words need not start with "tfyarn: ".
    ours = "worker:0 failed with exit code 1\nAll task logs: yarn logs -applicationId x"
    glued = "Attempt recovered after RM restart" + ours
    assert separate(glued, ours) == f"{ours}\nYARN: Attempt recovered after RM restart"


def test_diagnostics_of_one_side_are_left_as_they_are() -> None:
    assert separate(OURS) == OURS
    assert separate(OURS, OURS) == OURS
    assert separate("Application killed by user.") == "Application killed by user."
    # Words of the master quoting a task's "tfyarn: " line are not split.
    quoted = "worker:0 failed: tfyarn: the script train.py is not in the container"
    assert separate(quoted) == quoted
    assert separate("") == ""


def test_a_status_from_yarns_report_reads_ours_first() -> None:
    report = SimpleNamespace(
        id="application_1_0001", name="j", queue="default", user="u",
        state="FINISHED", final_status="SUCCEEDED", diagnostics=GLUED,
        progress=1.0, tracking_url="", host="h", tags=["tfyarn"],
    )  # fmt: skip
    master = MasterStatus(phase=Phase.SUCCEEDED, diagnostics=OURS)
    for known in (None, master):
        st = status_from_report(report, known)
        assert st.diagnostics.splitlines() == [
            OURS,
            "YARN: Attempt recovered after RM restart",
        ]
