"""The master keeps the job's final record (am/record.py): whole or not at all,
owner-only, bounded in time, and also for a job `tfyarn kill` stopped."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import threading
import time

import pytest
from _am_support import job
from _state_support import Clock, register, run

from am.launcher import FakeLauncher
from am.record import JobRecord, keep_when_stopped, write_record
from am.state import JobState
from tfyarn.contract.record import (
    DIR_MODE,
    FILE_MODE,
    RECORD_KEY,
    WRITTEN,
    record_url,
)
from tfyarn.contract.status import STATUS_KEY, JobStatus, Phase

URL = record_url("alice", "application_1_0001")
DIRECTORY = "hdfs:///user/alice/.tfyarn/jobs"


class FakeFiles:
    """An in-memory HDFS: files appear only when their writer closes them."""

    def __init__(self, *, fail_on: str = "", block: threading.Event | None = None):
        self.files: dict[str, bytes] = {}
        self.modes: dict[str, int] = {}
        self.dirs: set[str] = set()
        self.calls: list[tuple[str, str]] = []
        # An operation HDFS refuses: on the record's own files (the directory
        # only for mkdirs, which touches nothing else).
        self.fail_on = fail_on
        self.block = block  # writes wait for it, as a stuck DataNode

    def _call(self, op: str, url: str) -> None:
        self.calls.append((op, url))
        if op == self.fail_on and (op == "mkdirs" or url != DIRECTORY):
            raise PermissionError(f"HDFS {op} of {url}: permission denied")

    def mkdirs(self, url: str) -> None:
        self._call("mkdirs", url)
        self.dirs.add(url)

    def set_permission(self, url: str, mode: int) -> None:
        self._call("chmod", url)
        self.modes[url] = mode

    def open_output(self, url: str) -> io.BytesIO:
        self._call("create", url)
        files, block = self.files, self.block

        class Out(io.BytesIO):
            def close(self) -> None:
                if block is not None:
                    block.wait(10)
                files[url] = self.getvalue()
                super().close()

        return Out()

    def rename(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        self._call("rename", src)
        assert overwrite
        self.files[dst] = self.files.pop(src)
        self.modes[dst] = self.modes.pop(src)

    def delete(self, url: str, *, recursive: bool = False) -> None:
        self._call("delete", url)
        self.files.pop(url, None)


def test_the_record_is_written_under_a_temporary_name_then_renamed_owner_only() -> None:
    files = FakeFiles()
    write_record(files, URL, b'{"phase": "SUCCEEDED"}')
    assert files.files == {URL: b'{"phase": "SUCCEEDED"}'}
    assert files.modes[URL] == FILE_MODE == 0o600
    assert files.modes[DIRECTORY] == DIR_MODE == 0o700
    ops = [op for op, _ in files.calls]
    assert ops == ["mkdirs", "chmod", "create", "chmod", "rename"]
    temporary = files.calls[2][1]
    # Beside the record, never its name; made owner-only before it is renamed.
    assert temporary.startswith(DIRECTORY + "/") and temporary != URL
    assert files.calls[3] == ("chmod", temporary)
    assert files.calls[4] == ("rename", temporary)


@pytest.mark.parametrize("step", ["chmod", "rename"])
def test_a_failed_write_leaves_no_half_record_and_no_temporary(step: str) -> None:
    files = FakeFiles(fail_on=step)
    files.files[URL] = b"the earlier record"
    files.modes[URL] = FILE_MODE
    with pytest.raises(PermissionError):
        write_record(files, URL, b"new")
    # The earlier record whole, and the temporary file gone.
    assert files.files == {URL: b"the earlier record"}
    assert ("create", files.calls[2][1]) in files.calls
    assert files.calls[-1] == ("delete", files.calls[2][1])


def test_keep_writes_once_and_reports_success() -> None:
    files = FakeFiles()
    record = JobRecord(URL, lambda url: files)

    async def main() -> tuple[bool, bool]:
        return await record.keep('{"n": 1}'), await record.keep('{"n": 2}')

    assert asyncio.run(main()) == (True, True)
    assert files.files == {URL: b'{"n": 1}'} and record.kept


def test_a_stuck_hdfs_write_costs_the_deadline_and_a_warning_not_the_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stuck = threading.Event()
    files = FakeFiles(block=stuck)
    record = JobRecord(URL, lambda url: files, deadline=0.2)
    started = time.monotonic()
    try:
        with caplog.at_level(logging.WARNING, logger="am.record"):
            kept = asyncio.run(record.keep("{}"))
    finally:
        stuck.set()
    assert kept is False and not record.kept
    assert time.monotonic() - started < 3
    assert f"not written to {URL} within 0.2 s" in caplog.text


def test_a_refused_write_is_a_warning_naming_the_record_and_the_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    files = FakeFiles(fail_on="mkdirs")
    record = JobRecord(URL, lambda url: files)
    with caplog.at_level(logging.WARNING, logger="am.record"):
        assert asyncio.run(record.keep("{}")) is False
    assert f"could not write the job's final record to {URL}" in caplog.text
    assert "permission denied" in caplog.text


def _succeed(state: JobState, launcher: FakeLauncher) -> None:
    launcher.grant("worker_0")
    register(state, "worker", 0, 2000)
    state.task_end("worker", 0, 0, 0, "")


def test_a_finished_job_keeps_its_published_final_status_before_it_ends() -> None:
    order: list[str] = []

    class Watching(FakeLauncher):
        async def keep_record(self, status: str) -> bool:
            order.append("record")
            return await super().keep_record(status)

        async def shutdown(self, status: str, diagnostics: str) -> None:
            order.append("shutdown")
            await super().shutdown(status, diagnostics)

    launcher = Watching()

    async def main() -> None:
        state = JobState(job(), launcher, clock=Clock(), tick=0.01)
        await state.start()
        _succeed(state, launcher)
        await asyncio.wait_for(state.until_done(), 5)

    asyncio.run(main())
    assert order == ["record", "shutdown"]
    assert launcher.record == launcher.kv[STATUS_KEY]
    assert launcher.record is not None
    final = JobStatus.from_json(launcher.record)
    assert final.phase is Phase.SUCCEEDED
    assert [t.task for t in final.tasks] == ["worker:0"]
    assert launcher.kv[RECORD_KEY] == WRITTEN


def test_a_slow_record_does_not_keep_the_application_from_ending() -> None:
    stuck = threading.Event()
    files = FakeFiles(block=stuck)

    class Slow(FakeLauncher):
        async def keep_record(self, status: str) -> bool:
            return await self.hdfs.keep(status)

    launcher = Slow()

    async def main() -> None:
        launcher.hdfs = JobRecord(URL, lambda url: files, deadline=0.2)  # type: ignore[attr-defined]
        state = JobState(job(), launcher, clock=Clock(), tick=0.01)
        await state.start()
        _succeed(state, launcher)
        await asyncio.wait_for(state.until_done(), 5)

    try:
        asyncio.run(main())
    finally:
        stuck.set()
    assert launcher.final is not None and launcher.final[0] == "SUCCEEDED"
    assert launcher.kv[RECORD_KEY] == "failed"


def test_a_job_tfyarn_kill_stopped_is_recorded_before_yarn_kills_it() -> None:
    spec = job(tasks={"worker": 2}, stop_grace=1)
    seen: dict[str, str] = {}

    async def scenario(state: JobState, launcher: FakeLauncher, clock: Clock) -> None:
        watcher = asyncio.create_task(keep_when_stopped(state, poll=0.01))
        for cid in list(launcher.containers):
            launcher.grant(cid)
        register(state, "worker", 0, 2000)
        register(state, "worker", 1, 2001)
        state.stop_job("stopped by tfyarn kill", 0)
        await asyncio.sleep(0.05)
        # The client waits while the master has not kept the record.
        seen["before"] = launcher.kv[RECORD_KEY]
        assert launcher.record is None  # a task still runs
        state.task_end("worker", 0, 0, -15, "Terminated")
        state.task_end("worker", 1, 0, -15, "Terminated")
        await state.reconcile_once()
        await asyncio.wait_for(watcher, 2)
        seen["after"] = launcher.kv[RECORD_KEY]
        # Then YARN's kill: SIGTERM to the master.
        state.request_kill("the application master received SIGTERM (killed)")

    _, launcher = run(spec, scenario)
    assert seen == {"before": "pending", "after": WRITTEN}
    assert launcher.record is not None
    final = json.loads(launcher.record)
    assert final["phase"] == "KILLED"
    assert final["diagnostics"] == "stopped by tfyarn kill"
    assert {t["task"]: t["state"] for t in final["tasks"]} == {
        "worker:0": "KILLED",
        "worker:1": "KILLED",
    }
    assert launcher.final is None  # YARN ends a killed application itself
