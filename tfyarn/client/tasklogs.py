"""A job's logs per task: ``yarn logs -applicationId`` run and split.

``yarn logs`` prints, for each container, blocks like::

    Container: container_1700000000000_0001_01_000002 on host_45454
    LogAggregationType: AGGREGATED
    ===========================================
    LogType:worker.log
    LogLastModifiedTime:...
    LogLength:1234
    LogContents:
    ...
    End of LogType:worker.log

skein writes each service container's output to ``<service>.log`` and the
master's to ``application.master.log``. A container is mapped to its task by
the master's published status (``yarn_container_id``) when it is available, else by the
``worker:1 attempt 0 holds host:port`` line the runtime logs first.
"""

from __future__ import annotations

import contextlib
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tfyarn.client import nodelogs
from tfyarn.client.cell_views import TaskLogs
from tfyarn.client.connection import (
    NO_CLUSTER,
    check_app_id,
    java_environ,
    opened,
    use_cluster,
)
from tfyarn.client.jobs import status
from tfyarn.client.nmweb import NodeLogsError
from tfyarn.contract.status import JobStatus as MasterStatus
from tfyarn.errors import ClusterError, TfyarnError
from tfyarn.spec import ROLES, Role

_CONTAINER = re.compile(r"^Container: (container_\S+) on (\S+)\s*$")
_LOGTYPE = re.compile(r"^LogType:\s*(.+?)\s*$")
# A running container's files end "End of LogType:worker.log.This log file belongs
# to a running container (...) and so may not be complete."
_END = "End of LogType:"
_ROLES = "|".join(r.value for r in Role)
# The runtime's first line names its task: "... worker:1 attempt 0 holds host:port".
_SELF = re.compile(rf"\b({_ROLES}):(\d+) attempt (\d+) holds\b")
ROLE_NAMES = frozenset(r.value for r in Role)
_GRANTED = re.compile(r"\bgot (container_\w+) on\b")
MASTER = "master"


@dataclass(frozen=True)
class TaskLog:
    """One log file of one container.

    ``task`` is ``worker:1``, ``ps:0``, ``master``, or, when the index is
    unknown, the service name.
    """

    task: str
    container_id: str
    host: str
    log_type: str
    text: str
    attempt: int | None = None

    @property
    def label(self) -> str:
        att = f" attempt {self.attempt}" if self.attempt else ""
        return f"{self.task}{att} [{self.container_id} on {self.host}, {self.log_type}]"


# Files YARN writes into every container's log directory; shown on request only.
YARN_FILES = ("directory.info", "launch_container.sh", "prelaunch.err", "prelaunch.out")


def logs(
    app_id: str,
    *,
    task: str | None = None,
    client: Any | None = None,
    timeout: float = 120.0,
    yarn_files: bool = False,
) -> list[TaskLog]:
    """Every container's logs, labelled by task, via ``yarn logs``.

    Works for running jobs (from the NodeManagers) and ended ones (aggregated
    on HDFS; aggregation may take a few seconds after the job ends). On a
    cluster without log aggregation, where ``yarn logs`` finds nothing, the
    NodeManagers' web services serve the files they still keep.

    Parameters
    ----------
    task
        Only this task, e.g. ``"worker:1"``, ``"ps"`` (every ps) or ``"master"``.
    client
        An open :func:`connect` client: with one, a running job's containers
        are named by the master's status (else by the runtime's first line).
    timeout
        Seconds to let ``yarn logs`` run.
    yarn_files
        Also YARN's own files of each container (``launch_container.sh``,
        ``prelaunch.err``, ...).

    Returns
    -------
    list of TaskLog
        One entry per container and log file, master first (a list that a
        notebook cell shows task by task).

    Raises
    ------
    TfyarnError
        ``yarn logs`` failed or found nothing; or no cluster.

    Examples
    --------
    >>> for log in tfyarn.logs(app_id, task="worker:0"):  # doctest: +SKIP
    ...     print(log.label, log.text[-200:])
    """
    app_id = check_app_id(app_id)
    master = None
    if client is None:
        use_cluster()
    else:
        with contextlib.suppress(TfyarnError):
            master = status(app_id, client=client).master
    try:
        text = yarn_logs(app_id, timeout)
    except YarnLogsError as exc:
        # yarn's words for an unknown id ("Can not find the appOwner") differ
        # from status's and kill's: ask YARN itself, which raises the same
        # "no application ... on this cluster" they do.
        status(app_id, client=client)
        # A known job: without log aggregation (turned off on a secure cluster
        # without libhadoop.so, where it crashes the NodeManager) its logs are
        # still on the NodeManagers.
        text = _from_nodes(app_id, client, exc)
    entries = split(text, master, yarn_files=yarn_files)
    if not entries:
        raise TfyarnError(
            f"`yarn logs -applicationId {app_id}` returned no container logs "
            "(log aggregation can take a few seconds after the job ends; try again)"
        )
    if task:
        chosen = select(entries, task)
        if not chosen:
            labels = sorted({e.task for e in entries})
            raise TfyarnError(f"no logs for task {task!r}; tasks with logs: {labels}")
        return TaskLogs(chosen)
    return TaskLogs(entries)


