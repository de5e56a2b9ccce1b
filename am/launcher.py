"""Container operations the master needs, behind one small interface.

``SkeinLauncher`` drives YARN through skein's application client; its calls
block on a round trip to skein's Java AM, so each runs in a worker thread and
the asyncio loop (which serves every task's gRPC call) never waits on YARN.
``FakeLauncher`` keeps containers in memory for unit tests.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar

from tfyarn.contract import env as _env

if TYPE_CHECKING:
    from am.record import JobRecord

log = logging.getLogger(__name__)
T = TypeVar("T")

# skein's container states (skein.model.ContainerState).
PENDING_STATES = frozenset({"WAITING", "REQUESTED"})
ENDED_STATES = frozenset({"SUCCEEDED", "FAILED", "KILLED"})
ALL_STATES = ("WAITING", "REQUESTED", "RUNNING", "SUCCEEDED", "FAILED", "KILLED")


@dataclass(frozen=True)
class ContainerInfo:
    """What YARN (through skein) says about one container."""

    id: str  # skein's id: "<service>_<instance>", e.g. "worker_3"
    state: str  # one of ALL_STATES
    yarn_container_id: str = ""
    node: str = ""  # the NodeManager's http address
    exit_message: str = ""

    @property
    def ended(self) -> bool:
        return self.state in ENDED_STATES


class Launcher:
    """The master's view of YARN. Every method is a coroutine and never blocks."""

    app_id: str = ""

    async def start(self, role: str, env: Mapping[str, str]) -> ContainerInfo:
        """Ask for one container of the service named ``role``."""
        raise NotImplementedError

    async def declared(self, role: str, index: int) -> ContainerInfo:
        """The container the application spec itself requested for a task.

        skein asks YARN for the services' instances with its first heartbeat
        (and again in every master attempt, numbered from 0 again): no call
        is needed, only the id, which :mod:`tfyarn.contract.env` defines.
        """
        return ContainerInfo(
            id=_env.declared_container_id(role, index), state="REQUESTED"
        )

    async def kill(self, container_id: str) -> None:
        raise NotImplementedError

    async def poll(self) -> dict[str, ContainerInfo]:
        """Every container of the application so far, by skein id."""
        raise NotImplementedError

    async def publish(self, key: str, value: str) -> None:
        """Store ``value`` in the application's key-value store."""
        raise NotImplementedError

    async def set_progress(self, progress: float) -> None:
        raise NotImplementedError

    async def add_page(self, route: str, target: str, link_name: str) -> None:
        raise NotImplementedError

    async def shutdown(self, status: str, diagnostics: str) -> None:
        """End the application with a final status (SUCCEEDED, FAILED, KILLED)."""
        raise NotImplementedError

    async def previous_final(self) -> tuple[str, str] | None:
        """The outcome an earlier master attempt of this application decided, if any."""
        return None

    async def container_account(self, info: ContainerInfo) -> str:
        """YARN's own words on an ended container skein summarized ("" if none)."""
        return ""

    async def save_restarts(self, record: dict[str, Any]) -> None:
        """Keep the job's restart record where a later master attempt finds it."""

    async def previous_restarts(self) -> dict[str, Any] | None:
        """The restart record an earlier master attempt left, if any."""
        return None

    @property
    def keeps_records(self) -> bool:
        """Whether :meth:`keep_record` keeps the job's final record anywhere."""
        return False

    async def keep_record(self, status: str) -> bool:
        """Keep the job's final status (JSON) where ``tfyarn status`` reads it
        after the application ended (am/record.py); whether it is kept.
        Bounded: never holds up the application's end."""
        return False


