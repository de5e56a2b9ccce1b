"""Jobs on the cluster: the status of one, the list of all, and killing one gracefully.

A job's status joins two views: YARN's application report (state, final
status, diagnostics) and the master's :class:`~tfyarn.contract.status.JobStatus`
(phase and every task), read through the contract's types: while the job runs
from the application's key-value store, after it ended from the final record
the master kept on HDFS (:mod:`tfyarn.contract.record`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from tfyarn.client.connection import (
    ACTIVE,
    DONE,
    TAG,
    app_order,
    ask,
    check_app_id,
    opened,
    yarn_errors,
)
from tfyarn.client.diagnostics import separate
from tfyarn.contract.exit_codes import MEANING, explain_diagnostics, explain_exit
from tfyarn.contract.record import PENDING, RECORD_KEY, WRITE_DEADLINE, record_url
from tfyarn.contract.status import MASTER_KEY, STATUS_KEY, SUMMARY_KEY, JobSummary
from tfyarn.contract.status import JobStatus as MasterStatus
from tfyarn.errors import TfyarnError

# How long `kill` waits for YARN to report the application ended.
KILL_WAIT = 30.0
# How long `kill` lets the master keep the job's record before YARN's kill:
# the master's own bound on the write, and a little for the store to say so.
RECORD_WAIT = WRITE_DEADLINE + 5.0
# skein's AM calls the master's command (``exec <python> -u -m am``) the
# "application driver"; its exit code is the command's.
_MASTER_EXIT = re.compile(r"Application driver failed with exit code (-?\d+)")
# How explanations are marked in the diagnostics.


@dataclass(frozen=True)
class JobStatus:
    """A job as YARN and the tfyarn master see it.

    Attributes
    ----------
    app_id, name, queue, user
        The YARN application.
    state
        YARN's application state (``ACCEPTED``, ``RUNNING``, ``FINISHED``, ...).
    final_status
        ``UNDEFINED`` while running, then ``SUCCEEDED``, ``FAILED`` or ``KILLED``.
    diagnostics
        YARN's diagnostics: the master's explanation once the job ended,
        followed by a ``meaning: ...`` line for each exit code or YARN message
        in it that a number alone does not explain (see :func:`explain`).
    host
        The node of the (latest) application master, as YARN reports it.
    master
        The master's status (phase, every task with its attempts, restarts,
        generation): its latest published one while the job runs, the final
        record it kept once the job ended; ``None`` before the master publishes
        one, and for an ended job without a record (``record_missing`` says why).
    record
        Where the final record ``master`` was read from (an ended job), else "".
    record_missing
        Why an ended job has no final record, in plain words; "" otherwise.
    """

    app_id: str
    name: str = ""
    queue: str = ""
    user: str = ""
    state: str = ""
    final_status: str = "UNDEFINED"
    diagnostics: str = ""
    progress: float = 0.0
    tracking_url: str = ""
    host: str = ""
    tags: frozenset[str] = frozenset()
    started: datetime | None = None
    finished: datetime | None = None
    master: MasterStatus | None = field(default=None, compare=False)
    record: str = ""
    record_missing: str = ""

    @property
    def done(self) -> bool:
        """Whether YARN considers the application over."""
        return self.state in DONE

    @property
    def succeeded(self) -> bool:
        return self.done and self.final_status == "SUCCEEDED"

    @property
    def outcome(self) -> str:
        """The final status, with KILLED also when YARN's state says so."""
        if self.state == "KILLED":
            return "KILLED"
        if self.state == "FAILED" and self.final_status in ("UNDEFINED", ""):
            return "FAILED"
        return self.final_status

    def _repr_html_(self) -> str:
        """A notebook cell's view: state, links, tasks, diagnostics."""
        from tfyarn.client.cell_views import status_html

        return status_html(self)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        from tfyarn.client.cell_views import status_text

        p.text(status_text(self))

    def to_dict(self) -> dict[str, Any]:
        """Plain values (``tfyarn status --json``)."""
        out = {k: v for k, v in self.__dict__.items() if k != "master"}
        out["tags"] = sorted(self.tags)
        out["master"] = self.master.to_dict() if self.master else None
        return out


