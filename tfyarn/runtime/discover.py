"""Find the master of a declared container: its address in skein's key-value store.

The job's initial containers are requested with the application, before the
master runs (``tfyarn.client.compile.to_skein``), so their environment cannot name it. The
master puts ``host:port`` under ``tfyarn.master`` as soon as it serves; this
waits for it, bounded, while the pre-started interpreter imports TensorFlow.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from tfyarn.contract.skein_import import import_skein
from tfyarn.contract.status import MASTER_KEY
from tfyarn.errors import MasterUnavailableError

log = logging.getLogger("tfyarn.runtime")

POLL = 0.1


def master_address(
    timeout: float,
    *,
    stopped: threading.Event | None = None,
    connect: Callable[[], Any] | None = None,
) -> str:
    """The master's ``host:port``; raise MasterUnavailableError after ``timeout``.

    ``connect`` returns an object with ``kv.get(key)`` and ``close()`` (skein's
    ``ApplicationClient.from_current`` unless a test gives another). A stop
    (``stopped`` set) ends the wait early with the same error.
    """
    deadline = time.monotonic() + timeout
    app: Any = None
    problem = "the master has not published its address yet"
    try:
        while True:
            try:
                if app is None:
                    app = (connect or _from_current)()
                value = app.kv.get(MASTER_KEY)
                if value:
                    return bytes(value).decode()
            except Exception as exc:  # noqa: BLE001 -- skein's AM busy or unreachable: retried
                problem = f"skein's application master did not answer: {exc}"
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
            time.sleep(POLL)
    finally:
        if app is not None:
            try:
                app.close()
            except Exception:  # only a channel to close
                log.debug("closing skein's client failed", exc_info=True)


def _from_current() -> Any:
    return import_skein().ApplicationClient.from_current()
