"""Helpers for tests that run real jobs on the local YARN cluster."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfyarn import client
from tfyarn.client.tasklogs import TaskLog, select
from tfyarn.contract.hadoop_conf import HadoopConf
from tfyarn.errors import JobFailedError, TfyarnError

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
TFYARN = [sys.executable, "-m", "tfyarn.cli"]
# Small tasks: the machine has 2 cores; TensorFlow needs well under 1 GiB here.
SMALL = {
    "chief_memory": "1 GiB",
    "ps_memory": "768 MiB",
    "worker_memory": "1 GiB",
    "evaluator_memory": "1 GiB",
    "am_memory": "512 MiB",
}
# Not anchored at the line's end: another thread's output can land right
# after the number (print writes the text and its newline apart).
ACCURACY = re.compile(r"^accuracy=(\d+(?:\.\d+)?)", re.MULTILINE)
# An event of a container that started: "worker:3 RUNNING (host:port, container_..."
RAN = re.compile(
    r"^\S+ (?:REGISTERED|RUNNING|SUCCEEDED|FAILED) \((?:[^,]*, )?(container_\w+)"
)


@dataclass
class Job:
    """A submitted job and what following it printed."""

    app_id: str
    yarn: Any
    events: list[str] = field(default_factory=list)
    final: client.JobStatus | None = None
    _ended_logs: list[TaskLog] | None = field(default=None, repr=False)

    def wait(self, timeout: float = 600) -> client.JobStatus:
        """Follow to the end; JobFailedError if it did not succeed.

        Every 2 s: a poll costs the skein driver, the master and this process
        about 0.02 CPU-seconds: 1.8 CPU-seconds less a minute than at 0.5 s
        on a machine whose five test lanes share two cores. The events tests
        read (restarts, disruptions, phases) are counters and states that
        last; a slower poll only coarsens the narration.
        """
        self.final = client.wait(
            self.app_id,
            on_event=self.events.append,
            timeout=timeout,
            poll_interval=2.0,
            client=self.yarn,
        )
        return self.final

    def wait_for_end(self, timeout: float = 600) -> client.JobStatus:
        """Follow to the end whatever the outcome; return the final status."""
        with contextlib.suppress(JobFailedError):
            self.wait(timeout)
        self.final = client.status(self.app_id, client=self.yarn)
        return self.final

    def logs(self, task: str | None = None, *, timeout: float = 60) -> str:
        """The job's logs (``task`` only), retrying while aggregation catches up.

        Aggregation hands over one container at a time: after :meth:`wait`,
        this waits until every container the events saw run (of ``task``)
        has its log, not just the first to arrive. Each ``yarn logs`` is a JVM
        (1.6 CPU-seconds): an ended job's logs are fetched whole once and
        kept, and a task they hold in full is answered from them.
        """
        if self.final is not None and self.final.done:
            if self._ended_logs is None:
                self._ended_logs = []
                with contextlib.suppress(TfyarnError):
                    self._ended_logs = list(client.logs(self.app_id, client=self.yarn))
            kept = self._ended_logs
            chosen = kept if task is None else select(kept, task)
            if chosen and self._ran_containers(task) <= {
                e.container_id for e in chosen
            }:
                return "\n".join(e.text for e in chosen)
        return "\n".join(e.text for e in self._fetch(task, timeout))

    def _fetch(self, task: str | None, timeout: float) -> list[TaskLog]:
        expected = self._ran_containers(task)
        deadline = time.monotonic() + timeout
        entries: list[TaskLog] = []
        while True:
            try:
                entries = list(client.logs(self.app_id, task=task, client=self.yarn))
                text = "\n".join(e.text for e in entries)
                if text.strip() and expected <= {e.container_id for e in entries}:
                    return entries
            except TfyarnError:
                if time.monotonic() > deadline:
                    raise
            if time.monotonic() > deadline:
                return entries
            time.sleep(2)

    def _ran_containers(self, task: str | None) -> set[str]:
        """Containers that got as far as running, from the followed events."""
        ran = set()
        for line in self.events:
            match = RAN.match(line)
            if match and (task is None or line.startswith((f"{task} ", f"{task}:"))):
                ran.add(match.group(1))
        return ran


@contextlib.contextmanager
def running_job(
    yarn: Any, script: str | Path, *, args: Sequence[str] = (), **options: Any
) -> Iterator[Job]:
    """Submit a job; on any failure in the block kill it and print its logs."""
    opts = {**SMALL, "name": f"test-{Path(script).stem}", **options}
    app_id = client.submit(str(script), args=list(args), client=yarn, **opts)
    job = Job(app_id, yarn)
    try:
        yield job
    except BaseException:
        print(f"---- {app_id} events ----\n" + "\n".join(job.events))
        with contextlib.suppress(Exception):
            if not client.status(app_id, client=yarn).done:
                client.kill(app_id, client=yarn)
        with contextlib.suppress(Exception):
            entries = client.logs(app_id, client=yarn)
            print(f"---- {app_id} logs ----")
            for e in entries:
                print(f"==> {e.label} <==\n{e.text[-4000:]}")
        raise
    finally:
        with contextlib.suppress(Exception):
            if not client.status(app_id, client=yarn).done:
                client.kill(app_id, client=yarn)


def accuracy_from(text: str) -> float:
    """The ``accuracy=0.97`` an example printed; fail if it printed none."""
    found = ACCURACY.findall(text)
    assert found, f"no accuracy=... line in the log:\n{text[-3000:]}"
    return float(found[-1])


def run_cli(
    *argv: str, timeout: float = 600, python: str = ""
) -> subprocess.CompletedProcess[str]:
    """``tfyarn ARGV`` in a subprocess, as a user would run it (with the
    interpreter ``python`` if given, else this session's)."""
    return subprocess.run(
        [python or TFYARN[0], *TFYARN[1:], *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


def rm_addresses() -> list[str]:
    """The ResourceManagers' web addresses, from the cluster's yarn-site.xml
    (both of an HA pair: ``yarn.resourcemanager.webapp.address.<id>``)."""
    yarn = HadoopConf(os.environ["HADOOP_CONF_DIR"]).yarn
    ids = [i.strip() for i in yarn.get("yarn.resourcemanager.ha.rm-ids", "").split(",")]
    found = [yarn[f"yarn.resourcemanager.webapp.address.{i}"] for i in ids if i]
    return found or [yarn.get("yarn.resourcemanager.webapp.address", "127.0.0.1:8088")]


def rm_address() -> str:
    """The (first) ResourceManager's web address."""
    return rm_addresses()[0]


def app_attempts(app_id: str) -> list[dict[str, Any]]:
    """The application's attempts, as YARN's RM REST API lists them (a
    standby ResourceManager redirects to the active one; a down one is skipped)."""
    error: Exception | None = None
    for address in rm_addresses():
        url = f"http://{address}/ws/v1/cluster/apps/{app_id}/appattempts"
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = json.load(response)
            break
        except OSError as exc:
            error = exc
    else:
        raise AssertionError(f"no ResourceManager answered: {error}")
    return list(body["appAttempts"]["appAttempt"])
