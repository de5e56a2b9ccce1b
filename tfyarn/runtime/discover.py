"""Find the master of a declared container: its address in skein's key-value store.

The job's initial containers are requested with the application, before the
master runs (``JobSpec.to_skein``), so their environment cannot name it. The
master puts ``host:port`` under ``tfyarn.master`` as soon as it serves; this
waits for it, bounded, while the pre-started interpreter imports TensorFlow.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from tfyarn.contract.status import MASTER_KEY
from tfyarn.errors import MasterUnavailableError

log = logging.getLogger("tfyarn.runtime")

#: How often a wait for the address wakes to check for a stop.
WAKE = 0.5
#: Before trying skein's AM again when it did not answer.
RETRY = 0.1


def master_address(
    timeout: float,
    *,
    stopped: threading.Event | None = None,
    connect: Callable[[], Any] | None = None,
) -> str:
    """The master's ``host:port``; raise MasterUnavailableError after ``timeout``.

    ``connect`` returns an object with skein's ``kv.events(key=, event_type=)``,
    ``kv.get(key)`` and ``close()`` (``ApplicationClient.from_current`` unless
    a test gives another). A stop (``stopped`` set) ends the wait early with
    the same error.

    The wait is on the store's put events for the key, not a poll: the address
    arrives as soon as the master publishes it, and skein's Java AM, which
    starts on the same cores as the tasks' TensorFlow imports, no longer
    answers ten gets a second from every task while the cluster forms.
    """
    deadline = time.monotonic() + timeout
    app: Any = None
    events: Any = None
    problem = "the master has not published its address yet"
    try:
        while True:
            try:
                if app is None:
                    app = (connect or _from_current)()
                if events is None:
                    # Subscribe, then look: a put between the two is not missed.
                    events = app.kv.events(key=MASTER_KEY, event_type="put")
                    value = app.kv.get(MASTER_KEY)
                    if value:
                        return bytes(value).decode()
                wait = max(0.0, min(WAKE, deadline - time.monotonic()))
                try:
                    value = events.get(timeout=wait).result.value
                except queue.Empty:
                    value = None
                if value:
                    return bytes(value).decode()
            except Exception as exc:  # noqa: BLE001 -- skein's AM busy or unreachable: retried
                problem = f"skein's application master did not answer: {exc}"
                _unsubscribe(events)
                events = None
                time.sleep(RETRY)
            if stopped is not None and stopped.is_set():
                raise MasterUnavailableError(
                    f"stopped while looking for the tfyarn master ({problem})"
                )
            if time.monotonic() >= deadline:
                raise MasterUnavailableError(
                    f"the tfyarn master's address ({MASTER_KEY} in the "
                    f"application's key-value store) did not appear within "
                    f"{timeout:g} s: {problem}"
                )
    finally:
        _unsubscribe(events)
        if app is not None:
            try:
                app.close()
            except Exception:  # only a channel to close
                log.debug("closing skein's client failed", exc_info=True)


def _unsubscribe(events: Any) -> None:
    if events is not None:
        try:
            events.unsubscribe_all()
        except Exception:  # the AM went away: nothing left to unsubscribe
            log.debug(
                "unsubscribing from skein's key-value events failed", exc_info=True
            )


def _from_current() -> Any:
    import skein

    return skein.ApplicationClient.from_current()