class SkeinLauncher(Launcher):
    """The real thing: skein's ``ApplicationClient`` from inside the AM container."""

    def __init__(
        self,
        app: Any,
        *,
        threads: int = 4,
        final_marker: str | None = None,
        restarts_marker: str | None = None,
        last_attempt: bool = True,
        record: JobRecord | None = None,
    ) -> None:
        self._app = app
        # Not YARN's last master attempt: skein would leave a FAILED or KILLED
        # application registered, and YARN would start the master again.
        self.last_attempt = last_attempt
        self.app_id = str(getattr(app, "id", ""))
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="skein")
        self.final_marker = final_marker
        self.restarts_marker = restarts_marker
        self.record = record

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def start(self, role: str, env: Mapping[str, str]) -> ContainerInfo:
        container = await self._run(
            lambda: self._app.add_container(role, env=dict(env))
        )
        return _info(container)

    async def kill(self, container_id: str) -> None:
        await self._run(self._app.kill_container, container_id)

    async def container_account(self, info: ContainerInfo) -> str:
        from am import nodemanager

        return await nodemanager.account(info.node, info.yarn_container_id)

    async def poll(self) -> dict[str, ContainerInfo]:
        containers = await self._run(
            lambda: self._app.get_containers(states=ALL_STATES)
        )
        return {c.id: _info(c) for c in containers}

    async def publish(self, key: str, value: str) -> None:
        await self._run(self._app.kv.__setitem__, key, value.encode())

    async def set_progress(self, progress: float) -> None:
        await self._run(self._app.set_progress, min(1.0, max(0.0, progress)))

    async def add_page(self, route: str, target: str, link_name: str) -> None:
        await self._run(lambda: self._app.ui.add_page(route, target, link_name))

    async def shutdown(self, status: str, diagnostics: str) -> None:
        if status != "SUCCEEDED" and self.final_marker:
            # skein unregisters a FAILED application only on its last attempt;
            # before that YARN starts the master again. Leave the decision
            # where the next attempt looks first (previous_final), so a failed
            # job is not run again from scratch.
            record = json.dumps({"status": status, "diagnostics": diagnostics})
            try:
                await asyncio.wait_for(
                    self._run(_write_marker, self.final_marker, record.encode()),
                    MARKER_TIMEOUT,
                )
            except Exception:  # the job still ends; a re-attempt re-runs it
                log.warning(
                    "could not record the outcome at %s",
                    self.final_marker,
                    exc_info=True,
                )
        if status != "SUCCEEDED" and not self.last_attempt:
            await self._unregister(status, diagnostics)
        await self._run(lambda: self._app.shutdown(status, diagnostics))

    async def _unregister(self, status: str, diagnostics: str) -> None:
        """End the application now (am/unregister.py); else skein's way, with
        the final marker telling the next attempt the outcome."""
        from am import unregister

        try:
            await self._run(unregister.unregister, status, diagnostics)
        except Exception as exc:
            log.warning(
                "could not unregister the application (%s); YARN will start "
                "another master attempt, which repeats this outcome",
                exc,
                exc_info=True,
            )
            return
        log.info("unregistered the application %s: no further master attempt", status)
        if self.final_marker:
            # skein deletes its application directory only on the attempt it
            # unregisters itself; this one it takes for a retry.
            app_dir = self.final_marker.rsplit("/", 1)[0]
            try:
                await asyncio.wait_for(self._run(_delete_dir, app_dir), MARKER_TIMEOUT)
            except Exception:
                log.warning("could not delete %s", app_dir, exc_info=True)

    async def previous_final(self) -> tuple[str, str] | None:
        record = await self._read_marker(self.final_marker)
        if record is None:
            return None
        return str(record["status"]), str(record["diagnostics"])

    async def save_restarts(self, record: dict[str, Any]) -> None:
        if self.restarts_marker:
            data = json.dumps(record).encode()
            await asyncio.wait_for(
                self._run(_write_marker, self.restarts_marker, data), MARKER_TIMEOUT
            )

    async def previous_restarts(self) -> dict[str, Any] | None:
        return await self._read_marker(self.restarts_marker)

    @property
    def keeps_records(self) -> bool:
        return self.record is not None

    async def keep_record(self, status: str) -> bool:
        return await self.record.keep(status) if self.record else False

    async def _read_marker(self, url: str | None) -> dict[str, Any] | None:
        """An earlier attempt's JSON marker; None if absent or unreadable.

        Unreadable is taken as absent: the job still runs (as a first attempt
        would), which beats failing it over a bookkeeping file.
        """
        if not url:
            return None
        try:
            raw = await asyncio.wait_for(self._run(_read_marker, url), MARKER_TIMEOUT)
            return None if raw is None else dict(json.loads(raw))
        except Exception:
            log.warning("could not read %s", url, exc_info=True)
            return None


# Bound on HDFS calls for the markers: never hold up the master long.
MARKER_TIMEOUT = 20.0


def marker_url(app_id: str, user: str, name: str) -> str:
    """Where a master attempt leaves what the next one must know (its final
    decision, the restarts so far): skein's application directory on HDFS,
    which lives until the application's last attempt ends."""
    return f"hdfs:///user/{user}/.skein/{app_id}/tfyarn.{name}.json"


def record_files(url: str) -> Any:
    """The file system of a record's URL: tfyarn's HDFS client, with its
    deadlines and error mapping (am/record.py writes through it)."""
    from tfyarn.data import fs

    return fs.resolve(url)


