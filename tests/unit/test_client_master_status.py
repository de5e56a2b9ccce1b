"""The client reads the master's real published status, not a hand-written one.

A renamed key or task state on either side fails here: the document is made
by the master's own ``JobState`` (with the in-memory FakeLauncher) and read
back through the client's reader, narrator and status table.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

from _am_support import job

from am.launcher import FakeLauncher
from am.state import JobState
from tfyarn._proto import master_pb2 as pb
from tfyarn.client import jobs, narrator
from tfyarn.contract.status import STATUS_KEY, TaskState


def published(state: JobState) -> SimpleNamespace:
    """A skein application client whose key-value store holds the master's status."""
    document = json.dumps(state.snapshot()).encode()

    def get(key: str) -> bytes | None:
        return document if key == STATUS_KEY else None

    return SimpleNamespace(kv=SimpleNamespace(get=get))


def register(state: JobState, role: str, index: int, port: int) -> None:
    state.register(
        pb.RegisterTaskRequest(
            task=pb.TaskKey(role=role, index=index),
            attempt=0,
            host="h",
            port=port,
            yarn_container_id=f"container_1_0001_01_00000{port - 2000}",
        )
    )


def test_the_masters_status_is_narrated_and_tabled() -> None:
    state = JobState(
        job(tasks={"ps": 1, "worker": 2}), FakeLauncher(), master_address="m:1"
    )
    register(state, "ps", 0, 2002)
    status = jobs.read_master_status(published(state))
    assert status is not None and status.phase is state.phase
    assert status.task("ps:0").state is TaskState.REGISTERED  # type: ignore[union-attr]

    story = narrator.Narrator()
    assert story.update(status) == [
        f"master: {state.phase.value}",
        "containers ps 1/1/1, worker 2/0/0 (requested/allocated/registered)",
        "ps:0 REGISTERED (h:2002, container_1_0001_01_000002)",
        "worker:0 REQUESTED",
        "worker:1 REQUESTED",
    ]

    register(state, "worker", 0, 2003)
    register(state, "worker", 1, 2004)
    status = jobs.read_master_status(published(state))
    assert status is not None
    lines = story.update(status)
    assert status.phase is state.phase
    assert lines[0] == "master: RUNNING"
    assert lines[1] == (
        "containers ps 1/1/1, worker 2/2/2 (requested/allocated/registered)"
    )
    assert lines[2].startswith("cluster formed in ")
    assert lines[2].endswith(" s (generation 1)")
    assert lines[3:] == [
        "ps:0 RUNNING (h:2002, container_1_0001_01_000002)",
        "worker:0 RUNNING (h:2003, container_1_0001_01_000003)",
        "worker:1 RUNNING (h:2004, container_1_0001_01_000004)",
    ]
    table = narrator.task_table(status).splitlines()
    assert table[0].startswith("TASK  ")
    assert table[3].split()[:5] == [
        "worker:1",
        "RUNNING",
        "0",
        "h:2004",
        "container_1_0001_01_000004",
    ]
