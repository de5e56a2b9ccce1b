"""What ``tfyarn.run``'s client and its tasks agree on about a shipped function.

The client writes the function, its arguments and a header into one file
shipped with the job (:data:`PAYLOAD_FILE`); a generated entry script, run by
the ordinary task runtime as the job's script, hands it to
:mod:`tfyarn._function_task`. The tasks write what comes back under the run's
directory on HDFS (:func:`run_dir`), the client reads it after the job ended:
the key-value store ends with the application, before the client's last poll.

- ``result.pkl``: the lead task's return value (cloudpickle), at most
  :data:`RESULT_LIMIT` bytes;
- ``too-large.json``: the lead's value was larger (its size): the client
  raises, saying to write it to HDFS and return the path;
- ``error-<role>-<index>-<attempt>.json``: a task's exception
  (:class:`TaskError`), written before the task exits non-zero.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

# The payload and the entry script inside every container.
PAYLOAD_FILE = "tfyarn_function.pkl"
ENTRY_PREFIX = "tfyarn_run_"
# The largest return value brought back to the caller, pickled. Larger data
# belongs on HDFS: the function writes it there and returns the path.
RESULT_LIMIT = 32 * 1024 * 1024
# Under the user's HDFS home, beside the job records (.tfyarn/jobs).
RUNS_DIR = ".tfyarn/runs"
RESULT = "result.pkl"
TOO_LARGE = "too-large.json"
ERROR_PREFIX = "error-"
# The payload starts with one JSON line (the header), then the pickle, so a
# task checks versions before unpickling anything.
HEADER_END = b"\n"


def run_dir(user: str, run_id: str) -> str:
    """Where the tasks of run ``run_id`` of ``user`` leave what comes back.

    Examples
    --------
    >>> run_dir("alice", "f00d")
    'hdfs:///user/alice/.tfyarn/runs/f00d'
    """
    return f"hdfs:///user/{user}/{RUNS_DIR}/{run_id}"


def error_name(role: str, index: int, attempt: int) -> str:
    """The file of one task attempt's exception.

    Examples
    --------
    >>> error_name("worker", 1, 0)
    'error-worker-1-0.json'
    """
    return f"{ERROR_PREFIX}{role}-{index}-{attempt}.json"


@dataclass(frozen=True)
class Header:
    """What the client says about the payload, readable without unpickling it."""

    run_id: str
    function: str  # module.qualname, for messages
    lead: str  # "chief:0" or "worker:0": whose value comes back
    python: str  # the client's "3.11"
    cloudpickle: str
    tensorflow: str  # "" where the client has none

    def encode(self, body: bytes) -> bytes:
        return json.dumps(asdict(self)).encode() + HEADER_END + body

    @classmethod
    def decode(cls, payload: bytes) -> tuple[Header, bytes]:
        head, sep, body = payload.partition(HEADER_END)
        if not sep:
            raise ValueError("not a tfyarn.run payload: no header line")
        return cls(**json.loads(head)), body


@dataclass(frozen=True)
class TaskError:
    """An exception a task's function raised (or its payload could not load)."""

    task: str  # "worker:1"
    attempt: int
    type: str  # "ValueError" (qualified when not a builtin)
    message: str
    traceback: str  # the remote traceback, formatted
    exception: str = ""  # base64 cloudpickle of the exception, "" if it did not pickle
    at: float = 0.0  # wall-clock seconds, to pick the latest

    def to_json(self) -> bytes:
        return json.dumps(asdict(self)).encode()

    @classmethod
    def from_json(cls, raw: bytes | str) -> TaskError:
        data: dict[str, Any] = json.loads(raw)
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})