def _from_nodes(app_id: str, client: Any | None, failed: YarnLogsError) -> str:
    """The NodeManagers' copy of the logs; ``failed`` re-raised if they have none."""
    try:
        with opened(client) as yarn:
            text = nodelogs.yarn_logs_text(app_id, yarn)
    except NodeLogsError as exc:
        raise YarnLogsError(
            f"{failed}\nReading the NodeManagers' copy instead failed too: {exc}"
        ) from None
    if "Container:" not in text:
        raise YarnLogsError(
            f"{failed}\nNo NodeManager holds logs of {app_id} either (log "
            "aggregation off and the nodes deleted them, see "
            "yarn.nodemanager.log.retain-seconds, or the job never started a container)"
        )
    return text


class YarnLogsError(TfyarnError):
    """``yarn logs`` ended with an error and printed no container logs."""


def yarn_logs(app_id: str, timeout: float) -> str:
    """The output of ``yarn logs -applicationId APP_ID``.

    Raises
    ------
    YarnLogsError
        It failed and printed no logs (its last lines are in the message).
    """
    try:
        done = subprocess.run(
            ["yarn", "logs", "-applicationId", app_id],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=java_environ(),  # bounded retries of an unreachable RM
        )
    except FileNotFoundError:
        raise ClusterError(NO_CLUSTER) from None
    except subprocess.TimeoutExpired:
        raise TfyarnError(
            f"`yarn logs -applicationId {app_id}` took over {timeout:.0f} s"
        ) from None
    if done.returncode != 0 and "Container:" not in done.stdout:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise YarnLogsError(
            f"`yarn logs -applicationId {app_id}` failed (exit code "
            f"{done.returncode}):\n{tail}"
        )
    return done.stdout


def split(
    output: str,
    master: MasterStatus | None = None,
    *,
    yarn_files: bool = False,
) -> list[TaskLog]:
    """Parse ``yarn logs`` output into :class:`TaskLog` entries, master first.

    ``yarn_files`` keeps YARN's own per-container files (``launch_container.sh``,
    ``prelaunch.err``, ...); empty logs are always dropped.
    """
    blocks = _blocks(output)
    known = _containers_of(master)
    tasks: dict[str, tuple[str, int | None]] = {}
    for container, _, log_type, text in blocks:
        service = log_type[: -len(".log")] if log_type.endswith(".log") else None
        m = _SELF.search(text) if service in ROLE_NAMES else None
        if service in (
            "application.master",
            "application.driver",
        ) or container.endswith("_000001"):
            tasks[container] = (MASTER, None)
        elif m and m.group(1) == service:
            # The runtime's own first line: what the container ran, for sure.
            tasks[container] = (f"{m.group(1)}:{m.group(2)}", int(m.group(3)))
        elif container in known:
            tasks.setdefault(container, (known[container], None))
        elif service in ROLE_NAMES:
            tasks.setdefault(container, (service, None))
    entries = []
    for container, host, log_type, text in blocks:
        if not text.strip() or (log_type in YARN_FILES and not yarn_files):
            continue
        task, attempt = tasks.get(container, (log_type, None))
        entries.append(TaskLog(task, container, host, log_type, text, attempt))
    return sorted(entries, key=_sort_key)


def _blocks(output: str) -> list[tuple[str, str, str, str]]:
    """(container, host, log type, text) for each log file in the output."""
    blocks = []
    container = host = log_type = None
    body: list[str] = []
    in_contents = False
    for line in output.splitlines():
        if not in_contents:
            m = _CONTAINER.match(line)
            if m:
                container, host = m.group(1), m.group(2)
                continue
            m = _LOGTYPE.match(line)
            if m:
                log_type = m.group(1)
                continue
            if line.startswith("LogContents:") and container and log_type:
                in_contents, body = True, []
            continue
        end = line[len(_END) :].strip() if line.startswith(_END) else None
        if end is not None and log_type and end.startswith(log_type):
            assert container is not None and host is not None
            blocks.append((container, host, log_type, "\n".join(body)))
            in_contents = False
            log_type = None
            continue
        body.append(line)
    if in_contents and container and host and log_type:  # truncated output
        blocks.append((container, host, log_type, "\n".join(body)))
    return blocks


def select(entries: Sequence[TaskLog], task: str) -> list[TaskLog]:
    """Entries of one task (``worker:1``), one role (``ps``) or ``master``."""
    task = task.strip()
    if ":" in task:
        return [e for e in entries if e.task == task]
    return [e for e in entries if e.task.split(":")[0] == task]


def render(entries: Sequence[TaskLog]) -> str:
    """Entries as text, each under a ``==> label <==`` header."""
    return "\n".join(f"==> {e.label} <==\n{e.text.rstrip()}\n" for e in entries)


def _containers_of(master: MasterStatus | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for t in master.tasks if master else []:
        if t.yarn_container_id:
            out[t.yarn_container_id] = t.task
        # Earlier attempts' containers appear in the history as "ALLOCATED: got
        # container_... on node" lines. Other ids there name other tasks (a
        # restart's reason: "worker:1 (attempt 0, container_...) sent no
        # heartbeat"), not this one's.
        for h in t.history:
            for found in _GRANTED.findall(h):
                out.setdefault(found, t.task)
    return out


def _sort_key(e: TaskLog) -> tuple[int, str, int, str, str]:
    role, _, index = e.task.partition(":")
    order = [MASTER, *(r.value for r in ROLES)]
    rank = order.index(role) if role in order else len(order)
    # Within a container: its own log first, YARN's files after.
    own = "1" if e.log_type in YARN_FILES else "0"
    return rank, role, int(index) if index.isdigit() else -1, e.container_id, own
