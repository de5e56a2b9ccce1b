"""A job as an MLflow run, logged by the client that follows it.

**Who talks to MLflow: the client**, never the master or the tasks. The
tracking server is where the user's notebook or gateway can reach (and holds
their credentials); the application master runs on some NodeManager, which
on a real cluster often has no route to it, and would need MLflow in the
job's Python. So the client creates the run at submission (parameters, tags)
and, while it follows the job (``tfyarn.run``, ``tfyarn submit`` without
``--detach``), logs the lead task's metrics as the master publishes them,
restarts and disruptions, and the final status with its diagnostics.
A ``--detach``\\ ed job's run holds what was known at submission and stays
RUNNING: the client that would have logged the rest is gone.

**Never in training's way**: every MLflow call runs on one background thread
fed by a queue, with short HTTP timeouts and no retries; the first failure is
one warning and the run's logging stops. Following the job never waits on
MLflow, except for :data:`FLUSH_BOUND` seconds at the end.

**Resubmissions** are new runs, nested under the first job's run when
``mlflow_parent`` names it: one MLflow run is one YARN application (its id,
tracking page, logs and final status), and a resumed job's steps restart
from its checkpoint, which would fold back over the first run's history.
"""

from __future__ import annotations

import getpass
import os
import queue
import shutil
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tfyarn import _versions
from tfyarn.client.config import ClientOptions
from tfyarn.contract.status import JobStatus as MasterStatus
from tfyarn.errors import SpecError
from tfyarn.spec import ROLES, JobSpec

INSTALL = "pip install 'tfyarn[mlflow]'"
# How long the end of a followed job waits for MLflow's queue to drain.
FLUSH_BOUND = 30.0
# One HTTP call's bound, and no retries: a server that is down refuses the
# connection at once (a warning, not minutes of retries); a slow one gets
# this long per call, on the background thread.
HTTP_TIMEOUT = "20"
# MLflow keeps parameter values up to this many characters.
PARAM_LIMIT = 500
# Tags: at most this much of the diagnostics.
DIAGNOSTICS_LIMIT = 5000
TERMINAL = {"SUCCEEDED": "FINISHED", "FAILED": "FAILED", "KILLED": "KILLED"}


@dataclass(frozen=True)
class Tracking:
    uri: str
    experiment: str = ""
    parent: str = ""


def settings(own: ClientOptions) -> Tracking | None:
    """The MLflow run asked for, or None; refused when MLflow is not installed.

    Raises
    ------
    SpecError
        ``mlflow`` is set but the package is missing (with the install line),
        or ``env`` while ``MLFLOW_TRACKING_URI`` is unset.
    """
    uri = own.mlflow.strip()
    if not uri:
        return None
    if uri == "env":
        uri = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
        if not uri:
            raise SpecError(
                "--mlflow env: MLFLOW_TRACKING_URI is not set; set it or give "
                "the tracking server's URI to --mlflow"
            )
    try:
        import mlflow  # noqa: F401
    except ImportError:
        raise SpecError(
            f"--mlflow needs MLflow's client in this Python: {INSTALL}"
        ) from None
    experiment = own.mlflow_experiment or os.environ.get("MLFLOW_EXPERIMENT_NAME", "")
    return Tracking(uri, experiment, own.mlflow_parent.strip())


def params_of(job: JobSpec) -> dict[str, str]:
    """The job's options as MLflow parameters, named as the submit options are."""
    out: dict[str, str] = {}
    for role in ROLES:
        group = job.group(role)
        r = role.value
        out[f"num_{r}"] = str(group.count)
        if group.count:
            out[f"{r}_memory"] = f"{group.memory_mib} MiB"
            out[f"{r}_vcores"] = str(group.vcores)
            out[f"{r}_gpus"] = str(group.gpus)
    plain = job.to_dict()
    for key in (
        "name",
        "queue",
        "node_label",
        "python",
        "python_env",
        "legacy_flags",
        "max_restarts",
        "max_disruptions",
        "restart_policy",
        "min_worker",
        "registration_timeout",
        "heartbeat_timeout",
        "stall_timeout",
        "docker_image",
        "tensorboard",
    ):
        value = plain.get(key)
        if value not in (None, ""):
            out[key] = str(value)
    out["am_memory"] = f"{job.am_memory_mib} MiB"
    return {k: v[:PARAM_LIMIT] for k, v in out.items()}


