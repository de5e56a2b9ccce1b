"""The master's tracking page and /metrics, reached through the ResourceManager's proxy.

A small ParameterServerStrategy job (jobs/tracking_ps.py) keeps training while
the test reads ``/metrics`` as Prometheus text and loads the page in a real
headless Chromium (Debian's ``chromium``, installed by tests/system-packages.sh),
whose rendered DOM must show every task and its state. The screenshot is kept
under tests/artifacts/tracking_page/ (gitignored); the test prints its path.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, Job, running_job
from prometheus_client.parser import text_string_to_metric_families

from tfyarn import client

pytestmark = [pytest.mark.yarn, pytest.mark.slow]

JOB = Path(__file__).with_name("jobs") / "tracking_ps.py"
TASKS: dict[str, Any] = {"num_chief": 1, "num_ps": 1, "num_worker": 2}
ROLES = {"chief": 1, "ps": 1, "worker": 2}
OPTIONS: dict[str, Any] = {
    "ps_memory": "512 MiB",
    "worker_memory": "512 MiB",
    "chief_memory": "768 MiB",
    "stop_grace": 3,
    "worker_grace": 3,
    "registration_timeout": 150,
}
ARTIFACTS = REPO / "tests" / "artifacts" / "tracking_page"


def master_snapshot(job: Job) -> dict[str, Any]:
    master = client.status(job.app_id, client=job.yarn).master
    return master.to_dict() if master else {}


def wait_until_training(job: Job, timeout: float = 300) -> dict[str, Any]:
    """Every task RUNNING and the chief past step 2; the snapshot then."""
    deadline = time.monotonic() + timeout
    snap: dict[str, Any] = {}
    while time.monotonic() < deadline:
        snap = master_snapshot(job)
        tasks = {t["task"]: t for t in snap.get("tasks", [])}
        if (
            len(tasks) == sum(ROLES.values())
            and all(t["state"] == "RUNNING" for t in tasks.values())
            and (tasks["chief:0"].get("step") or 0) > 2
        ):
            return snap
        status = client.status(job.app_id, client=job.yarn)
        assert not status.done, f"job ended early: {status.diagnostics}"
        time.sleep(1)
    pytest.fail(f"the job was not training within {timeout:.0f} s: {snap}")


def page_url(job: Job) -> str:
    """The tracking page: YARN's tracking URL (the RM's proxy) + skein's page route."""
    tracking = str(job.yarn.application_report(job.app_id).tracking_url)
    assert "/proxy/" + job.app_id in tracking, tracking  # through the RM, not skein
    return tracking.rstrip("/") + "/pages/tfyarn/"


def fetch(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        assert response.status == 200
        return response.read().decode()


def metric_values(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


class TaskRows(HTMLParser):
    """The task table's rows as Chromium rendered them: task -> (state, cells),
    and task -> the tooltips (``title``) inside its cells."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, tuple[str, list[str]]] = {}
        self.titles: dict[str, list[str]] = {}
        self._row: str | None = None
        self._cells: list[str] = []
        self._in_cell = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "tr" and a.get("class") == "task":
            self._row, self._cells = a.get("data-task") or "", []
            self.rows[self._row] = (a.get("data-state") or "", self._cells)
            self.titles[self._row] = []
        elif tag == "td" and self._row is not None:
            self._in_cell = True
            self._cells.append("")
        elif self._in_cell and self._row is not None and a.get("title"):
            self.titles[self._row].append(a["title"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "td":
            self._in_cell = False
        elif tag == "tr":
            self._row = None

    def handle_data(self, data: str) -> None:
        if self._in_cell:
            self._cells[-1] += data


def chromium(*args: str, profile: Path, timeout: float = 90) -> str:
    """Run headless Chromium once; its stdout. Its whole process group ends with it."""
    binary = shutil.which("chromium")
    assert binary, "chromium is not installed: run tests/system-packages.sh"
    # --no-sandbox: the tests run as root in CI (Chromium's sandbox refuses
    # root) and load only this job's own page.
    command = [
        binary,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        *args,
    ]
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = process.communicate(timeout=timeout)
    finally:
        # Renderer and GPU helpers share its session: end them too.
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()
    assert process.returncode == 0, (
        f"chromium exited with {process.returncode}: {err[-2000:]}"
    )
    assert out or "--screenshot" in " ".join(args), f"chromium printed nothing: {err}"
    return out


def test_tracking_page_and_metrics_through_the_resourcemanager_proxy(
    skein_client: Any, tmp_path: Path
) -> None:
    with running_job(skein_client, JOB, **TASKS, **OPTIONS) as job:
        snap = wait_until_training(job)
        url = page_url(job)

        # (a) /metrics through the proxy, as Prometheus would scrape it.
        found = metric_values(fetch(url + "metrics"))
        for role, count in ROLES.items():
            assert (
                found[
                    "tfyarn_tasks",
                    frozenset({"role": role, "state": "RUNNING"}.items()),
                ]
                == count
            )
        chief = frozenset({"task": "chief:0", "role": "chief"}.items())
        assert found["tfyarn_task_step", chief] > 0
        assert found["tfyarn_task_metric", chief | {("metric", "total_steps")}] == 400
        assert (
            found["tfyarn_cluster_generation", frozenset()] == snap["generation"] == 1
        )
        assert found["tfyarn_cluster_formation_seconds", frozenset()] > 0
        registered = found[
            "tfyarn_registry_calls_total",
            frozenset({"method": "WatchCluster", "code": "OK"}.items()),
        ]
        assert registered >= sum(ROLES.values())

        # (b) the page in a real browser, through the same proxy.
        dom = chromium("--dump-dom", url, profile=tmp_path / "profile")
        rows = TaskRows()
        rows.feed(dom)
        assert set(rows.rows) == {
            f"{r}:{i}" for r, n in ROLES.items() for i in range(n)
        }, dom[-3000:]
        for task, (state, cells) in rows.rows.items():
            assert state == "RUNNING" and cells[:2] == [task, "RUNNING"], (task, cells)
        assert re.search(r"role=\"progressbar\"[^>]*aria-valuenow=\"\d+\"", dom), dom[
            -3000:
        ]
        # Each task links to its running container's logs on the NodeManager.
        links = re.findall(r'href="(http://[^"]+/node/containerlogs/[^"]+)"', dom)
        for task, (_, cells) in rows.rows.items():
            # The cell shows the id's end (attempt_number), its tooltip all of it.
            container = rows.titles[task][0]
            assert container.startswith("container_"), (task, rows.titles[task])
            assert container.endswith(cells[3].lstrip("…")), (container, cells)
            assert any(f"/containerlogs/{container}/" in u for u in links), (
                cells,
                links,
            )
        # The chief's output link (skein's chief.log) shows what its runtime
        # printed; "all logs" lists that file.
        chief_output = next(u for u in links if "/chief.log/" in u)
        assert "/chief.log/" in fetch(chief_output.split("/chief.log/")[0])
        output = fetch(chief_output)
        assert "tfyarn.runtime INFO: chief:0" in output, output[-2000:]

        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / f"{job.app_id}.png"
        chromium(
            f"--screenshot={shot}",
            "--window-size=1400,900",
            url,
            profile=tmp_path / "profile",
        )
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        print(f"tracking page screenshot: {shot}")

        skein_client.connect(job.app_id).kv["test.done"] = b"1"  # let it end
        final = job.wait(timeout=300)
    assert final.succeeded
