"""Following a job to its end: poll YARN and the master, narrate each change."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tfyarn.client import config
from tfyarn.client.connection import DONE, ask, check_app_id, opened, yarn_errors
from tfyarn.client.jobs import (
    JobStatus,
    app_client,
    read_master_status,
    read_record,
    read_summary,
    status_from_report,
)
from tfyarn.client.narrator import Narrator
from tfyarn.client.progressview import Progress, lead_progress
from tfyarn.contract.status import JobStatus as MasterStatus
from tfyarn.contract.status import JobSummary
from tfyarn.errors import JobFailedError
from tfyarn.spec import JobSpec

# After this long in a state before RUNNING, say once what YARN says about it.
PENDING_WARNING = 30.0
# Jobs with more tasks read the master's summary at each poll, the snapshot
# (~450 bytes a task) only when the summary says it changed.
SUMMARY_ABOVE = 100


def wait(
    app_id: str,
    *,
    on_event: Callable[[str], None] | None = None,
    timeout: float | None = None,
    poll_interval: float | None = None,
    client: Any | None = None,
    on_progress: Callable[[Progress], None] | None = None,
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
        Seconds between polls; default the config's ``poll_interval``
        (``conf/tfyarn.yaml``, then ``~/.config/tfyarn/config.yaml``).
    client
        An open :func:`connect` client to reuse.
    on_progress
        Called at each poll with the lead task's :class:`Progress` (step,
        ``total_steps`` if the script reports it) once it reports steps.

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
    from tfyarn.client import notebook_view

    app_id = check_app_id(app_id)
    if poll_interval is None:
        poll_interval = config.client_options(config.load()).poll_interval
    # Inside Jupyter (and no on_event): the live view in the cell.
    view = notebook_view.for_follow(on_event, live=False)
    view.submitted(app_id)

    def progress(p: Progress) -> None:
        view.progress(p)
        if on_progress is not None:
            on_progress(p)

    with opened(client) as yarn:
        try:
            status = follow(
                yarn,
                app_id,
                on_event=view.event,
                timeout=timeout,
                poll_interval=poll_interval,
                on_progress=progress,
                on_status=view.status,
                on_link=view.tracking,
            )
        except JobFailedError as failed:
            view.finished(failed.final_status, failed.diagnostics)
            raise
        finally:
            view.close()
    view.finished(status.outcome, status.diagnostics)
    return status


def follow(
    yarn: Any,
    app_id: str,
    *,
    on_event: Callable[[str], None] | None,
    poll_interval: float,
    timeout: float | None = None,
    spec: JobSpec | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    on_status: Callable[[MasterStatus], None] | None = None,
    on_link: Callable[[str], None] | None = None,
) -> JobStatus:
    """:func:`wait` on an open client; with ``spec``, bound the wait for YARN to start it.

    ``on_progress`` gets the lead task's progress at each poll once it reports
    steps; ``on_status`` every snapshot read (a notebook's per-task view,
    an MLflow run's metrics), ``on_link`` the tracking page's URL once YARN
    gives one. A job above :data:`SUMMARY_ABOVE` tasks whose master publishes a
    summary (``tfyarn.summary``) is read in full only when the summary says
    something a narrator would tell changed.
    """
    say = on_event or (lambda line: None)
    seen = ""  # digest of the last snapshot narrated
    big = False  # read the summary first (a job above SUMMARY_ABOVE tasks)
    narrator = Narrator()
    start = time.monotonic()
    # YARN may keep an app in ACCEPTED forever when no node can host its
    # master; bound that wait by the job's own registration timeout.
    accept_limit = spec.registration_timeout if spec else None
    last_state = None
    pending_since = start  # when the app last entered a not-yet-running state
    warned = False
    app = None
    link = ""  # the tracking page's URL told to on_link
    try:
        while True:
            report = ask(app_id, lambda: yarn.application_report(app_id))
            state = str(report.state)
            if state != last_state:
                say(f"YARN: {state}")
                if last_state == "RUNNING" or last_state is None:
                    pending_since, warned = time.monotonic(), False
                if last_state == "RUNNING" and app is not None:
                    app.close()  # a new master attempt has a new address
                    app = None
                last_state = state
            if state in DONE:
                python = spec.python if spec else None
                shipped = spec.python_env if spec else ""
                status = status_from_report(
                    report, None, python=python, python_env=shipped
                )
                if on_status is not None:
                    # The tasks' last states and steps, which the last poll
                    # may have missed: the master's final record.
                    final = read_record(status.user, app_id).status
                    if final is not None:
                        on_status(final)
                        progress = lead_progress(final)
                        if progress is not None and on_progress is not None:
                            on_progress(progress)
                return finish(status, say)
            waited = time.monotonic() - start
            url = str(getattr(report, "tracking_url", "") or "")
            if on_link is not None and state == "RUNNING" and url and url != link:
                link = url
                on_link(url)
            if state == "RUNNING":
                if app is None:
                    app = app_client(yarn, app_id)
                # A small job's snapshot is small: one read per poll beats two.
                summary = read_summary(app) if app and big else None
                progress = None
                if summary is not None and summary.digest == seen:
                    progress = lead_progress(summary)
                else:
                    master = read_master_status(app) if app else None
                    if master:
                        if on_status is not None:
                            on_status(master)
                        for line in narrator.update(master):
                            say(line)
                        # Ours, not the summary's: the summary may be newer
                        # than the snapshot read (two keys, two writes).
                        seen = JobSummary.of(master.to_dict()).digest
                        big = len(master.tasks) > SUMMARY_ABOVE
                        progress = lead_progress(master)
                if progress is not None and on_progress is not None:
                    on_progress(progress)
            else:
                pending = time.monotonic() - pending_since
                if pending > PENDING_WARNING and not warned:
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
                    with yarn_errors(app_id):
                        yarn.kill_application(app_id)
                    raise JobFailedError(app_id, "KILLED", diag)
            if timeout is not None and waited > timeout:
                raise TimeoutError(
                    f"{app_id} is still {state} after {timeout:.0f} s; it keeps "
                    f"running (`tfyarn status {app_id}`, `tfyarn kill {app_id}`)"
                )
            time.sleep(poll_interval)
    finally:
        if app is not None:
            app.close()


def finish(st: JobStatus, say: Callable[[str], None]) -> JobStatus:
    """Say the final status; raise :class:`JobFailedError` unless it SUCCEEDED."""
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
