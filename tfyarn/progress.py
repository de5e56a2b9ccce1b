"""``tfyarn.report_progress``: let the master see a script's training progress.

The master shows the step in ``tfyarn status`` and YARN's progress bar (pass
``total_steps=`` for a fraction), and can tell a stalled job from a slow one.
Outside a tfyarn container the call does nothing (one warning), so scripts run
unchanged on a laptop.
"""

from __future__ import annotations

import os
import threading
import time
import warnings

from tfyarn._proto import master_pb2 as pb
from tfyarn.contract import env as _env
from tfyarn.errors import MasterError

# At most one call per this many seconds reaches the master; a script may call
# report_progress every step without slowing down.
MIN_INTERVAL = 1.0
# How long one report may wait for the master before the script goes on.
CALL_TIMEOUT = 2.0

_lock = threading.Lock()
_state: dict[str, object] = {"client": None, "last": 0.0, "warned": False}


def report_progress(step: int, **metrics: float) -> None:
    """Tell the tfyarn master this task reached ``step``.

    Parameters
    ----------
    step
        The training step (or any increasing count) just completed.
    **metrics
        Numbers to show with it, e.g. ``loss=0.3``. ``total_steps`` is special:
        with it the master sets YARN's progress bar to ``step / total_steps``.

    Calls are rate-limited (one per second reaches the master) and never raise:
    a master that does not answer costs at most two seconds once and a warning.

    Examples
    --------
    >>> import tfyarn
    >>> for step in range(100):  # doctest: +SKIP
    ...     loss = train_step()
    ...     tfyarn.report_progress(step, loss=float(loss), total_steps=100)
    """
    address = os.environ.get(_env.MASTER_ADDRESS)
    if not address:
        _warn_once("tfyarn.report_progress: not running in a tfyarn task; ignored")
        return
    now = time.monotonic()
    with _lock:
        if now - float(_state["last"]) < MIN_INTERVAL:  # type: ignore[arg-type]
            return
        _state["last"] = now
        client = _state["client"]
        if client is None:
            from tfyarn.contract.channel import MasterClient

            try:
                client = MasterClient(address)
            except Exception as exc:  # noqa: BLE001 -- never break the script
                _warn_once(f"tfyarn.report_progress disabled: {exc}")
                _state["last"] = float("inf")
                return
            _state["client"] = client
    request = pb.ReportProgressRequest(
        task=pb.TaskKey(
            role=os.environ.get(_env.ROLE, ""),
            index=int(os.environ.get(_env.TASK_INDEX, "0")),
        ),
        attempt=int(os.environ.get(_env.ATTEMPT, "0")),
        step=int(step),
        metrics={k: float(v) for k, v in metrics.items()},
    )
    try:
        client.report_progress(request, timeout=CALL_TIMEOUT)  # type: ignore[attr-defined]
    except MasterError as exc:
        _warn_once(f"tfyarn.report_progress: the master did not take it: {exc}")


def _warn_once(message: str) -> None:
    if not _state["warned"]:
        _state["warned"] = True
        warnings.warn(message, RuntimeWarning, stacklevel=3)
