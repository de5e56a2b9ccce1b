"""Entry point of the application master: ``python -u -m am`` in the AM container.

skein starts this next to its Java AM (the Master's script) with the job in
``TFYARN_JOB``. Steps: serve the gRPC contract with mutual TLS, publish the
address in the kv store (``tfyarn.master``), take the declared containers (the
job's initial tasks; later ones it adds itself), reconcile until
the job ends, then end the application with its final status.

Its first step, before any other import, is am/dependencies.py: an interpreter
without tfyarn's dependencies ends the application with a diagnostic naming
them. Python compiles this whole file before that check runs, so the file
keeps to syntax Python 3.6 compiles and has no ``from __future__ import
annotations`` (a syntax error before Python 3.7): a node's old python3 gets
the diagnostic, not a SyntaxError.
"""

from am.dependencies import require

if __name__ == "__main__":
    require()

import asyncio
import gc
import getpass
import logging
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from typing import Any

from grpc_health.v1 import health
from prometheus_client import CONTENT_TYPE_LATEST

from am.decisions import ServingAt
from am.launcher import Launcher
from am.metrics import JobMetrics, PublishedSnapshot
from am.record import keep_when_stopped
from am.servicer import create_server, mark_serving
from am.state import JobState
from am.tensorboard import TensorBoard
from am.tokens import keeper_for
from tfyarn.contract import env as _env
from tfyarn.contract import jvm
from tfyarn.contract.channel import find_credentials
from tfyarn.contract.skein_import import import_skein
from tfyarn.contract.status import MASTER_KEY
from tfyarn.spec import JobSpec

log = logging.getLogger("am")


