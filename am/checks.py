"""The reconcile loop's deciders: what YARN shows, and what did not happen in time.

Each is a function of a read-only view of the job (:class:`am.view.JobView`)
and the time; each returns decisions (:mod:`am.decisions`) for
:meth:`am.state.JobState.apply`, and changes nothing itself. The loop
(:mod:`am.reconcile`) calls them once per pass and applies what they return;
per-task checks are asked task by task, each applied before the next task is
asked, because one failure may restart the cluster and so change the others.
Tested as tables in ``tests/unit/test_am_checks.py``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from am import lease, nodemanager
from am.decisions import (
    AskAccount,
    ContainerEnded,
    ContainerSeen,
    Decision,
    Fail,
    Finish,
    InPlaceFailed,
    Mark,
    StallSeen,
    StopTask,
)
from am.launcher import PENDING_STATES, ContainerInfo
from am.model import KILL_MARGIN
from am.policy import Failure
from am.view import JobView, TaskView, key_of
from tfyarn.contract.exit_codes import (
    MEANING,
    disruption,
    exit_codes,
    explain_diagnostics,
)
from tfyarn.contract.failure import first_line
from tfyarn.contract.heartbeat import heartbeat_interval, heartbeat_timeout
from tfyarn.contract.status import Phase, TaskState
from tfyarn.spec import JobSpec, Role

log = logging.getLogger(__name__)

# A runtime reports its script's end before its container exits; when YARN says
# a container ended, wait this long for that report before calling it lost.
END_REPORT_GRACE = 3.0
# How long a lost container's verdict may wait for its NodeManager's account
# (am/nodemanager.py: two requests of at most HTTP_TIMEOUT each).
ACCOUNT_WAIT = END_REPORT_GRACE + 2 * nodemanager.HTTP_TIMEOUT
# After `tfyarn kill` stopped every task, how long the master waits for the
# client's YARN kill before ending the application KILLED itself.
STOPPED_LINGER = 30.0
# A successful job's diagnostics name its first restarts, one line each.
RESTARTS_LISTED = 5


@dataclass(frozen=True)
class Account:
    """The NodeManager's account of a container asked for (am/nodemanager.py)."""

    done: bool
    words: str = ""  # "" if it failed or said nothing


@dataclass(frozen=True)
class Held:
    """A script ended by a SIGTERM, waiting for YARN's word on its container."""

    attempt: int
    reason: str
    kind: Failure
    until: float


# -- a task's container ----------------------------------------------------------


def _restarting_in_place(task: TaskView) -> bool:
    # Unless the master killed it meanwhile (the job is ending): a killed
    # restart is over, not retried in a new container.
    return task.in_place_stop is not None and not task.state.is_terminal()


def container_seen(view: JobView, task: TaskView) -> list[Decision]:
    """The YARN id and node of the task's container, once YARN shows them.

    Applied before :func:`watch_container` asks, so that what it says of the
    task names them.
    """
    info = view.containers.get(task.container_id or "")
    if _restarting_in_place(task) or info is None or task.state.is_terminal():
        return []
    yarn_id = info.yarn_container_id if not task.yarn_container_id else ""
    if not yarn_id and not info.node:
        return []
    return [ContainerSeen(key_of(task), yarn_id or None, info.node or None)]


