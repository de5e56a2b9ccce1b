"""The page the master serves behind YARN's tracking URL (am/status_page.py)."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from typing import Any

import pytest
from _am_support import HOSTILE, snapshot

from am import status_page

NOW = 1_800_000_100.0


def rows(page: str) -> dict[str, list[str]]:
    """Task -> its cells' text (tags stripped), as a reader sees the table."""
    found = {}
    for task, body in re.findall(
        r"<tr class='task' data-task='([^']*)'[^>]*>(.*?)</tr>", page
    ):
        cells = re.findall(r"<td(?: class='[a-z]+')?>(.*?)</td>", body)
        found[task] = [re.sub(r"<[^>]+>", "", c) for c in cells]
    return found


def test_page_shows_phase_generation_restarts_and_each_task() -> None:
    page = status_page.render(snapshot(), user="alice", now=NOW)
    assert "<span id='phase' class='phase phase-RUNNING'>RUNNING</span>" in page
    assert "<title>tfyarn job: RUNNING</title>" in page
    assert "generation 2" in page and "restarts 1 (budget used 1 of 3)" in page
    assert "cluster formed after 12 s" in page and "(1 min ago)" not in page
    table = rows(page)
    assert list(table) == ["chief:0", "ps:0", "worker:0"]
    chief = dict(zip(status_page._COLUMNS, table["chief:0"], strict=True))
    assert chief["state"] == "RUNNING"
    assert chief["host:port"] == "node1:2222"
    # Shortened to what tells containers apart; the whole id in the tooltip.
    assert chief["container"] == "…01_000002"
    assert "title='container_1800000000000_0007_01_000002'" in page
    assert chief["step"] == "250"
    assert chief["metrics"] == "loss=0.125, total_steps=1000"
    assert chief["heartbeat"] == "1.5 s ago"
    ps = dict(zip(status_page._COLUMNS, table["ps:0"], strict=True))
    assert ps["attempt"] == "1" and ps["state"] == "REGISTERED"


def test_progress_bar_is_the_lead_tasks_step_of_total_steps() -> None:
    page = status_page.render(snapshot(), rates={"chief:0": 5.0}, now=NOW)
    assert "aria-valuenow='25'" in page and "width:25.0%" in page
    assert "chief:0: step 250 of 1000 (25%) · 5.00 steps/s" in page
    assert "about 2 min left" in page  # 750 steps at 5 steps/s
    # Without total_steps: the step, and how to get a bar.
    snap = snapshot()
    snap["tasks"][0]["metrics"] = {"loss": 0.1}
    page = status_page.render(snap, now=NOW)
    assert "role='progressbar'" not in page
    assert "chief:0 at step 250" in page and "total_steps" in page


def test_log_links_point_at_the_nodemanagers_container_log_pages() -> None:
    page = status_page.render(snapshot(), user="alice", now=NOW)
    assert (
        "href='http://node1:8042/node/containerlogs/"
        "container_1800000000000_0007_01_000002/alice'" in page
    )
    assert (
        "href='http://node2:8042/node/containerlogs/"
        "container_1800000000000_0007_01_000005/alice/ps.log/?start=-65536'>output"
        in page
    )
    assert "javascript:" not in page.split("<table")[1].split("data-task='worker:0'")[1]
    # Without the user the NodeManager cannot show them: no link.
    assert "containerlogs" not in status_page.render(snapshot(), now=NOW)


def test_every_text_is_escaped() -> None:
    snap = snapshot(diagnostics=f"worker:1 failed: {HOSTILE}", lead=HOSTILE)
    snap["tasks"][1]["metrics"] = {HOSTILE: 1.0}
    page = status_page.render(snap, user="a'b", now=NOW)
    assert "<script>" not in page
    assert page.count("&lt;script&gt;") >= 4  # reason, history, diagnostics, metric
    assert "/a%27b'" in page  # the user in a link, quoted


def test_restarts_and_diagnostics_are_listed() -> None:
    snap = snapshot(diagnostics="worker:1 exited with code 3", phase="FAILED")
    page = status_page.render(snap, now=NOW)
    assert "<ol id='restarts'><li>cluster restarted: ps:0 (node2) was lost" in page
    assert "<pre id='diagnostics'>worker:1 exited with code 3</pre>" in page


