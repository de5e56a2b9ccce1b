"""The job's final record: its last status snapshot, kept on HDFS as it ends.

The master publishes the job's status (``tfyarn.status``) in skein's key-value
store, which ends with the application. So that ``tfyarn status`` can still
show afterwards what the job went through (tasks, attempts, restarts,
generations), the master writes the same JSON document to
:func:`tfyarn.contract.record.record_url` when the job reaches a terminal
phase, before it ends the application:

- under a temporary name in the same directory, made owner-only (0600, the
  directory 0700), then renamed into place: a reader finds the whole record
  or none;
- within :data:`~tfyarn.contract.record.WRITE_DEADLINE` seconds, in a daemon
  thread: a slow or failing HDFS costs a warning in the master's log, never
  the application's end.

``tfyarn kill`` stops every task and then kills the application, which gives
the master no time to write anything: :func:`keep_when_stopped` keeps the
record as soon as the stopped tasks have ended, and says so in the key-value
store (:data:`~tfyarn.contract.record.RECORD_KEY`), which the client waits for
before it kills.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import uuid
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Protocol

from am.publish import Published, status_document
from tfyarn.contract import record as contract
from tfyarn.contract.status import Phase

if TYPE_CHECKING:
    from am.launcher import Launcher


class Stopped(Published, Protocol):
    """What the stop watcher reads of the job."""

    @property
    def outcome(self) -> tuple[Phase, str] | None: ...
    @property
    def stopping_since(self) -> float | None: ...
    @property
    def stop_reason(self) -> str: ...


log = logging.getLogger(__name__)

# How often the stop watcher looks whether every stopped task has ended.
STOP_POLL = 0.5


class RecordFiles(Protocol):
    """What writing a record needs of a file system (tfyarn's HDFS client)."""

    def mkdirs(self, url: str) -> None: ...

    def set_permission(self, url: str, mode: int) -> None: ...

    def open_output(self, url: str) -> IO[bytes]: ...

    def rename(self, src: str, dst: str, *, overwrite: bool = False) -> None: ...

    def delete(self, url: str, *, recursive: bool = False) -> None: ...


def write_record(files: RecordFiles, url: str, data: bytes) -> None:
    """Write ``data`` to ``url`` whole or not at all, readable by its owner only.

    Blocks on HDFS: run it through :class:`JobRecord`, which bounds it.
    """
    directory, _, name = url.rpartition("/")
    files.mkdirs(directory)
    # mkdirs makes world-readable directories; the records are the owner's.
    files.set_permission(directory, contract.DIR_MODE)
    # A leading "._tmp." keeps it apart from the records ("<app_id>.json").
    temporary = f"{directory}/._tmp.{name}.{uuid.uuid4().hex[:12]}"
    try:
        with files.open_output(temporary) as out:
            out.write(data)
        # Before the rename: the record is never visible with wider permissions.
        files.set_permission(temporary, contract.FILE_MODE)
        files.rename(temporary, url, overwrite=True)
    except BaseException:
        with contextlib.suppress(Exception):  # the original error matters more
            files.delete(temporary)
        raise


class JobRecord:
    """Keeps one job's final record at ``url``, bounded by ``deadline`` seconds.

    ``files`` gives the file system of a URL (``fs.resolve`` on the master).
    The first record kept stays: the stop path's and the end's are the same
    job's last word.
    """

    def __init__(
        self,
        url: str,
        files: Callable[[str], RecordFiles],
        *,
        deadline: float = contract.WRITE_DEADLINE,
    ) -> None:
        self.url = url
        self.deadline = deadline
        self.kept = False
        self._files = files
        self._lock = asyncio.Lock()  # one writer at a time; the second finds it kept

    async def keep(self, status: str) -> bool:
        """Write ``status`` (the snapshot's JSON) once; whether the record is kept."""
        async with self._lock:
            if self.kept:
                return True
            data = status.encode()
            try:
                await asyncio.wait_for(
                    _in_daemon_thread(
                        lambda: write_record(self._files(self.url), self.url, data)
                    ),
                    self.deadline,
                )
            except asyncio.TimeoutError:
                log.warning(
                    "the job's final record was not written to %s within %g s "
                    "(HDFS slow or unreachable); the job ends without it and "
                    "`tfyarn status` will say it has no record",
                    self.url,
                    self.deadline,
                )
                return False
            except Exception as exc:  # noqa: BLE001 -- the job still ends
                log.warning(
                    "could not write the job's final record to %s: %s; the job "
                    "ends without it and `tfyarn status` will say it has no record",
                    self.url,
                    exc,
                )
                return False
            self.kept = True
            log.info("kept the job's final record at %s", self.url)
            return True


def _in_daemon_thread(work: Callable[[], None]) -> asyncio.Future[None]:
    """Run ``work`` in a daemon thread; a future of its end.

    Not the loop's executor: a write stuck on HDFS past the deadline would
    hold up the interpreter's exit there, and with it the container's end.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()

    def settle(error: BaseException | None) -> None:
        if done.done():  # the deadline passed: nobody waits any more
            return
        if error is None:
            done.set_result(None)
        else:
            done.set_exception(error)

    def run() -> None:
        error: BaseException | None = None
        try:
            work()
        except Exception as exc:  # noqa: BLE001 -- handed to the waiter
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            loop.call_soon_threadsafe(settle, error)

    threading.Thread(target=run, name="tfyarn-record", daemon=True).start()
    return done


async def keep_final(launcher: Launcher, status: str) -> None:
    """Keep ``status`` as the job's record and tell the key-value store how it went."""
    if not status or not launcher.keeps_records:
        return
    kept = await launcher.keep_record(status)
    await _announce(launcher, contract.WRITTEN if kept else contract.FAILED)


async def keep_when_stopped(state: Stopped, *, poll: float = STOP_POLL) -> None:
    """Keep the record of a job ``tfyarn kill`` stopped, once its tasks ended.

    Runs beside the reconcile loop; returns when the record is kept or the
    job's outcome is decided another way (the master's end keeps it then).
    """
    launcher = state.launcher
    if not launcher.keeps_records:
        return
    await _announce(launcher, contract.PENDING)
    while state.outcome is None:
        stopped = state.stopping_since is not None
        if stopped and all(t.state.is_terminal() for t in state.tasks.values()):
            await keep_final(launcher, stopped_status(state))
            return
        await asyncio.sleep(poll)


def stopped_status(state: Stopped) -> str:
    """The record of a stopped job: the snapshot with the phase it ends in.

    The master's own phase is still STOPPING: YARN's kill follows, and the
    master may not outlive it long enough to move on.
    """
    doc, _ = status_document(state)
    doc["phase"] = Phase.KILLED.value
    doc["diagnostics"] = state.stop_reason
    return json.dumps(doc)


async def _announce(launcher: Launcher, value: str) -> None:
    try:
        await launcher.publish(contract.RECORD_KEY, value)
    except Exception as exc:  # noqa: BLE001 -- then `tfyarn kill` waits its bound
        log.warning("could not publish %s=%s: %s", contract.RECORD_KEY, value, exc)