def status(app_id: str, *, client: Any | None = None) -> JobStatus:
    """The state of one job, with the master's per-task view.

    While the job runs the view is the master's latest published status;
    after it ended, the final record the master kept on HDFS (one read).

    Raises
    ------
    SpecError
        ``app_id`` is not an application id.
    TfyarnError
        No such application, or no cluster.

    Examples
    --------
    >>> st = tfyarn.status("application_1700000000000_0001")  # doctest: +SKIP
    >>> st.state, st.final_status                             # doctest: +SKIP
    ('FINISHED', 'SUCCEEDED')
    """
    app_id = check_app_id(app_id)
    with opened(client) as yarn:
        report = ask(app_id, lambda: yarn.application_report(app_id))
        master = None
        if str(report.state) == "RUNNING":
            app = app_client(yarn, app_id)
            if app is not None:
                try:
                    master = read_master_status(app)
                finally:
                    app.close()
    if str(report.state) in DONE:
        # The key-value store ended with the application.
        final = read_record(str(report.user or ""), app_id)
        return replace(
            status_from_report(report, final.status),
            record=final.url if final.status else "",
            record_missing=final.missing,
        )
    return status_from_report(report, master)


def list_jobs(
    *, all_states: bool = False, client: Any | None = None
) -> list[JobStatus]:
    """tfyarn jobs on the cluster (those tagged ``tfyarn``), oldest first.

    YARN's view only (one call for every job): no master status, running or
    recorded; :func:`status` gives one job's.

    Parameters
    ----------
    all_states
        Include finished, failed and killed jobs, not only active ones.

    Raises
    ------
    TfyarnError
        No cluster can be reached.

    Examples
    --------
    >>> [j.app_id for j in tfyarn.list_jobs()]  # doctest: +SKIP
    ['application_1700000000000_0003']
    """
    states = (*ACTIVE, *DONE) if all_states else ACTIVE
    with opened(client) as yarn, yarn_errors():
        reports = yarn.get_applications(
            states=[s for s in states if s not in ("NEW_SAVING",)]
        )
    jobs = [status_from_report(r, None) for r in reports if TAG in set(r.tags or ())]
    return sorted(jobs, key=lambda j: app_order(j.app_id))


@dataclass(frozen=True)
class KillResult(JobStatus):
    """What :func:`kill` found and did: the status after it, and whether the
    job had already ended before (then nothing was killed)."""

    already_ended: bool = False

    def summary(self) -> str:
        """One line for a person: what happened to the job."""
        if self.already_ended:
            return (
                f"{self.app_id} had already ended ({self.state}, final status "
                f"{self.outcome}); nothing to kill"
            )
        if self.done:
            return (
                f"{self.app_id} killed: state {self.state}, final status {self.outcome}"
            )
        return (
            f"{self.app_id}: kill requested, YARN still reports {self.state} after "
            f"{KILL_WAIT:.0f} s; `tfyarn status {self.app_id}` shows when it ends"
        )


def kill(
    app_id: str, *, graceful: bool = False, client: Any | None = None
) -> KillResult:
    """Kill a job, first giving every script its grace to checkpoint.

    The master is asked to stop every task (SIGTERM, then ``stop_grace``);
    once they ended (bounded), YARN kills the application. ``graceful``:
    a stop notice comes first, and scripts that heed it
    (``tfyarn.should_stop()``, ``tfyarn.termination_config()``) save at
    their current step before any signal; a resubmission resumes there.

    Returns
    -------
    KillResult
        The status after the kill (``KILLED``), or, with ``already_ended``
        true, the final status of a job that had ended before: killing it is
        not an error (the job is not running, as asked).

    Raises
    ------
    TfyarnError
        No such application, or no cluster.

    Examples
    --------
    >>> tfyarn.kill("application_1700000000000_0001").state  # doctest: +SKIP
    'KILLED'
    """
    app_id = check_app_id(app_id)
    with opened(client) as yarn:
        report = ask(app_id, lambda: yarn.application_report(app_id))
        if str(report.state) in DONE:
            return KillResult(**_fields(report, ""), already_ended=True)
        with yarn_errors(app_id):
            _stop_tasks_gracefully(yarn, app_id, graceful=graceful)
            yarn.kill_application(app_id)
            deadline = time.monotonic() + KILL_WAIT
            while time.monotonic() < deadline:
                report = yarn.application_report(app_id)
                if str(report.state) in DONE:
                    break
                time.sleep(0.5)
        return KillResult(**_fields(report, ""))


