"""``tfyarn.run``: run a Python function in every task of a job, get its value back.

The function and its arguments are pickled (:mod:`tfyarn.client.shipping`)
into a file shipped with the job, beside a generated entry script that is the
job's script: the ordinary runtime runs it with ``TF_CONFIG`` in place, so
recovery, legacy flags, GPUs, Docker and ``python_env`` work as for any
script. The entry hands the payload to :mod:`tfyarn._function_task`; what
comes back (the lead's value, a task's exception) is read from the run's HDFS
directory once the job ended (:mod:`tfyarn.contract.function`).
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import difflib
import inspect
import json
import os
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from tfyarn import _versions
from tfyarn.client import config, shipping
from tfyarn.client.connection import login_as, opened
from tfyarn.client.follow import follow
from tfyarn.client.submission import check, check_cluster, fan_out, submit_spec
from tfyarn.contract import function as _fn
from tfyarn.errors import (
    JobFailedError,
    RemoteTaskError,
    ResultTooLargeError,
    SpecError,
    TfyarnError,
)
from tfyarn.spec import JobSpec, Role

# How long the check of the job's Python may take (it imports nothing).
PYTHON_CHECK_TIMEOUT = 60.0
_ENTRY = '''"""tfyarn.run's entry script (generated): run {function} in this task."""
import os

from tfyarn._function_task import main