def watch_container(
    view: JobView, task: TaskView, now: float, account: Account | None = None
) -> list[Decision]:
    """What YARN's view of the task's container means (``account``: its
    NodeManager's, if asked for; an :class:`AskAccount` asks)."""
    info = view.containers.get(task.container_id or "")
    key = key_of(task)
    if _restarting_in_place(task):
        if info is not None and info.ended:
            return [InPlaceFailed(key, f"its container ended {info.state}", None)]
        if now > task.in_place_by:
            why = "it did not register again in time"
            return [InPlaceFailed(key, why, task.container_id)]  # killed at once
        return []
    if info is None or task.state.is_terminal():
        return []
    out: list[Decision] = []
    if task.state is TaskState.REQUESTED and info.state == "RUNNING":
        out.append(
            Mark(
                key,
                TaskState.ALLOCATED,
                f"got {info.yarn_container_id} on {info.node}",
                quiet=not view.log_each,
            )
        )
    if not info.ended:
        return out
    if task.container_ended_at is None:
        out.append(ContainerEnded(key, now))
        if task.stop_requested_at is None and info.state == "FAILED":
            out.append(AskAccount(info))
        return out
    if now - task.container_ended_at < END_REPORT_GRACE:
        return out
    # The container is gone and the runtime never said how its script ended.
    if task.stop_requested_at is not None:
        return [*out, Mark(key, TaskState.KILLED, f"container {info.state}")]
    message = info.exit_message.strip() or "no message from YARN"
    # The ResourceManager's words (skein's exit message) say it was taken
    # back; then the NodeManager's account is not waited for.
    word = disruption(info.exit_message)
    waited = now - task.container_ended_at
    if not word and account is not None and not account.done and waited < ACCOUNT_WAIT:
        return out
    words = account.words.strip() if account is not None and account.done else ""
    if words:
        message += "; the NodeManager: " + words.replace("\n", " | ")
        # Its exit status and diagnostics, not the script's stderr.
        word = word or disruption(words.split("\nstderr: ", 1)[0])
    if word:
        return [
            *out,
            Mark(key, TaskState.LOST, f"{word}: container {info.state}"),
            disrupted(view, task, word, message),
        ]
    meaning = "".join(
        f"\n{MEANING}{line}"
        for line in container_end_meaning(view.spec, task.role, message)
    )
    return [
        *out,
        Mark(key, TaskState.LOST, f"container {info.state}: {message}"),
        Fail(
            key,
            f"{task.key} ({task.where()}) was lost: its container ended "
            f"{info.state} without the task reporting an exit code "
            f"(YARN: {message}){meaning}",
            Failure.LOST,
        ),
    ]


def disrupted(view: JobView, task: TaskView, word: str, message: str) -> Fail:
    """YARN took the task's container back: not the job's fault."""
    meaning = "".join(
        f"\n{MEANING}{line}"
        for line in container_end_meaning(view.spec, task.role, message)
    )
    return Fail(
        key_of(task),
        f"{task.key} ({task.where()}) was {word}: YARN took its container "
        f"back through no fault of the job (YARN: {message}){meaning}",
        Failure.DISRUPTED,
        disruption=word,
    )


def judge_held(
    view: JobView, task: TaskView, held: Held, now: float
) -> list[Decision] | None:
    """A held script failure (am/reconcile.py's ``hold``): None while YARN's
    word on its container may still come; else what it was."""
    if task.attempt != held.attempt:  # a cluster restart brought it back already
        return []
    info: ContainerInfo | None = view.containers.get(task.container_id or "")
    ended = info is not None and info.ended
    word = disruption(info.exit_message) if info is not None and ended else ""
    if not ended and now < held.until:
        return None
    if info is not None and word:
        return [disrupted(view, task, word, info.exit_message.strip())]
    return [Fail(key_of(task), held.reason, held.kind)]


# -- what did not happen in time ---------------------------------------------------


def registration(view: JobView, now: float) -> list[Decision]:
    """Tasks not registered within ``registration_timeout``: lost, one failure."""
    timeout = view.spec.registration_timeout
    standby = view.standby
    late = [
        t
        for t in view.tasks.values()
        if t.state in (TaskState.REQUESTED, TaskState.ALLOCATED)
        and t.stop_requested_at is None
        and t not in standby  # it may wait as long as it takes
        and now - t.requested_at > timeout
    ]
    if not late:
        return []
    out: list[Decision] = [
        Mark(key_of(t), TaskState.LOST, f"not registered after {timeout:.0f} s")
        for t in late
    ]
    reasons = "; ".join(waiting_for(view, t, now) for t in late)
    if view.gang_gave_back:
        reasons += (
            f" (gang allocation gave back the cluster's containers "
            f"{view.gang_gave_back} time(s) meanwhile, waiting for resources)"
        )
    out.append(
        Fail(
            key_of(late[0]),
            f"{len(late)} task(s) did not register within the registration timeout "
            f"of {timeout:.0f} s: {reasons}",
            Failure.UNREGISTERED,
        )
    )
    return out