async def serve(
    spec: JobSpec,
    launcher: Launcher,
    *,
    host: str,
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Run the master for one job; return the process exit code.

    ``clock`` times the job's timeouts (tests run it faster).
    """
    cert, key = find_credentials()
    state = JobState(spec, launcher, clock=clock)
    log.info(
        "restart policy %s, max_restarts=%d, retry_exit_codes=%s",
        spec.restart_policy.value,
        spec.max_restarts,
        list(spec.retry_exit_codes),
    )
    attempt = am_attempt(os.environ.get("CONTAINER_ID", ""))
    previous = await launcher.previous_final() if attempt > 1 else None
    if previous is not None:
        # An earlier attempt already ended the job (skein re-attempts even a
        # FAILED application): repeat its outcome, run nothing.
        status, diagnostics = previous
        log.info("attempt %d: the job already ended %s", attempt, status)
        await launcher.shutdown(status, diagnostics)
        return 1
    if attempt > 1:
        # YARN restarted the application master (max_am_attempts): the old
        # attempt's containers are gone and every task starts again; scripts
        # see TFYARN_RESTART > 0 and resume from their checkpoint. Restarts
        # charged before still count against max_restarts.
        state.resume_after_master_loss(attempt, await launcher.previous_restarts())
    # HDFS delegation tokens: refreshed with a keytab, else a warning that jobs
    # outliving the tokens' lifetime will lose HDFS access.
    keeper = keeper_for(state)
    if keeper is not None and keeper.due():
        # The submission's tokens are (nearly) of no use already: tasks
        # must start with fresh ones.
        await keeper.refresh()
    tokens = asyncio.create_task(keeper.run()) if keeper and keeper.renews else None
    health_servicer = health.aio.HealthServicer()
    # The page and /metrics read only the last published snapshot.
    published = PublishedSnapshot(lambda: state.last_status)
    job_metrics = JobMetrics(published)
    server, port = create_server(
        state,
        cert,
        key,
        health_servicer=health_servicer,
        on_call=job_metrics.count_call,
    )
    state.apply([ServingAt(f"{host}:{port}")])
    await server.start()
    await mark_serving(health_servicer)
    log.info("tfyarn master serving on %s", state.master_address)
    await launcher.publish(MASTER_KEY, state.master_address)
    tensorboard = _start_tensorboard(spec)
    await _add_status_page(
        published, job_metrics, launcher, tensorboard.state if tensorboard else None
    )
    if tensorboard is not None:
        # In the background: the tasks need not wait for TensorBoard.
        tensorboard_page = asyncio.create_task(
            _add_tensorboard_page(tensorboard, launcher)
        )

    # `tfyarn kill` kills the application right after the tasks stopped: the
    # job's record must be kept before that (am/record.py).
    stop_record = asyncio.create_task(keep_when_stopped(state))

    loop = asyncio.get_running_loop()
    loop.add_signal_handler(
        signal.SIGTERM,
        lambda: state.request_kill("the application master received SIGTERM (killed)"),
    )
    try:
        phase, _ = await state.run()
    finally:
        stop_record.cancel()
        if tokens is not None:
            tokens.cancel()
        if tensorboard is not None:
            tensorboard_page.cancel()
            tensorboard.stop()
        await server.stop(grace=1.0)
    return 0 if phase.value == "SUCCEEDED" else 1


def am_attempt(container_id: str) -> int:
    """The application attempt a YARN container id belongs to (1 if unknown).

    Examples
    --------
    >>> am_attempt("container_e17_1795314317772_0008_02_000001")
    2
    >>> am_attempt("container_1795314317772_0008_01_000001")
    1
    """
    parts = container_id.split("_")
    try:
        return int(parts[-2]) if len(parts) >= 5 else 1
    except ValueError:
        return 1


def _start_tensorboard(spec: JobSpec) -> TensorBoard | None:
    """The job's TensorBoard (--tensorboard), started from the main thread, or None."""
    if not spec.tensorboard:
        return None
    tensorboard = TensorBoard(spec.tensorboard, workdir=os.getcwd())
    try:
        tensorboard.start()
    except Exception as exc:  # the job goes on without it; the page says why
        log.exception("could not start TensorBoard")
        tensorboard.problem = f"TensorBoard could not start: {exc}"
    return tensorboard


async def _add_tensorboard_page(tensorboard: TensorBoard, launcher: Launcher) -> None:
    port = await asyncio.to_thread(tensorboard.wait_ready)
    if port is None:
        log.warning("no TensorBoard for this job: %s", tensorboard.problem)
        return
    log.info("TensorBoard serving %s on port %d", tensorboard.logdir, port)
    try:
        await launcher.add_page(
            "tensorboard", f"http://127.0.0.1:{port}", "TensorBoard"
        )
    except Exception:  # the job goes on without it
        log.exception("could not add TensorBoard to the YARN web UI")
        tensorboard.problem = "TensorBoard runs but the web UI refused its page"


async def _add_status_page(
    published: PublishedSnapshot,
    job_metrics: JobMetrics,
    launcher: Launcher,
    tensorboard: Callable[[], tuple[bool, str]] | None = None,
) -> None:
    from am import status_page

    try:
        # The page reads the last published snapshot: never the live state.
        # Loopback only: skein's web UI, in this same container, proxies it
        # behind YARN's tracking URL; nothing else needs to reach it.
        page = status_page.serve(
            published,
            host="127.0.0.1",
            user=os.environ.get("USER") or getpass.getuser(),
            metrics=lambda: (job_metrics.exposition(), CONTENT_TYPE_LATEST),
            rates=job_metrics.rates.observe,
            tensorboard=tensorboard,
        )
        target = f"http://127.0.0.1:{page.server_address[1]}"
        await launcher.add_page("tfyarn", target, "tfyarn status")
    except Exception:  # a missing page must not cost the job
        log.exception("could not add the status page to the YARN web UI")


def configure_process() -> None:
    """Logging and garbage collection as the master runs them (and its benchmark)."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    # The master keeps a few objects per task for the whole job, and every
    # gRPC call allocates a few dozen short-lived ones. With the default
    # thresholds the collector runs every 700 allocations and keeps walking
    # the long-lived ones: ~10% of the master's CPU while 5000 tasks
    # register (tests/benchmarks/registry_scale.py). Collect young objects
    # less often, and leave what exists at start-up (imported modules) out.
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    # Meant for skein's Java AM, which started this process: the helpers get
    # the same flags on their command line, and without the variable they do
    # not print "Picked up JAVA_TOOL_OPTIONS" into their diagnostics.
    if os.environ.get(jvm.TOOL_OPTIONS) == jvm.tool_options():
        del os.environ[jvm.TOOL_OPTIONS]


def main() -> int:
    configure_process()
    skein = import_skein()

    from am.launcher import SkeinLauncher, marker_url, record_files
    from am.record import JobRecord
    from tfyarn.contract.record import record_url

    try:
        spec = JobSpec.from_env(os.environ[_env.JOB])
    except Exception as exc:
        log.exception("cannot read the job from $%s", _env.JOB)
        app: Any = skein.ApplicationClient.from_current()
        app.shutdown("FAILED", f"tfyarn master: cannot read the job spec: {exc}")
        return 1
    app = skein.ApplicationClient.from_current()
    host = os.environ.get("NM_HOST") or socket.getfqdn()
    try:
        user = os.environ.get("USER") or getpass.getuser()
        attempt = am_attempt(os.environ.get("CONTAINER_ID", ""))
        launcher = SkeinLauncher(
            app,
            final_marker=marker_url(str(app.id), user, "final"),
            restarts_marker=marker_url(str(app.id), user, "restarts"),
            # YARN may cap attempts lower (yarn.resourcemanager.am.max-attempts);
            # then skein unregisters too, which is harmless.
            last_attempt=attempt >= spec.max_am_attempts,
            # Beside tfyarn's other files of this user: skein's application
            # directory is deleted when the application ends.
            record=JobRecord(record_url(user, str(app.id)), record_files),
        )
        return asyncio.run(serve(spec, launcher, host=host))
    except Exception as exc:
        log.exception("the tfyarn master crashed")
        app.shutdown("FAILED", f"tfyarn master crashed: {type(exc).__name__}: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