main(os.path.join(os.path.dirname(os.path.abspath(__file__)), {payload!r}))
'''
# The job's Python, asked before submission: versions, and which modules
# (imported by reference by the pickle) it cannot find.
_PROBE = """
import importlib.util, json, sys
sys.path.insert(0, "")
from importlib import metadata
def v(*names):
    for n in names:
        try:
            return metadata.version(n)
        except metadata.PackageNotFoundError:
            pass
    return ""
mods = json.loads(sys.argv[1])
print(json.dumps({
    "python": "%d.%d" % sys.version_info[:2],
    "cloudpickle": v("cloudpickle"),
    "tensorflow": v(*json.loads(sys.argv[2])),
    "missing": [m for m in mods if importlib.util.find_spec(m) is None],
}))
"""


def run(
    fn: Callable[..., Any],
    *args: Any,
    spec: JobSpec | None = None,
    kwargs: Mapping[str, Any] | None = None,
    config_file: str | os.PathLike[str] | None = None,
    view: Any = None,
    kill_on_interrupt: bool = False,
    timeout: float | None = None,
    client: Any | None = None,
    **keywords: Any,
) -> Any:
    """Run ``fn(*args, **kwargs)`` in every task of a new job; return the lead's value.

    Every task (chief, workers, ps, evaluator) calls the function with
    ``TF_CONFIG`` set; the value returned is the chief's, or worker 0's
    where there is no chief. A keyword that is a submit option
    (``num_worker=2``, ``worker_memory="2 GiB"``, ``python_env="auto"``,
    ``mlflow=...``) configures the job; any other keyword goes to ``fn``
    (``kwargs={...}`` passes one that shares an option's name).

    Parameters
    ----------
    fn
        A function: defined in the notebook (shipped by value) or importable
        by the job's Python (shipped by reference).
    spec
        A :class:`JobSpec` to run it as (its script and args are replaced);
        no submit options then.
    view
        Where progress goes: a callable taking each line, or ``False`` for
        none; default: a live view in a notebook cell, lines on stderr
        elsewhere.
    kill_on_interrupt
        Interrupting (the kernel, Ctrl-C) kills the job; by default the job
        keeps running and the message says how to follow or kill it.
    timeout
        Stop following after this many seconds (the job keeps running).

    Returns
    -------
    Any
        What the lead task's call returned (at most
        :data:`tfyarn.contract.function.RESULT_LIMIT` bytes pickled).

    Raises
    ------
    SpecError
        Before submission: a value that cannot ship (an open file, a lock, a
        TensorFlow object), a module the job's Python cannot import, versions
        that disagree, an unknown keyword, an invalid option.
    RemoteTaskError
        A task's function raised: its task, attempt and remote traceback.
    JobFailedError
        The job failed for another reason (diagnostics included).
    ResultTooLargeError
        The value was too large to bring back.

    Examples
    --------
    >>> def train(epochs):                                 # doctest: +SKIP
    ...     import tensorflow as tf
    ...     strategy = tf.distribute.MultiWorkerMirroredStrategy()
    ...     ...
    ...     return accuracy
    >>> tfyarn.run(train, 3, num_worker=2)                  # doctest: +SKIP
    0.97
    """
    from tfyarn.client import mlflow_run, notebook_view

    options, fn_kwargs = _split(fn, keywords, kwargs)
    if options.get("detach"):
        raise SpecError(
            "tfyarn.run follows its job to bring the value back: no detach; "
            "tfyarn.submit(script, ...) submits a script and returns at once"
        )
    if spec is not None and options:
        raise SpecError(
            f"tfyarn.run: give either spec= or submit options, not both "
            f"(got spec= and {sorted(options)}); set them on the JobSpec"
        )
    _check_call(fn, args, fn_kwargs)
    shipping.check_shippable(fn, args, fn_kwargs)
    shipment = shipping.pickle_call(fn, args, fn_kwargs)
    run_id = uuid.uuid4().hex[:16]
    cfg = config.load(config_file, options if spec is None else {})
    own = config.client_options(cfg)
    tracking = mlflow_run.settings(own)  # refused here without mlflow installed
    with tempfile.TemporaryDirectory(prefix="tfyarn-run-") as tmp:
        entry, payload = _write_files(Path(tmp), fn, run_id, shipment)
        with login_as(own.login), opened(client) as yarn:
            if spec is None:
                options["files"] = [*cfg.get("files", ()), str(payload)]
                job = check(str(entry), config_file=config_file, client=yarn, **options)
            else:
                job = dataclasses.replace(
                    spec,
                    script=str(entry),
                    args=(),
                    files=(*spec.files, str(payload)),
                ).validate()
                check_cluster(yarn, job)
            _rewrite_lead(payload, job)
            check_job_python(job, shipment.by_reference)
            tracker = mlflow_run.start(
                tracking, job, source=shipping.describe(fn), call=(args, fn_kwargs)
            )
            app_id = submit_spec(yarn, job, compression=own.python_env_compression)
            shown = notebook_view.choose(view, job)
            shown.submitted(app_id)
            tracker.submitted(app_id, yarn)
            try:
                status = follow(
                    yarn,
                    app_id,
                    on_event=fan_out(shown.event, tracker.event),
                    on_progress=shown.progress,
                    on_status=fan_out(shown.status, tracker.status),
                    on_link=fan_out(shown.tracking, tracker.tracking),
                    spec=job,
                    poll_interval=own.poll_interval,
                    timeout=timeout,
                )
            except KeyboardInterrupt:
                shown.close()
                _interrupted(app_id, kill_on_interrupt, yarn)
                tracker.detached(app_id)
                raise
            except JobFailedError as failed:
                shown.finished(failed.final_status, str(failed))
                remote = remote_error(failed, _user(yarn, app_id), run_id)
                tracker.finished(failed.final_status, str(remote or failed))
                if remote is not None:
                    raise remote from _original(remote)
                raise
            shown.finished(status.outcome, status.diagnostics)
            tracker.finished(status.outcome, status.diagnostics, status.tracking_url)
            return fetch_result(status.user, run_id, job)


def _split(
    fn: Callable[..., Any],
    keywords: Mapping[str, Any],
    kwargs: Mapping[str, Any] | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Submit options (the config's keys, ``mlflow``) apart from the function's keywords."""
    known = set(config.schema())
    options = {k: v for k, v in keywords.items() if k in known}
    fn_kwargs = {k: v for k, v in keywords.items() if k not in known}
    if kwargs:
        fn_kwargs.update(kwargs)
    if fn_kwargs:
        try:
            params = inspect.signature(fn).parameters
        except (TypeError, ValueError):
            return options, fn_kwargs
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        unknown = [k for k in keywords if k not in known and k not in params]
        if unknown and not takes_any:
            hints = []
            for k in unknown:
                close = difflib.get_close_matches(k, sorted(known), n=1, cutoff=0.7)
                hints.append(
                    f"{k!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                )
            raise SpecError(
                f"tfyarn.run: {', '.join(hints)} is neither a submit option nor a "
                f"parameter of {shipping.describe(fn)}"
            )
    return options, fn_kwargs


def _check_call(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> None:
    """The call would bind: refuse here, not in every task after the cluster formed."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise SpecError(
            f"tfyarn.run: {shipping.describe(fn)}{signature} cannot be called "
            f"with these arguments: {exc}"
        ) from None


def _write_files(
    tmp: Path, fn: Callable[..., Any], run_id: str, shipment: shipping.Shipment
) -> tuple[Path, Path]:
    name = "".join(c if c.isalnum() else "_" for c in getattr(fn, "__name__", "fn"))
    entry = tmp / f"{_fn.ENTRY_PREFIX}{name[:40] or 'fn'}.py"
    entry.write_text(
        _ENTRY.format(function=shipping.describe(fn), payload=_fn.PAYLOAD_FILE)
    )
    payload = tmp / _fn.PAYLOAD_FILE
    mine = _versions.here()
    header = _fn.Header(
        run_id=run_id,
        function=shipping.describe(fn),
        lead="worker:0",
        python=mine["python"],
        cloudpickle=mine["cloudpickle"],
        tensorflow=mine["tensorflow"],
    )
    payload.write_bytes(header.encode(shipment.body))
    return entry, payload


def _rewrite_lead(payload: Path, job: JobSpec) -> None:
    """Name the job's lead task in the header (known once the job is built)."""
    header, body = _fn.Header.decode(payload.read_bytes())
    role, index = job.lead_task()
    lead = f"{role.value}:{index}"
    if lead != header.lead:
        payload.write_bytes(dataclasses.replace(header, lead=lead).encode(body))


def job_python(job: JobSpec) -> str | None:
    """The interpreter the job's tasks run, as a path on this machine; None
    where it cannot be run from here (an archive, a pex, a Docker image)."""
    if any(job.docker_image_of(r) for r in Role if job.count(r)):
        return None
    env = job.python_env
    if env == "auto":
        return sys.executable  # this environment, packed
    if env:
        candidate = Path(env) / "bin" / "python"
        return str(candidate) if candidate.exists() else None
    return job.python if Path(job.python).exists() else None


def check_job_python(job: JobSpec, modules: tuple[str, ...]) -> None:
    """Versions agree and by-reference modules import, in the job's Python.

    Run where the tasks would: a directory holding the job's local files
    (modules shipped with ``files=`` import), the job's ``env`` and not this
    process's ``PYTHONPATH``. A Python that cannot be run from here is
    checked in every task instead, before the payload is unpickled.
    """
    python = job_python(job)
    if python is None:
        return
    with tempfile.TemporaryDirectory(prefix="tfyarn-probe-") as cwd:
        for f in job.files:
            if "://" not in f and Path(f).exists():
                with contextlib.suppress(OSError):
                    os.symlink(Path(f).resolve(), Path(cwd) / Path(f).name)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env.update(job.env)
        try:
            out = subprocess.run(  # noqa: PLW1510 -- its exit code is read below
                [
                    python,
                    "-c",
                    _PROBE,
                    json.dumps(modules),
                    json.dumps(_versions.TENSORFLOW_DISTS),
                ],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=PYTHON_CHECK_TIMEOUT,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SpecError(
                f"tfyarn.run could not ask the job's Python {python}: {exc}"
            ) from None
    if out.returncode != 0:
        raise SpecError(
            f"tfyarn.run could not ask the job's Python {python}: "
            f"{out.stderr.strip()[-500:]}"
        )
    found = json.loads(out.stdout.strip().splitlines()[-1])
    differ = _versions.disagreements(_versions.here(), found)
    if differ:
        raise SpecError(
            f"the job's Python ({python}) cannot run this function as pickled "
            f"here: {'; '.join(differ)}. Fix: {_versions.FIX}"
        )
    if found["missing"]:
        names = ", ".join(found["missing"])
        raise SpecError(
            f"the job's Python ({python}) cannot import {names}, which the "
            f"function uses by reference (imported, not shipped). Fix: ship the "
            f"module's file with files=[...] (it imports from the task's "
            f"directory), install it in the job's Python (python_env='auto' "
            f"ships this one), or ship it by value: "
            f"cloudpickle.register_pickle_by_value(<module>)"
        )


def _user(yarn: Any, app_id: str) -> str:
    try:
        return str(yarn.application_report(app_id).user or "")
    except Exception:  # noqa: BLE001 -- the error record is a bonus
        return ""


def remote_error(
    failed: JobFailedError, user: str, run_id: str
) -> RemoteTaskError | None:
    """The latest task exception of the run, as the caller's exception; None if none."""
    if not user:
        return None
    errors = list(_task_errors(_fn.run_dir(user, run_id)))
    if not errors:
        return None
    error = max(errors, key=lambda e: e.at)
    remote = RemoteTaskError(
        failed.app_id,
        failed.final_status,
        failed.diagnostics,
        task=error.task,
        attempt=error.attempt,
        remote_type=error.type,
        remote_message=error.message,
        remote_traceback=error.traceback,
    )
    remote.original = _unpickled(error.exception)  # type: ignore[attr-defined]
    return remote


def _original(remote: RemoteTaskError) -> BaseException | None:
    original = getattr(remote, "original", None)
    return original if isinstance(original, BaseException) else None


def _unpickled(data: str) -> BaseException | None:
    if not data:
        return None
    try:
        import cloudpickle

        value = cloudpickle.loads(base64.b64decode(data))
    except Exception:  # noqa: BLE001 -- a class this side lacks: text is enough
        return None
    return value if isinstance(value, BaseException) else None


def _task_errors(url: str) -> Iterator[_fn.TaskError]:
    from tfyarn.data import fs

    try:
        files = fs.resolve(url)
        entries = files.ls(url)
    except (OSError, TfyarnError):
        return
    for entry in entries:
        name = entry.url.rsplit("/", 1)[-1]
        if name.startswith(_fn.ERROR_PREFIX) and name.endswith(".json"):
            try:
                yield _fn.TaskError.from_json(files.read_bytes(entry.url))
            except (OSError, TfyarnError, ValueError, TypeError):
                continue


def fetch_result(user: str, run_id: str, job: JobSpec) -> Any:
    """The lead's value from the run's directory (removed after reading)."""
    import cloudpickle

    from tfyarn.data import fs

    url = _fn.run_dir(user, run_id)
    files = fs.resolve(url)
    role, index = job.lead_task()
    try:
        try:
            data = files.read_bytes(f"{url}/{_fn.RESULT}")
        except FileNotFoundError:
            try:
                big = json.loads(files.read_bytes(f"{url}/{_fn.TOO_LARGE}"))
            except FileNotFoundError:
                raise TfyarnError(
                    f"the job succeeded but {role.value}:{index} left no return "
                    f"value in {url}: did the function end the process itself "
                    "(sys.exit, os._exit)?"
                ) from None
            raise ResultTooLargeError(
                f"the function's return value ({big.get('type')}, "
                f"{big.get('size', 0) / 2**20:.1f} MiB pickled) is larger than "
                f"tfyarn.run brings back ({_fn.RESULT_LIMIT // 2**20} MiB): "
                "write it to HDFS in the function (tfyarn.data, tf.io.gfile with "
                "an hdfs:// path) and return the path"
            ) from None
        return cloudpickle.loads(data)
    finally:
        with contextlib.suppress(OSError, TfyarnError):
            files.delete(url, recursive=True)


def _interrupted(app_id: str, kill: bool, yarn: Any) -> None:
    if kill:
        from tfyarn.client.jobs import kill as kill_job

        result = kill_job(app_id, client=yarn)
        print(f"\nInterrupted: {result.summary()}", file=sys.stderr, flush=True)
        return
    print(
        f"\nStopped following {app_id}; the job keeps running.\n"
        f"  follow it again: tfyarn.wait({app_id!r})  (tfyarn status --follow {app_id})\n"
        f"  kill it:         tfyarn.kill({app_id!r})  (tfyarn kill {app_id})\n"
        "  (tfyarn.run(..., kill_on_interrupt=True) kills it on interrupt)",
        file=sys.stderr,
        flush=True,
    )