def hadoop_version() -> str:
    """``hadoop version``'s first line's version, or "" where there is none."""
    hadoop = shutil.which("hadoop")
    if not hadoop:
        return ""
    try:
        out = subprocess.run(
            [hadoop, "version"], check=False, capture_output=True, text=True, timeout=30
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    first = out.splitlines()[0] if out else ""
    return first.removeprefix("Hadoop ").strip()


class Tracker:
    """Feeds one job's MLflow run from the client's follow loop; never raises."""

    def __init__(
        self,
        tracking: Tracking,
        job: JobSpec,
        *,
        source: str,
        call: tuple[Any, ...] | None = None,
        script_args: tuple[str, ...] = (),
        client_factory: Callable[[str], Any] | None = None,
    ) -> None:
        self.target = tracking
        self.run_id = ""
        self.failed = ""
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self._client_factory = client_factory or _mlflow_client
        self._client: Any = None
        self._step: int | None = None
        self._step_at: tuple[float, int] | None = None
        self._restarts = 0
        self._disruptions = 0
        self._ended = False
        params = params_of(job)
        if call is not None:
            params["function"] = source[:PARAM_LIMIT]
            params["args"] = repr(call[0])[:PARAM_LIMIT]
            params["kwargs"] = repr(call[1])[:PARAM_LIMIT]
        else:
            params["script"] = source[:PARAM_LIMIT]
            params["args"] = " ".join(script_args)[:PARAM_LIMIT]
        params["tensorflow_version"] = _versions.here()["tensorflow"]
        self._thread = threading.Thread(
            target=self._work, name="tfyarn-mlflow", daemon=True
        )
        self._thread.start()
        self._put(lambda: self._create(job.name, params))

    # -- the follow loop's side: cheap, never blocks -----------------------------

    def submitted(self, app_id: str, yarn: Any = None) -> None:
        user = os.environ.get("USER") or getpass.getuser()
        tags = {
            "tfyarn.app_id": app_id,
            "tfyarn.user": user,
            "mlflow.user": user,
            "tfyarn.logs_command": f"yarn logs -applicationId {app_id}",
            "tfyarn.status_command": f"tfyarn status {app_id}",
        }
        self._put(lambda: self._tags(tags))
        self._put(self._hadoop)

    def event(self, line: str) -> None:
        del line  # the status carries what is logged

    def tracking(self, url: str) -> None:
        self._put(lambda: self._tags({"tfyarn.tracking_url": url}))

    def status(self, master: MasterStatus) -> None:
        now = time.monotonic()
        lead = master.task(master.lead) if master.lead else None
        metrics: dict[str, float] = {}
        step = None
        if lead is not None and lead.step is not None and lead.step != self._step:
            step = lead.step
            metrics = {
                k: float(v) for k, v in lead.metrics.items() if k != "total_steps"
            }
            metrics["step"] = float(step)
            if self._step_at is not None and now > self._step_at[0]:
                rate = (step - self._step_at[1]) / (now - self._step_at[0])
                if rate >= 0:
                    metrics["steps_per_s"] = rate
            self._step, self._step_at = step, (now, step)
        tags: dict[str, str] = {}
        if master.restarts != self._restarts:
            self._restarts = master.restarts
            metrics["restarts"] = float(master.restarts)
            if master.restart_reasons:
                tags["tfyarn.last_restart"] = master.restart_reasons[-1][:PARAM_LIMIT]
        if master.disruptions != self._disruptions:
            self._disruptions = master.disruptions
            metrics["disruptions"] = float(master.disruptions)
            if master.disruption_reasons:
                tags["tfyarn.last_disruption"] = master.disruption_reasons[-1][
                    :PARAM_LIMIT
                ]
        if metrics or tags:
            at = step if step is not None else (self._step or 0)
            self._put(lambda: self._log(metrics, tags, at))

    def finished(self, outcome: str, diagnostics: str, tracking_url: str = "") -> None:
        tags = {
            "tfyarn.final_status": outcome,
            "tfyarn.diagnostics": (diagnostics or "")[:DIAGNOSTICS_LIMIT],
        }
        if tracking_url:
            tags["tfyarn.tracking_url"] = tracking_url
        state = TERMINAL.get(outcome, "FAILED")
        self._put(lambda: self._end(tags, state))
        self.close(FLUSH_BOUND)

    def detached(self, app_id: str) -> None:
        self._put(lambda: self._tags({"tfyarn.detached": "true"}))
        self.close(FLUSH_BOUND)

    def close(self, bound: float) -> None:
        if not self._ended:
            self._ended = True
            self._queue.put(None)
        self._thread.join(bound)
        if self._thread.is_alive() and not self.failed:
            self._warn(
                f"MLflow did not take the run's last records within {bound:.0f} s"
            )

    # -- the MLflow thread -------------------------------------------------------

    def _put(self, work: Callable[[], None]) -> None:
        if not self._ended:
            self._queue.put(work)

    def _work(self) -> None:
        while True:
            work = self._queue.get()
            if work is None:
                return
            if self.failed:
                continue
            try:
                work()
            except Exception as exc:  # noqa: BLE001 -- a warning, never the job's end
                self.failed = str(exc).splitlines()[0][:300] if str(exc) else repr(exc)
                self._warn(
                    f"MLflow at {self.target.uri} failed ({self.failed}); the job "
                    "goes on without its MLflow run"
                )

    def _warn(self, message: str) -> None:
        warnings.warn(f"tfyarn: {message}", RuntimeWarning, stacklevel=2)

    def _create(self, name: str, params: Mapping[str, str]) -> None:
        from mlflow.entities import Param

        self._client = self._client_factory(self.target.uri)
        experiment_id = "0"
        if self.target.experiment:
            found = self._client.get_experiment_by_name(self.target.experiment)
            experiment_id = (
                found.experiment_id
                if found is not None
                else self._client.create_experiment(self.target.experiment)
            )
        tags = {"mlflow.runName": name, "tfyarn.job_name": name}
        if self.target.parent:
            tags["mlflow.parentRunId"] = self.target.parent
        run = self._client.create_run(experiment_id, tags=tags, run_name=name)
        self.run_id = run.info.run_id
        self._client.log_batch(
            self.run_id, params=[Param(k, v) for k, v in params.items() if v != ""]
        )

    def _tags(self, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        self._client.log_batch(
            self.run_id, tags=[RunTag(k, v) for k, v in tags.items()]
        )

    def _hadoop(self) -> None:
        from mlflow.entities import Param

        version = hadoop_version()
        if version:
            self._client.log_batch(
                self.run_id, params=[Param("hadoop_version", version)]
            )

    def _log(
        self, metrics: Mapping[str, float], tags: Mapping[str, str], step: int
    ) -> None:
        from mlflow.entities import Metric, RunTag

        stamp = int(time.time() * 1000)
        self._client.log_batch(
            self.run_id,
            metrics=[Metric(k, v, stamp, step) for k, v in metrics.items()],
            tags=[RunTag(k, v) for k, v in tags.items()],
        )

    def _end(self, tags: Mapping[str, str], state: str) -> None:
        self._tags(tags)
        self._client.set_terminated(self.run_id, status=state)


class NoTracker:
    """No ``--mlflow``: every call is nothing."""

    run_id = ""

    def submitted(self, app_id: str, yarn: Any = None) -> None: ...
    def event(self, line: str) -> None: ...
    def tracking(self, url: str) -> None: ...
    def status(self, master: MasterStatus) -> None: ...
    def finished(
        self, outcome: str, diagnostics: str, tracking_url: str = ""
    ) -> None: ...
    def detached(self, app_id: str) -> None: ...


def start(
    tracking: Tracking | None,
    job: JobSpec,
    *,
    source: str,
    call: tuple[Any, ...] | None = None,
    script_args: tuple[str, ...] = (),
) -> Tracker | NoTracker:
    """The job's run (created in the background), or nothing without ``tracking``."""
    if tracking is None:
        return NoTracker()
    return Tracker(tracking, job, source=source, call=call, script_args=script_args)


def _mlflow_client(uri: str) -> Any:
    # MLflow retries an unreachable server for minutes by default.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", HTTP_TIMEOUT)
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=uri)