def waiting_for(view: JobView, task: TaskView, now: float) -> str:
    """What a task that did not register was waiting for, in words."""
    waited = now - task.requested_at
    info = view.containers.get(task.container_id or "")
    if info is None or info.state in PENDING_STATES:
        group = view.spec.group(task.role)
        gpus = f", {group.gpus} GPUs" if group.gpus else ""
        # A node whose GPU discovery fails offers no GPUs (am/gpus.py).
        trouble = view.gpu_trouble() if group.gpus else ""
        return (
            f"{task.key} waiting for a container of {group.memory_mib} MiB, "
            f"{group.vcores} vcores{gpus}; not granted after {waited:.0f} s "
            "(the cluster may not have these resources free, or at all"
            + (f"; GPUs fail on {trouble}" if trouble else "")
            + ")"
        )
    return (
        f"{task.key} got container {info.yarn_container_id} on "
        f"{info.node.split(':')[0]} but did not register after {waited:.0f} s "
        "(see that container's log: did the tfyarn runtime start?)"
    )


def silence_limit(view: JobView) -> float:
    """How long a task may go without a heartbeat (big jobs beat less often)."""
    interval = heartbeat_interval(view.spec.heartbeat_interval, len(view.tasks))
    return heartbeat_timeout(view.spec.heartbeat_timeout, interval)


def silent(view: JobView, task: TaskView, now: float, limit: float) -> list[Decision]:
    """A registered task silent for longer than ``limit``: lost, and a failure."""
    if (
        not task.state.is_registered()
        or task.stop_requested_at is not None
        or task.last_heartbeat is None
        or now - task.last_heartbeat <= limit
    ):
        return []
    silence = now - task.last_heartbeat
    return [
        Mark(key_of(task), TaskState.LOST, f"no heartbeat for {silence:.0f} s"),
        Fail(
            key_of(task),
            f"{task.key} ({task.where()}) sent no heartbeat for {silence:.0f} s "
            f"(limit {limit:.0f} s): its process is wedged or its node "
            "or network is gone",
            Failure.SILENT,
        ),
    ]


def stall(view: JobView, now: float) -> list[Decision]:
    """--stall_timeout: no task reported a new step for that long."""
    timeout = view.spec.stall_timeout
    if (
        not timeout
        or view.progress_at is None
        or view.phase is not Phase.RUNNING
        or view.draining  # saving for a stop notice, not stalled
        or now - view.progress_at <= timeout
    ):
        return []
    named = []
    for t in view.tasks.values():
        if t.state is not TaskState.RUNNING:
            continue
        if t.step is None:
            named.append(f"{t.key} never reported progress")
        else:
            idle = now - (t.last_progress or now)
            named.append(f"{t.key} at step {t.step} for {idle:.0f} s")
    idle = now - view.progress_at
    # One failure per stall. A stall is the whole job's: charged to the lead,
    # so it restarts the cluster (no single task to replace).
    return [
        StallSeen(),
        Fail(
            key_of(view.lead),
            f"the job stalled: no task reported training progress for {idle:.0f} s "
            f"(stall_timeout {timeout:.0f} s): " + "; ".join(named),
            Failure.STALL,
        ),
    ]


