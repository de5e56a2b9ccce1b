"""Inside a task of ``tfyarn.run``: load the shipped function, call it, send back.

The generated entry script (the job's script) calls :func:`main` with the
payload's path. Every task calls the function with ``TF_CONFIG`` in place; the
lead task (the chief, else worker 0) writes its return value to the run's
HDFS directory; any task whose function raises writes the exception with its
remote traceback there, then exits non-zero as a failing script does, so the
job's recovery policy applies unchanged. Layout: :mod:`tfyarn.contract.function`.
"""

from __future__ import annotations

import base64
import getpass
import json
import os
import sys
import time
import traceback
from typing import Any

from tfyarn import _versions
from tfyarn.contract import env as _env
from tfyarn.contract import function as _fn


def main(payload_path: str) -> None:
    with open(payload_path, "rb") as f:
        header, body = _fn.Header.decode(f.read())
    role = os.environ.get(_env.ROLE, "worker")
    index = int(os.environ.get(_env.TASK_INDEX, "0"))
    attempt = int(os.environ.get(_env.ATTEMPT, "0"))
    task = f"{role}:{index}"
    out = _fn.run_dir(os.environ.get("USER") or getpass.getuser(), header.run_id)
    try:
        value = _call(header, body)
    except Exception as exc:
        _write_error(out, task, attempt, exc)
        raise
    if task == header.lead:
        _write_result(out, value)


def _call(header: _fn.Header, body: bytes) -> Any:
    client = {
        "python": header.python,
        "cloudpickle": header.cloudpickle,
        "tensorflow": header.tensorflow,
    }
    differ = _versions.disagreements(client, _versions.here())
    if differ:
        raise RuntimeError(
            f"this task's Python ({sys.executable}) cannot run a function "
            f"pickled by the caller's: {'; '.join(differ)}. Fix: {_versions.FIX}"
        )
    import cloudpickle

    fn, args, kwargs = cloudpickle.loads(body)
    return fn(*args, **kwargs)


def _write_error(out: str, task: str, attempt: int, exc: BaseException) -> None:
    role, _, index = task.partition(":")
    error = _fn.TaskError(
        task=task,
        attempt=attempt,
        type=_type_name(exc),
        message=str(exc),
        traceback="".join(traceback.format_exception(exc)),
        exception=_pickled(exc),
        at=time.time(),
    )
    try:
        _write(f"{out}/{_fn.error_name(role, int(index), attempt)}", error.to_json())
    except Exception as write_error:  # noqa: BLE001 -- the task's own error wins
        print(
            f"tfyarn: could not keep this task's error in {out}: {write_error}",
            file=sys.stderr,
            flush=True,
        )


def _write_result(out: str, value: Any) -> None:
    import cloudpickle

    data = cloudpickle.dumps(value)
    if len(data) > _fn.RESULT_LIMIT:
        _write(
            f"{out}/{_fn.TOO_LARGE}",
            json.dumps({"size": len(data), "type": _type_name(value)}).encode(),
        )
        return
    _write(f"{out}/{_fn.RESULT}", data)


def _write(url: str, data: bytes) -> None:
    from tfyarn.data import fs

    files = fs.resolve(url)
    files.mkdirs(url.rsplit("/", 1)[0])
    files.write_atomic(url, data)


def _pickled(exc: BaseException) -> str:
    try:
        import cloudpickle

        return base64.b64encode(cloudpickle.dumps(exc)).decode()
    except Exception:  # noqa: BLE001 -- the text and traceback still go back
        return ""


def _type_name(value: object) -> str:
    kind = type(value)
    if kind.__module__ == "builtins":
        return kind.__qualname__
    return f"{kind.__module__}.{kind.__qualname__}"
