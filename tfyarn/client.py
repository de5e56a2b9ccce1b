"""Submit, follow, inspect, list, kill and read the logs of tfyarn jobs.

Built on skein's client, which talks to YARN through a small Java driver that
it starts on first use (a few seconds). Each function opens its own driver
unless given one with ``client=`` (see :func:`connect`), so a notebook or
scheduler that makes many calls should keep one :class:`skein.Client` open.

Which cluster: ``$HADOOP_CONF_DIR`` if set, else the local cluster started by
``tfyarn cluster start`` if it is running.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from tfyarn import _follow, _logs, config
from tfyarn.contract.status import STATUS_KEY
from tfyarn.errors import ClusterError, JobFailedError, SpecError, TfyarnError
from tfyarn.spec import JobSpec

__all__ = [
    "JobStatus",
    "check",
    "connect",
    "kill",
    "list_jobs",
    "logs",
    "status",
    "submit",
    "wait",
]

TAG = "tfyarn"
_APP_ID = re.compile(r"^application_\d+_\d+$")
_ACTIVE = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")
_DONE = ("FINISHED", "FAILED", "KILLED")
_ALL_STATES = (*_ACTIVE, *_DONE)
NO_CLUSTER = (
    "no YARN cluster: run `tfyarn cluster start` or set HADOOP_CONF_DIR "
    "(and put the `yarn` command on PATH)"
)


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
        YARN's diagnostics: the master's explanation once the job ended.
    master
        The master's latest snapshot (phase, per-task state) while the job
        runs; ``None`` before the master publishes one and after the job ends.
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
    tags: frozenset[str] = frozenset()
    started: datetime | None = None
    finished: datetime | None = None
    master: Mapping[str, Any] | None = field(default=None, compare=False)

    @property
    def done(self) -> bool:
        """Whether YARN considers the application over."""
        return self.state in _DONE

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


# -- connecting ----------------------------------------------------------------


def _use_cluster() -> None:
    """Point this process (and the skein driver it starts) at the cluster.

    ``$HADOOP_CONF_DIR`` wins (a real cluster); otherwise the local cluster of
    ``tfyarn cluster start``, if it is running, is put into ``os.environ``.

    Raises
    ------
    ClusterError
        Neither is available.
    """
    if os.environ.get("HADOOP_CONF_DIR"):
        return
    if _local_cluster_env() is None:
        raise ClusterError(NO_CLUSTER)


def _local_cluster_env() -> dict[str, str] | None:
    from tfyarn.cluster import use_local_cluster

    try:
        return use_local_cluster()
    except ClusterError:
        return None


def connect() -> Any:
    """Open a skein client (and its Java driver) to the cluster.

    Returns
    -------
    skein.Client
        Close it when done (it is a context manager).

    Raises
    ------
    TfyarnError
        No cluster can be found, or the driver could not start.

    Examples
    --------
    >>> with tfyarn.connect() as yarn:                    # doctest: +SKIP
    ...     app_id = tfyarn.submit("train.py", num_worker=2, client=yarn)
    ...     tfyarn.wait(app_id, client=yarn)
    """
    import skein

    _use_cluster()
    log_dir = Path(tempfile.gettempdir()) / f"tfyarn-{os.getuid()}"
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / "skein-driver.log"
    try:
        return skein.Client(log=str(log), log_level="warn")
    except FileNotFoundError as exc:  # `yarn` not on PATH
        raise ClusterError(f"{NO_CLUSTER} ({exc.filename or exc} not found)") from None
    except subprocess.CalledProcessError as exc:
        raise TfyarnError(
            f"`yarn classpath --glob` failed with exit code {exc.returncode}; "
            "check the Hadoop installation behind the `yarn` command"
        ) from None
    except skein.exceptions.SkeinError as exc:
        raise TfyarnError(
            f"could not start skein's YARN driver: {exc}; its log is {log}"
        ) from None


@contextlib.contextmanager
def _client(client: Any | None) -> Iterator[Any]:
    if client is not None:
        yield client
        return
    own = connect()
    try:
        yield own
    finally:
        own.close()


@contextlib.contextmanager
def _yarn_errors(app_id: str | None = None) -> Iterator[None]:
    """Turn skein/YARN errors into messages a user can act on."""
    import skein

    try:
        yield
    except TfyarnError:
        raise  # already says what to do (SpecError is also a ValueError)
    # skein maps gRPC INVALID_ARGUMENT / NOT_FOUND to ValueError / KeyError.
    except (skein.exceptions.SkeinError, ValueError, KeyError) as exc:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
        lowered = text.lower()
        if app_id and any(
            s in lowered
            for s in ("doesn't exist", "not found", "unknown applicationid")
        ):
            raise TfyarnError(
                f"no application {app_id} on this cluster; `tfyarn list --all` "
                "shows the known ones"
            ) from None
        raise TfyarnError(f"YARN refused the request: {text}") from None


def _check_app_id(app_id: str) -> str:
    app_id = app_id.strip()
    if not _APP_ID.match(app_id):
        raise SpecError(
            f"expected an application id like application_1700000000000_0001, "
            f"got {app_id!r}"
        )
    return app_id


# -- submitting -------------------------------------------------------------------


def check(
    script: str,
    *,
    args: Sequence[str] = (),
    config_file: str | os.PathLike[str] | None = None,
    client: Any | None = None,
    cluster: bool = True,
    **options: Any,
) -> JobSpec:
    """Build and validate a job without submitting it.

    Checks every option against the schema, the layout (counts, a PS job
    without workers), that the script and local files exist and, with
    ``cluster=True``, that every task fits on the largest running node.

    Parameters
    ----------
    script
        The Python program every task runs.
    args
        Its arguments (``{job_name}``-style placeholders allowed).
    config_file
        A YAML file of options; default ``~/.config/tfyarn/config.yaml``.
    client
        An open :func:`connect` client to reuse.
    cluster
        Also ask YARN for its nodes' resources.
    **options
        Any key of ``conf/tfyarn.yaml`` (``num_ps=1``, ``worker_memory="1 GiB"``).

    Returns
    -------
    JobSpec
        The validated job.

    Raises
    ------
    SpecError
        What is wrong and what would be right.
    TfyarnError
        ``cluster=True`` and no cluster can be reached.

    Examples
    --------
    >>> tfyarn.check("train.py", num_ps=1, num_worker=2, cluster=False)  # doctest: +SKIP
    JobSpec(script='train.py', ...)
    """
    cfg = config.load(config_file, options)
    spec = config.to_spec(script, tuple(args), cfg).validate()
    if cluster:
        with _client(client) as yarn:
            with _yarn_errors():
                nodes = _node_resources(yarn)
            spec.check_fits(nodes)
    return spec


def _node_resources(yarn: Any) -> dict[str, tuple[int, int, int]]:
    nodes = yarn.get_nodes(states=["RUNNING"])
    return {
        n.id: (
            int(n.total_resources.memory),
            int(n.total_resources.vcores),
            int(getattr(n.total_resources, "gpus", 0) or 0),
        )
        for n in nodes
    }


def submit(
    script: str,
    *,
    args: Sequence[str] = (),
    config_file: str | os.PathLike[str] | None = None,
    wait: bool = False,
    on_event: Callable[[str], None] | None = None,
    client: Any | None = None,
    **options: Any,
) -> str:
    """Submit a TensorFlow job to YARN.

    Validates everything :func:`check` does first; nothing is submitted when a
    check fails.

    Parameters
    ----------
    script
        The Python program every task runs (a local path).
    args
        Its arguments. Placeholders ``{job_name}``, ``{task_index}``,
        ``{ps_hosts}``, ``{worker_hosts}`` and ``{chief_host}`` are filled in
        each task.
    config_file
        A YAML file of options; default ``~/.config/tfyarn/config.yaml``.
    wait
        Follow the job to its end (see :func:`wait`) before returning.
    on_event
        With ``wait=True``: called with each progress line.
    client
        An open :func:`connect` client to reuse.
    **options
        Any key of ``conf/tfyarn.yaml``: ``num_ps``, ``num_worker``,
        ``num_chief``, ``num_evaluator``, ``<role>_memory`` / ``_vcores`` /
        ``_gpus``, ``name``, ``queue``, ``env`` (a dict), ``files``,
        ``python``, ``legacy_flags``, ``max_restarts``,
        ``registration_timeout``, ...

    Returns
    -------
    str
        The YARN application id.

    Raises
    ------
    SpecError
        An invalid option or a request no node can grant.
    TfyarnError
        No cluster, or YARN refused the application.
    JobFailedError
        With ``wait=True``: the job ended FAILED or KILLED.

    Examples
    --------
    >>> app_id = tfyarn.submit("train.py", num_ps=1, num_worker=2,   # doctest: +SKIP
    ...                        worker_memory="1 GiB", env={"EPOCHS": "3"})
    >>> tfyarn.wait(app_id).final_status                            # doctest: +SKIP
    'SUCCEEDED'
    """
    options.pop("detach", None)
    with _client(client) as yarn:
        spec = check(script, args=args, config_file=config_file, client=yarn, **options)
        app_id = _submit_spec(yarn, spec)
        if wait:
            _wait(yarn, app_id, on_event=on_event, spec=spec)
    return app_id


def _submit_spec(yarn: Any, spec: JobSpec) -> str:
    with _yarn_errors():
        return str(yarn.submit(spec.to_skein()))


# -- following --------------------------------------------------------------------


def wait(
    app_id: str,
    *,
    on_event: Callable[[str], None] | None = None,
    timeout: float | None = None,
    poll_interval: float = 1.0,
    client: Any | None = None,
) -> JobStatus:
    """Follow a job until it ends.

    Parameters
    ----------
    app_id
        The YARN application id.
    on_event
        Called with one line per change: YARN state, containers
        requested/allocated/registered per role, "cluster formed", each task's
        state, and the final status with diagnostics.
    timeout
        Give up (the job keeps running) after this many seconds.
    poll_interval
        Seconds between polls.
    client
        An open :func:`connect` client to reuse.

    Returns
    -------
    JobStatus
        The final status of a job that SUCCEEDED.

    Raises
    ------
    JobFailedError
        The job ended FAILED or KILLED; carries the diagnostics.
    TimeoutError
        ``timeout`` passed first.

    Examples
    --------
    >>> tfyarn.wait("application_1700000000000_0001", on_event=print)  # doctest: +SKIP
    """
    app_id = _check_app_id(app_id)
    with _client(client) as yarn:
        return _wait(
            yarn,
            app_id,
            on_event=on_event,
            timeout=timeout,
            poll_interval=poll_interval,
        )


def _wait(
    yarn: Any,
    app_id: str,
    *,
    on_event: Callable[[str], None] | None,
    timeout: float | None = None,
    poll_interval: float = 1.0,
    spec: JobSpec | None = None,
) -> JobStatus:
    say = on_event or (lambda line: None)
    narrator = _follow.Narrator()
    start = time.monotonic()
    # YARN may keep an app in ACCEPTED forever when no node can host its
    # master; bound that wait by the job's own registration timeout.
    accept_limit = spec.registration_timeout if spec else None
    last_state = None
    pending_since = start  # when the app last entered a not-yet-running state
    warned = False
    app_client = None
    try:
        while True:
            with _yarn_errors(app_id):
                report = yarn.application_report(app_id)
            state = str(report.state)
            if state != last_state:
                say(f"YARN: {state}")
                if last_state == "RUNNING" or last_state is None:
                    pending_since, warned = time.monotonic(), False
                if last_state == "RUNNING" and app_client is not None:
                    app_client.close()  # a new master attempt has a new address
                    app_client = None
                last_state = state
            if state in _DONE:
                st = _status_from_report(report, None)
                return _finish(st, say)
            waited = time.monotonic() - start
            if state == "RUNNING":
                if app_client is None:
                    app_client = _app_client(yarn, app_id)
                snap = _read_snapshot(app_client) if app_client else None
                if snap:
                    for line in narrator.update(snap):
                        say(line)
            else:
                pending = time.monotonic() - pending_since
                if pending > 30 and not warned:
                    warned = True
                    say(
                        f"still {state} after {pending:.0f} s: "
                        f"{(report.diagnostics or 'no diagnostics from YARN').strip()}"
                    )
                if accept_limit and pending > accept_limit:
                    diag = (
                        f"YARN did not start the application master within "
                        f"{accept_limit:.0f} s (state {state}): "
                        f"{(report.diagnostics or '').strip()}; the job was killed"
                    )
                    with _yarn_errors(app_id):
                        yarn.kill_application(app_id)
                    raise JobFailedError(app_id, "KILLED", diag)
            if timeout is not None and waited > timeout:
                raise TimeoutError(
                    f"{app_id} is still {state} after {timeout:.0f} s; it keeps "
                    f"running (`tfyarn status {app_id}`, `tfyarn kill {app_id}`)"
                )
            time.sleep(poll_interval)
    finally:
        if app_client is not None:
            app_client.close()


def _finish(st: JobStatus, say: Callable[[str], None]) -> JobStatus:
    say(f"final status: {st.outcome}")
    if st.outcome != "SUCCEEDED":
        # JobFailedError carries the diagnostics and the logs command itself;
        # the master's diagnostics may already end with that command.
        lines = st.diagnostics.strip().splitlines()
        diagnostics = "\n".join(l for l in lines if not l.startswith("All task logs: "))
        raise JobFailedError(st.app_id, st.outcome, diagnostics or "(no diagnostics)")
    if st.diagnostics.strip():
        say("diagnostics: " + st.diagnostics.strip())
    return st


def _app_client(yarn: Any, app_id: str) -> Any | None:
    import skein

    try:
        return yarn.connect(app_id, wait=False)
    except skein.exceptions.SkeinError:
        return None  # ended or not up yet: the report will say which


def _read_snapshot(app_client: Any) -> dict[str, Any] | None:
    import skein

    try:
        raw = app_client.kv.get(STATUS_KEY)
    except (skein.exceptions.SkeinError, ConnectionError, OSError):
        return None
    if not raw:
        return None
    try:
        snap = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None
    return snap if isinstance(snap, dict) else None


# -- inspecting ------------------------------------------------------------------


def status(app_id: str, *, client: Any | None = None) -> JobStatus:
    """The state of one job, with the master's per-task view while it runs.

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
    app_id = _check_app_id(app_id)
    with _client(client) as yarn:
        with _yarn_errors(app_id):
            report = yarn.application_report(app_id)
        snap = None
        if str(report.state) == "RUNNING":
            app = _app_client(yarn, app_id)
            if app is not None:
                try:
                    snap = _read_snapshot(app)
                finally:
                    app.close()
    return _status_from_report(report, snap)