def _stop_tasks_gracefully(yarn: Any, app_id: str, *, graceful: bool) -> None:
    """Let every script get SIGTERM and its grace (to checkpoint) before the kill.

    YARN's own kill gives a container's processes a fraction of a second.
    Best effort, bounded: the hard kill follows whatever happens here.
    """
    import skein

    from tfyarn.contract.channel import credentials_of

    try:
        app = yarn.connect(app_id, wait=False)
        credentials = credentials_of(yarn.security)
    except (skein.exceptions.SkeinError, OSError):  # not running yet, no credentials
        return
    try:
        reason = "stopped by tfyarn kill" + (" --graceful" if graceful else "")
        stop_job(app, credentials, reason, graceful=graceful)
    finally:
        app.close()


def stop_job(
    app: Any,
    credentials: tuple[bytes, bytes],
    reason: str,
    *,
    graceful: bool = False,
    bound: float = 60.0,
) -> bool:
    """Ask a job's master to stop every task with its grace; wait until they ended.

    ``app`` is the job's ``skein.ApplicationClient``; ``credentials`` its
    (certificate, key); ``graceful``: a stop notice first (see :func:`kill`).
    Best effort and bounded (``bound`` seconds beyond the grace): returns
    whether every task ended, so the caller can kill the application either way.
    """
    import skein

    from tfyarn._proto import master_pb2 as pb
    from tfyarn.contract.channel import MasterClient
    from tfyarn.errors import MasterError

    try:
        address = app.kv[MASTER_KEY].decode()
    except (skein.exceptions.SkeinError, KeyError):
        return False  # no master yet (or any more): nothing to stop
    master = MasterClient(address, credentials)
    try:
        request = pb.StopJobRequest(reason=reason, graceful=graceful)
        reply = master.stop_job(request, timeout=10)
        deadline = time.monotonic() + reply.grace_seconds + bound
        while time.monotonic() < deadline:
            try:
                if MasterStatus.from_json(app.kv[STATUS_KEY]).all_ended():
                    wait_for_record(app)
                    return True
            except (skein.exceptions.SkeinError, KeyError, ValueError):
                pass  # not published yet, or the application is going away
            time.sleep(0.5)
        return False
    except MasterError:
        return False  # the hard kill follows anyway
    finally:
        master.close()


def wait_for_record(app: Any, *, bound: float = RECORD_WAIT) -> bool:
    """Wait until the master has kept the job's record, or given up on it.

    The master keeps it once the stopped tasks ended (:data:`RECORD_KEY`
    leaves ``pending``); YARN's kill would leave it no time. Returns whether
    the wait ended in time; a master that keeps no record (the key unset)
    needs none.
    """
    import skein

    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        try:
            value = app.kv.get(RECORD_KEY)
        except (skein.exceptions.SkeinError, ConnectionError, OSError):
            return True  # the application is going away: nothing to wait for
        if not value or value.decode() != PENDING:
            return True
        time.sleep(0.2)
    return False


@dataclass(frozen=True)
class FinalRecord:
    """What :func:`read_record` found: the master's final status, or why none."""

    url: str
    status: MasterStatus | None = None
    missing: str = ""


def read_record(user: str, app_id: str) -> FinalRecord:
    """The final record the master of ``app_id`` (run by ``user``) kept on HDFS.

    Never raises for an absent or unreadable record: ``missing`` says why
    there is none, in words for the person who asked.
    """
    from tfyarn.data.fs.errors import HdfsAuthError

    if not user:
        return FinalRecord(
            "", missing="YARN names no user for the job: no record to look for"
        )
    url = record_url(user, app_id)
    try:
        raw = _record_bytes(url)
    except FileNotFoundError:
        return FinalRecord(
            url,
            missing=(
                f"no final record at {url}: the job ended before tfyarn kept "
                "records, or its master ended without writing one (killed "
                "outright by YARN, lost with its node, or HDFS failed it); the "
                f"master's log says which: tfyarn logs {app_id} --task master"
            ),
        )
    except HdfsAuthError as exc:
        return FinalRecord(url, missing=f"could not read the final record: {exc}")
    except PermissionError:
        return FinalRecord(
            url,
            missing=f"the final record at {url} is readable by its owner ({user}) only",
        )
    except (TfyarnError, OSError) as exc:
        return FinalRecord(
            url, missing=f"could not read the final record at {url}: {exc}"
        )
    try:
        return FinalRecord(url, MasterStatus.from_json(raw))
    except ValueError as exc:
        return FinalRecord(
            url, missing=f"the final record at {url} cannot be read: {exc}"
        )


def _record_bytes(url: str) -> bytes:
    """The record's bytes (through tfyarn's HDFS client, with its deadlines)."""
    from tfyarn.data import fs

    return fs.resolve(url).read_bytes(url)