def _write_marker(url: str, data: bytes) -> None:
    from tfyarn.data import fs

    fs.resolve(url).write_atomic(url, data)


def _delete_dir(url: str) -> None:
    from tfyarn.data import fs

    fs.resolve(url).delete(url, recursive=True)


def _read_marker(url: str) -> bytes | None:
    from tfyarn.data import fs

    filesystem = fs.resolve(url)
    return filesystem.read_bytes(url) if filesystem.exists(url) else None


def _info(container: Any) -> ContainerInfo:
    return ContainerInfo(
        id=container.id,
        state=str(container.state),
        yarn_container_id=container.yarn_container_id or "",
        node=container.yarn_node_http_address or "",
        exit_message=container.exit_message or "",
    )


@dataclass
class FakeLauncher(Launcher):
    """In-memory YARN for unit tests: containers wait until a test grants them.

    Tests drive it with :meth:`grant` and :meth:`end`, and read what the master
    did from ``started``, ``killed``, ``kv``, ``progress``, ``final`` and
    ``record`` (the final record it kept). With
    ``kill_error`` set, every kill raises it (YARN refusing), and is counted
    in ``kill_attempts`` all the same. The job's initial containers (declared
    in the application spec) are in ``declared``, those asked for later in
    ``started``.
    """

    app_id: str = "application_0_0001"
    containers: dict[str, ContainerInfo] = field(default_factory=dict)
    started: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    declared_ids: list[str] = field(default_factory=list)
    killed: list[str] = field(default_factory=list)
    kv: dict[str, str] = field(default_factory=dict)
    progress: float = 0.0
    pages: dict[str, str] = field(default_factory=dict)
    final: tuple[str, str] | None = None
    restarts_record: dict[str, Any] | None = None
    record: str | None = None  # the job's final record, once kept
    kill_error: Exception | None = None
    kill_attempts: list[str] = field(default_factory=list)
    _next: dict[str, int] = field(default_factory=dict)
    _granted: int = 0

    async def start(self, role: str, env: Mapping[str, str]) -> ContainerInfo:
        instance = self._next.get(role, 0)
        self._next[role] = instance + 1
        info = ContainerInfo(id=f"{role}_{instance}", state="REQUESTED")
        self.containers[info.id] = info
        self.started.append((info.id, dict(env)))
        return info

    @property
    def launched(self) -> list[str]:
        """Every container id the job asked for, declared first, in order."""
        return self.declared_ids + [cid for cid, _ in self.started]

    async def declared(self, role: str, index: int) -> ContainerInfo:
        info = await super().declared(role, index)
        # skein numbers later containers of the service after the declared ones.
        self._next[role] = max(self._next.get(role, 0), index + 1)
        self.containers[info.id] = info
        self.declared_ids.append(info.id)
        return info

    def grant(self, container_id: str) -> None:
        """YARN allocated the container and it is running."""
        self._granted += 1
        n = self._granted
        self.containers[container_id] = replace(
            self.containers[container_id],
            state="RUNNING",
            yarn_container_id=f"container_0_0001_01_{n:06d}",
            node="node1:8042",
        )

    def end(self, container_id: str, state: str, message: str = "") -> None:
        """The container ended (SUCCEEDED, FAILED or KILLED)."""
        self.containers[container_id] = replace(
            self.containers[container_id], state=state, exit_message=message
        )

    async def kill(self, container_id: str) -> None:
        self.kill_attempts.append(container_id)
        if self.kill_error is not None:
            error = self.kill_error
            raise type(error)(*error.args)  # a fresh one each time, as from YARN
        self.killed.append(container_id)
        if container_id in self.containers:
            self.end(container_id, "KILLED", "Killed by user request.")

    async def poll(self) -> dict[str, ContainerInfo]:
        return dict(self.containers)

    async def save_restarts(self, record: dict[str, Any]) -> None:
        self.restarts_record = json.loads(json.dumps(record))  # as stored: a copy

    async def previous_restarts(self) -> dict[str, Any] | None:
        return self.restarts_record

    @property
    def keeps_records(self) -> bool:
        return True

    async def keep_record(self, status: str) -> bool:
        if self.record is None:  # the first one stays, as on HDFS
            self.record = status
        return True

    async def publish(self, key: str, value: str) -> None:
        self.kv[key] = value

    async def set_progress(self, progress: float) -> None:
        self.progress = progress

    async def add_page(self, route: str, target: str, link_name: str) -> None:
        self.pages[route] = target

    async def shutdown(self, status: str, diagnostics: str) -> None:
        self.final = (status, diagnostics)