def list_jobs(
    *, all_states: bool = False, client: Any | None = None
) -> list[JobStatus]:
    """tfyarn jobs on the cluster (those tagged ``tfyarn``), oldest first.

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
    states = _ALL_STATES if all_states else _ACTIVE
    with _client(client) as yarn, _yarn_errors():
        reports = yarn.get_applications(
            states=[s for s in states if s not in ("NEW_SAVING",)]
        )
    jobs = [_status_from_report(r, None) for r in reports if TAG in set(r.tags or ())]
    return sorted(jobs, key=lambda j: _app_order(j.app_id))


def kill(app_id: str, *, client: Any | None = None) -> JobStatus:
    """Kill a job; its containers are stopped by YARN.

    Returns
    -------
    JobStatus
        The status after the kill (``KILLED``, or the final status if the job
        had already ended).

    Raises
    ------
    TfyarnError
        No such application, or no cluster.

    Examples
    --------
    >>> tfyarn.kill("application_1700000000000_0001").state  # doctest: +SKIP
    'KILLED'
    """
    app_id = _check_app_id(app_id)
    with _client(client) as yarn:
        with _yarn_errors(app_id):
            report = yarn.application_report(app_id)
            if str(report.state) in _DONE:
                return _status_from_report(report, None)
            _stop_tasks_gracefully(yarn, app_id)
            yarn.kill_application(app_id)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                report = yarn.application_report(app_id)
                if str(report.state) in _DONE:
                    break
                time.sleep(0.5)
        return _status_from_report(report, None)


def _stop_tasks_gracefully(yarn: Any, app_id: str) -> None:
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
    stop_job(app, credentials, "stopped by tfyarn kill")


def stop_job(
    app: Any, credentials: tuple[bytes, bytes], reason: str, *, bound: float = 60.0
) -> bool:
    """Ask a job's master to stop every task with its grace; wait until they ended.

    ``app`` is the job's ``skein.ApplicationClient``; ``credentials`` its
    (certificate, key). Best effort and bounded (``bound`` seconds beyond the
    grace): returns whether every task ended, so the caller can kill the
    application either way.
    """
    import skein

    from tfyarn._proto import master_pb2 as pb
    from tfyarn.contract.channel import MasterClient
    from tfyarn.contract.status import MASTER_KEY, STATUS_KEY, JobStatus
    from tfyarn.errors import MasterError

    try:
        address = app.kv[MASTER_KEY].decode()
    except (skein.exceptions.SkeinError, KeyError):
        return False  # no master yet (or any more): nothing to stop
    master = MasterClient(address, credentials)
    try:
        reply = master.stop_job(pb.StopJobRequest(reason=reason), timeout=10)
        deadline = time.monotonic() + reply.grace_seconds + bound
        while time.monotonic() < deadline:
            try:
                if JobStatus.from_json(app.kv[STATUS_KEY]).all_ended():
                    return True
            except (skein.exceptions.SkeinError, KeyError, ValueError):
                pass  # not published yet, or the application is going away
            time.sleep(0.5)
        return False
    except MasterError:
        return False  # the hard kill follows anyway
    finally:
        master.close()


def logs(
    app_id: str,
    *,
    task: str | None = None,
    client: Any | None = None,
    timeout: float = 120.0,
    yarn_files: bool = False,
) -> list[_logs.TaskLog]:
    """Every container's logs, labelled by task, via ``yarn logs``.

    Works for running jobs (from the NodeManagers) and ended ones (aggregated
    on HDFS; aggregation may take a few seconds after the job ends).

    Parameters
    ----------
    task
        Only this task, e.g. ``"worker:1"``, ``"ps"`` (every ps) or ``"master"``.
    timeout
        Seconds to let ``yarn logs`` run.
    yarn_files
        Also YARN's own files of each container (``launch_container.sh``,
        ``prelaunch.err``, ...).

    Returns
    -------
    list of TaskLog
        One entry per container and log file, master first.

    Raises
    ------
    TfyarnError
        ``yarn logs`` failed or found nothing; or no cluster.

    Examples
    --------
    >>> for log in tfyarn.logs(app_id, task="worker:0"):  # doctest: +SKIP
    ...     print(log.label, log.text[-200:])
    """
    app_id = _check_app_id(app_id)
    if client is None:
        _use_cluster()
    snap = None
    if client is not None:
        with contextlib.suppress(TfyarnError):
            snap = status(app_id, client=client).master
    text = _yarn_logs(app_id, timeout)
    entries = _logs.split(text, snap, yarn_files=yarn_files)
    if not entries:
        raise TfyarnError(
            f"`yarn logs -applicationId {app_id}` returned no container logs "
            "(log aggregation can take a few seconds after the job ends; try again)"
        )
    if task:
        chosen = _logs.select(entries, task)
        if not chosen:
            labels = sorted({e.task for e in entries})
            raise TfyarnError(f"no logs for task {task!r}; tasks with logs: {labels}")
        return chosen
    return entries


def _yarn_logs(app_id: str, timeout: float) -> str:
    try:
        done = subprocess.run(
            ["yarn", "logs", "-applicationId", app_id],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        raise ClusterError(NO_CLUSTER) from None
    except subprocess.TimeoutExpired:
        raise TfyarnError(
            f"`yarn logs -applicationId {app_id}` took over {timeout:.0f} s"
        ) from None
    if done.returncode != 0 and "Container:" not in done.stdout:
        tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
        raise TfyarnError(
            f"`yarn logs -applicationId {app_id}` failed (exit code "
            f"{done.returncode}):\n{tail}"
        )
    return done.stdout


# -- helpers --------------------------------------------------------------------


def _status_from_report(report: Any, snap: Mapping[str, Any] | None) -> JobStatus:
    return JobStatus(
        app_id=str(report.id),
        name=str(report.name or ""),
        queue=str(report.queue or ""),
        user=str(report.user or ""),
        state=str(report.state),
        final_status=str(report.final_status),
        diagnostics=str(report.diagnostics or ""),
        progress=float(report.progress or 0.0),
        tracking_url=str(report.tracking_url or ""),
        tags=frozenset(report.tags or ()),
        started=getattr(report, "start_time", None),
        finished=getattr(report, "finish_time", None),
        master=snap,
    )


def _app_order(app_id: str) -> tuple[int, int]:
    _, ts, seq = app_id.split("_")
    return int(ts), int(seq)