def app_client(yarn: Any, app_id: str) -> Any | None:
    """The running application's skein client, or ``None`` if it does not run."""
    import skein

    try:
        return yarn.connect(app_id, wait=False)
    except skein.exceptions.SkeinError:
        return None  # ended or not up yet: the report will say which


def read_master_status(app: Any) -> MasterStatus | None:
    """The master's latest published status, or ``None`` if there is none (yet)."""
    import skein

    try:
        raw = app.kv.get(STATUS_KEY)
    except (skein.exceptions.SkeinError, ConnectionError, OSError):
        return None
    if not raw:
        return None
    try:
        return MasterStatus.from_json(raw)
    except ValueError:  # half-written or from an incompatible master
        return None


def read_summary(app: Any) -> JobSummary | None:
    """The master's small summary (:data:`SUMMARY_KEY`), or ``None``: none
    yet, or a master that publishes only the full status (read that)."""
    import skein

    try:
        raw = app.kv.get(SUMMARY_KEY)
    except (skein.exceptions.SkeinError, ConnectionError, OSError):
        return None
    if not raw:
        return None
    try:
        return JobSummary.from_json(raw)
    except ValueError:
        return None


def status_from_report(
    report: Any,
    master: MasterStatus | None,
    *,
    python: str | None = None,
    python_env: str = "",
) -> JobStatus:
    """A :class:`JobStatus` from a ``skein.ApplicationReport``.

    ``python``: the job's interpreter (``--python``), when known, to name it
    if the master's command was not found; ``python_env``: the shipped
    environment instead.
    """
    ours = master.diagnostics if master else ""
    fields = _fields(report, ours, python=python, python_env=python_env)
    return JobStatus(**fields, master=master)


def _fields(
    report: Any, ours: str, *, python: str | None = None, python_env: str = ""
) -> dict[str, Any]:
    diagnostics = separate(str(report.diagnostics or ""), ours)
    host = str(getattr(report, "host", "") or "")
    meaning = explain(diagnostics, host=host, python=python, python_env=python_env)
    if meaning:
        diagnostics = "\n".join([diagnostics.rstrip(), *meaning])
    return {
        "app_id": str(report.id),
        "name": str(report.name or ""),
        "queue": str(report.queue or ""),
        "user": str(report.user or ""),
        "state": str(report.state),
        "final_status": str(report.final_status),
        "diagnostics": diagnostics,
        "progress": float(report.progress or 0.0),
        "tracking_url": str(report.tracking_url or ""),
        "host": host,
        "tags": frozenset(report.tags or ()),
        "started": getattr(report, "start_time", None),
        "finished": getattr(report, "finish_time", None),
    }


def explain(
    diagnostics: str,
    *,
    host: str = "",
    python: str | None = None,
    python_env: str = "",
) -> list[str]:
    """``meaning: ...`` lines for what YARN's diagnostics say only as numbers.

    The master's own command failing (skein: "Application driver failed with
    exit code N") is named as such: 127 means its interpreter (``--python``)
    is not on the node, 126 that it is not executable there. Every other exit
    code or YARN message gets the words of
    :func:`tfyarn.contract.exit_codes.explain_diagnostics`.
    """
    if MEANING in diagnostics:
        return []  # already explained (a status read back)
    lines = []
    where = f" on node {host}" if host and host != "N/A" else " on its node"
    interpreter = f"{python} (--python)" if python else "given by --python"
    m = _MASTER_EXIT.search(diagnostics)
    code = int(m.group(1)) if m else None
    if code == 127 and python_env:
        lines.append(
            "the application master could not start: the Python shipped with "
            f"--python_env {python_env} cannot run{where} (a virtualenv's base "
            "interpreter missing there, or no bin/python in the archive); the "
            "master's log (tfyarn logs APP_ID --task master) names what is missing"
        )
    elif code == 127:
        lines.append(
            f"the application master could not start: the interpreter "
            f"{interpreter} was not found{where}; give --python the path of a "
            "Python with tfyarn installed on every node"
        )
    elif code == 126:
        lines.append(
            f"the application master could not start: the interpreter "
            f"{interpreter} is not executable{where}; give --python the path "
            "of a Python with tfyarn installed on every node"
        )
    elif code is not None and explain_exit(code):
        lines.append(f"the application master {explain_exit(code)}")
    rest = _MASTER_EXIT.sub("", diagnostics) if m else diagnostics
    lines += explain_diagnostics(rest)
    return [MEANING + line for line in lines]