def lease_expiry(view: JobView, now: float) -> list[Decision]:
    """A server set whose client stopped renewing ends (am/lease.py)."""
    verdict = lease.decide(view.lease_view(now))
    if verdict.action is not lease.LeaseAction.EXPIRE:
        return []
    log.warning("%s", verdict.reason)
    return [Finish(Phase.KILLED, verdict.reason, end_app=True)]  # no client will


# -- the end ------------------------------------------------------------------------


def finishing(view: JobView, now: float) -> list[Decision]:
    """The lead succeeded: stop the rest after ``worker_grace``; SUCCEEDED once
    every task ended (or bounded, if YARN never confirms the kills)."""
    assert view.finishing_since is not None
    spec = view.spec
    elapsed = now - view.finishing_since
    out: list[Decision] = []
    if elapsed > spec.worker_grace:
        why = f"{view.lead.key} finished {spec.worker_grace:.0f} s ago (worker_grace)"
        out += [
            StopTask(key_of(t), why)
            for t in view.tasks.values()
            if not t.state.is_terminal() and t.stop_requested_at is None
        ]
    if all(t.state.is_terminal() for t in view.tasks.values()) or (
        elapsed > spec.worker_grace + spec.stop_grace + 2 * KILL_MARGIN
    ):
        out.append(Finish(Phase.SUCCEEDED, success_message(view)))
    return out


def stopping(view: JobView, now: float) -> list[Decision]:
    """After ``stop_job``: the client kills the app; if it never does, end it."""
    assert view.stopping_since is not None
    if view.draining:
        return []  # `kill --graceful`: the Stops (and this wait) come after it
    grace = max((t.stop_grace for t in view.tasks.values()), default=0.0)
    if now - view.stopping_since > grace + 2 * KILL_MARGIN + STOPPED_LINGER:
        return [Finish(Phase.KILLED, view.stop_reason, end_app=True)]
    return []


def success_message(view: JobView) -> str:
    """A successful job's diagnostics: how its tasks ended, its first restarts."""
    counts: dict[str, int] = {}
    for task in view.tasks.values():
        counts[task.state.value] = counts.get(task.state.value, 0) + 1
    summary = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
    if view.gang_gave_back:
        summary += (
            f"; gang allocation gave back its containers "
            f"{view.gang_gave_back} time(s) waiting for resources"
        )
    message = f"tfyarn: {view.lead.key} finished successfully ({summary})"
    reasons = view.restart_reasons
    if reasons:
        # The published status (with every reason) ends with the
        # application; YARN keeps these diagnostics.
        message += f"; after {len(reasons)} restart(s): " + "; ".join(
            f"{n}. {_first_line(why)}"
            for n, why in enumerate(reasons[:RESTARTS_LISTED], 1)
        )
        if len(reasons) > RESTARTS_LISTED:
            message += f" (+{len(reasons) - RESTARTS_LISTED} more)"
    return message


def container_end_meaning(spec: JobSpec, role: Role, diagnostics: str) -> list[str]:
    """What YARN's words about a container that ended unreported mean.

    A container refused by the NodeManager (Docker: untrusted image, network,
    user, image not found) never starts the runtime, so YARN's diagnostics are
    all there is; they say it in exit codes and container-executor's terms.
    """
    lines = explain_diagnostics(diagnostics)
    image = spec.docker_image_of(role)
    missing = f"{spec.docker_python}: No such file or directory" in diagnostics
    if image and (127 in exit_codes(diagnostics) or missing):
        lines.insert(
            0,
            f"{role.value} tasks run in Docker image {image} with the "
            f"interpreter {spec.docker_python} (--docker_python), which was not "
            "found: build the image with `tfyarn image build`, or give "
            "--docker_python the image's Python with tfyarn installed (or the "
            "NodeManager ignored the image: its container executor must be the "
            "LinuxContainerExecutor with the docker runtime)",
        )
    return lines


def _first_line(text: str, limit: int = 160) -> str:
    line = first_line(text)
    return line if len(line) <= limit else line[: limit - 3] + "..."
