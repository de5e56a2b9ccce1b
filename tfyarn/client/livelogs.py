"""``tfyarn logs APP --task worker:0 -f``: a running task's output as it arrives.

Like ``kubectl logs -f``. Each poll reads the master's published status for
the task's current container and node, and the new bytes of its ``<role>.log``
(skein's file for the service's output) from that NodeManager (:mod:`nmweb`).
A new attempt of the task (a new container) gets a header and is read from
its start. When the job ends, what the last container wrote since the last
poll is read from its node or, once aggregated and gone from there, from the
aggregated logs.
"""

from __future__ import annotations

import codecs
import contextlib
import time
from collections.abc import Callable
from typing import Any

from tfyarn.client import nmweb, nodelogs, tasklogs
from tfyarn.client.connection import DONE, ask, check_app_id, opened
from tfyarn.client.jobs import app_client, read_master_status
from tfyarn.errors import TfyarnError
from tfyarn.spec import Role

POLL_INTERVAL = 1.0
# A NodeManager may answer 5xx for a while around a container's end: only
# this long without one good read makes -f give up.
NODE_ERROR_TOLERANCE = 30.0
# After the job, aggregation of the last container's log takes a few seconds.
AGGREGATION_WAIT = 60.0


def parse_task(task: str | None) -> tuple[str, int]:
    """``worker:0`` -> (``worker``, 0); one task only, since one stream is followed."""
    role, _, index = (task or "").strip().partition(":")
    if role not in {r.value for r in Role} or not index.isdigit():
        raise TfyarnError(
            f"-f follows one task's output, named ROLE:INDEX (e.g. --task worker:0), "
            f"got {task!r}; without -f, --task also takes a role (ps) or 'master'"
        )
    return role, int(index)


class _Stream:
    """One container's ``<role>.log``: where reading stopped, and its decoder."""

    def __init__(self, app_id: str, node: str, container: str, name: str) -> None:
        self.app_id = app_id
        self.node, self.container, self.name = node, container, name
        self.offset = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def poll(self, write: Callable[[str], None]) -> None:
        """Write what the file gained since the last poll (nothing if absent yet)."""
        size = nmweb.log_files(self.node, self.container).get(self.name)
        if size is None or size <= self.offset:
            return
        try:
            chunk = nmweb.read_from(
                self.node, self.container, self.name, self.offset, size
            )
        except nmweb.NotOnNode:
            raise
        except nmweb.NodeLogsError:
            # A node that lists but cannot open files (see nodelogs): its
            # log dir, when it is on this machine.
            local = self._local(size)
            if local is None:
                raise
            chunk = local
        if chunk.skipped:
            write(f"\n[... {chunk.skipped} bytes not shown ...]\n")
        self.feed(chunk.data, write)
        self.offset = chunk.end

    def _local(self, size: int) -> nmweb.Chunk | None:
        path = nodelogs.local_path(self.app_id, self.container, self.name)
        if path is None:
            return None
        with path.open("rb") as f:
            f.seek(self.offset)
            return nmweb.Chunk(f.read(max(size - self.offset, 0)), self.offset)

    def feed(
        self, data: bytes, write: Callable[[str], None], final: bool = False
    ) -> None:
        text = self._decoder.decode(data, final)
        if text:
            write(text)


def follow_task(
    app_id: str,
    task: str,
    *,
    write: Callable[[str], None],
    poll_interval: float = POLL_INTERVAL,
    client: Any | None = None,
) -> str:
    """Write a task's output as it arrives until the job ends.

    Returns
    -------
    str
        YARN's final state of the application (``FINISHED``, ``FAILED``, ``KILLED``).

    Raises
    ------
    TfyarnError
        Not one task, no such application, or a NodeManager that cannot be read.
    """
    app_id = check_app_id(app_id)
    role, index = parse_task(task)
    key = f"{role}:{index}"
    stream: _Stream | None = None
    app = None
    failing_since: float | None = None
    with opened(client) as yarn:
        try:
            while True:
                report = ask(app_id, lambda: yarn.application_report(app_id))
                state = str(report.state)
                if state in DONE:
                    _finish(app_id, key, stream, write, yarn)
                    return state
                if state == "RUNNING":
                    if app is None:
                        app = app_client(yarn, app_id)
                    master = read_master_status(app) if app else None
                    t = master.task(key) if master else None
                    if t and t.node and t.yarn_container_id:
                        if stream is None or stream.container != t.yarn_container_id:
                            if stream is not None:  # the old attempt's last words
                                _drain(stream, write)
                            stream = _Stream(
                                app_id, t.node, t.yarn_container_id, f"{role}.log"
                            )
                            attempt = f" attempt {t.attempt}" if t.attempt else ""
                            write(
                                f"==> {key}{attempt} [{t.yarn_container_id} on "
                                f"{t.node}] <==\n"
                            )
                        try:
                            stream.poll(write)
                            failing_since = None
                        except nmweb.NotOnNode:
                            pass
                        except nmweb.NodeLogsError:
                            now = time.monotonic()
                            failing_since = failing_since or now
                            if now - failing_since > NODE_ERROR_TOLERANCE:
                                raise
                time.sleep(poll_interval)
        finally:
            if app is not None:
                app.close()


def _drain(stream: _Stream, write: Callable[[str], None]) -> bool:
    """Read a stream to its end from its node; whether the node still had it."""
    try:
        stream.poll(write)
    except nmweb.NodeLogsError:  # gone from the node, or it cannot serve it now
        return False
    stream.feed(b"", write, final=True)
    return True


def _finish(
    app_id: str,
    key: str,
    stream: _Stream | None,
    write: Callable[[str], None],
    yarn: Any,
) -> None:
    """After the end: the rest of the last container, from its node or the
    aggregated logs (the node deletes its copy once aggregated)."""
    if stream is None:  # ended before it was seen running: its whole log
        write(tasklogs.render(tasklogs.logs(app_id, task=key, client=yarn)))
        return
    if _drain(stream, write):
        return
    deadline = time.monotonic() + AGGREGATION_WAIT
    while True:
        with contextlib.suppress(TfyarnError):  # not aggregated yet
            for log in tasklogs.logs(app_id, task=key, client=yarn):
                if log.container_id == stream.container and log.log_type == stream.name:
                    rest = log.text.encode()[stream.offset :]
                    stream.feed(rest, write, final=True)
                    return
        if time.monotonic() >= deadline:
            return  # no aggregation on this cluster: nothing more to show
        time.sleep(2.0)