def test_refreshes_while_running_and_stops_when_the_job_ended() -> None:
    assert "http-equiv='refresh'" in status_page.render(snapshot(), now=NOW)
    ended = status_page.render(snapshot(phase="SUCCEEDED"), now=NOW)
    assert "http-equiv='refresh'" not in ended


def test_an_empty_snapshot_renders() -> None:
    page = status_page.render({}, now=NOW)
    assert "UNKNOWN" in page and "no progress reported yet" in page


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return (
                response.status,
                response.headers["Content-Type"],
                response.read().decode(),
            )
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers["Content-Type"], exc.read().decode()


@pytest.fixture
def base() -> Any:
    snap = snapshot()
    seen: list[dict[str, Any]] = []

    def rates(s: dict[str, Any]) -> dict[str, float]:
        seen.append(s)
        return {"chief:0": 2.0}

    server = status_page.serve(
        lambda: snap,
        host="127.0.0.1",
        user="alice",
        metrics=lambda: (b"tfyarn_up 1\n", "text/plain; version=0.0.4"),
        rates=rates,
    )
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", snap, seen
    finally:
        server.shutdown()
        server.server_close()


def test_server_answers_the_page_the_snapshot_and_metrics(base: Any) -> None:
    url, snap, seen = base
    status, kind, body = get(url + "/")
    assert status == 200 and kind.startswith("text/html")
    assert "data-task='ps:0'" in body and "2.00 steps/s" in body
    assert seen == [snap]
    status, kind, body = get(url + "/status.json?x=1")
    assert kind == "application/json" and json.loads(body) == snap
    status, kind, body = get(url + "/metrics")
    assert (status, body) == (200, "tfyarn_up 1\n") and "0.0.4" in kind


def test_a_failing_page_answers_500_and_keeps_serving() -> None:
    calls = {"n": 0}

    def flaky() -> dict[str, Any]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("boom")
        return snapshot()

    server = status_page.serve(flaky, host="127.0.0.1")
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        status, _, body = get(url)
        assert status == 500 and "boom" in body
        assert get(url)[0] == 200
    finally:
        server.shutdown()
        server.server_close()


def test_page_says_preempted_and_counts_what_yarn_took_back() -> None:
    snap = snapshot(
        disruptions=2,
        max_disruptions=20,
        disruption_kinds={"preempted": 2},
        disruption_reasons=[f"ps:0 (node2) was preempted {HOSTILE}", "worker:0 ..."],
    )
    snap["tasks"][1]["state"] = "LOST"
    snap["tasks"][1]["disruption"] = "preempted"
    snap["tasks"][2]["disruption"] = "preempted"
    page = status_page.render(snap, now=NOW)
    assert (
        "taken back by YARN 2 (max_disruptions 20, not charged to "
        "max_restarts: 2 preempted)" in page
    )
    # The restart budget is as it was: disruptions are not restarts.
    assert "restarts 1 (budget used 1 of 3)" in page
    assert "<h2>Containers taken back by YARN</h2>" in page
    assert HOSTILE not in page
    table = rows(page)
    ps = dict(zip(status_page._COLUMNS, table["ps:0"], strict=True))
    worker = dict(zip(status_page._COLUMNS, table["worker:0"], strict=True))
    assert ps["state"] == "PREEMPTED"
    assert worker["state"] == "REQUESTED (preempted)"


def test_page_without_disruptions_says_nothing_of_them() -> None:
    page = status_page.render(snapshot(), now=NOW)
    assert "taken back" not in page and "disruption" not in page


def test_page_counts_resizes_lists_them_and_shows_a_stop_notice() -> None:
    snap = snapshot(
        resizes=1,
        resize_reasons=[f"resized from 2 to 3 worker(s): tfyarn scale {HOSTILE}"],
        stop_notice="stop notice: resized from 3 to 2 worker(s); 1 of 3 saved",
    )
    page = status_page.render(snap, now=NOW)
    workers = sum(t["role"] == "worker" for t in snap["tasks"])
    assert f"resizes 1 (now {workers} workers; not charged to max_restarts)" in page
    assert "<h2>Resizes</h2>" in page and HOSTILE not in page
    assert "stop notice: resized from 3 to 2 worker(s); 1 of 3 saved" in page


def test_page_without_resizes_says_nothing_of_them() -> None:
    page = status_page.render(snapshot(), now=NOW)
    assert "resize" not in page.lower() and "stop notice" not in page
