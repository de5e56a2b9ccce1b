"""Blocking client calls with a deadline, on a bounded set of threads.

hdfs-native's calls cannot be interrupted, and its own timeouts do not cover a
NameNode that accepts connections and never answers (measured: a ``stat`` to
such a socket waits past 120 s). So each metadata call runs on a worker thread
and the caller stops waiting at the deadline. The thread of a call that missed
its deadline stays blocked until the client returns: those are *stuck*. The
workers are few and reused, so timed-out calls cannot pile up threads: with
every worker stuck, new calls wait in the queue and time out there, and the
error says how many workers are stuck.

Workers are daemon threads, not a ``ThreadPoolExecutor``: a call stuck in the
client must not keep the interpreter from exiting (the executor joins its
threads at exit).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from tfyarn.errors import TfyarnError

T = TypeVar("T")

log = logging.getLogger("tfyarn.data")

#: Worker threads per process; a few readers and writers in parallel is the
#: common load, and each blocked call holds one.
MAX_WORKERS = 8


class DeadlineError(TfyarnError, TimeoutError):
    """A call missed its deadline.

    ``stuck``: workers blocked at that moment; ``queued``: the call never
    started, because no worker was free.
    """

    def __init__(self, message: str, *, stuck: int, queued: bool) -> None:
        super().__init__(message)
        self.stuck = stuck
        self.queued = queued


class _Call(Generic[T]):
    def __init__(self, fn: Callable[[], T]) -> None:
        self.fn = fn
        self.done = threading.Event()
        self.ok = False
        self.value: Any = None
        self.started: float | None = None
        self.abandoned = False


class DeadlineRunner:
    """Run ``fn()`` on one of at most ``max_workers`` threads, waiting at most
    ``timeout`` seconds for it.

    Examples
    --------
    >>> runner = DeadlineRunner(max_workers=2)
    >>> runner.run(lambda: 42, timeout=1.0)
    42
    """

    def __init__(self, max_workers: int = MAX_WORKERS, name: str = "tfyarn-hdfs-call"):
        self.max_workers = max_workers
        self.name = name
        self._cond = threading.Condition()
        self._queue: collections.deque[_Call[Any]] = collections.deque()
        self._workers = 0
        self._idle = 0
        self._stuck = 0

    @property
    def workers(self) -> int:
        """Worker threads started (never more than ``max_workers``)."""
        return self._workers

    @property
    def stuck(self) -> int:
        """Workers still blocked in a call whose caller gave up."""
        return self._stuck

    def run(self, fn: Callable[[], T], timeout: float) -> T:
        """``fn()``'s result or exception; :class:`DeadlineError` past ``timeout``."""
        call: _Call[T] = _Call(fn)
        with self._cond:
            self._queue.append(call)
            # Idle workers not yet woken for earlier calls are taken already.
            if len(self._queue) > self._idle and self._workers < self.max_workers:
                self._workers += 1
                threading.Thread(
                    target=self._work, name=f"{self.name}-{self._workers}", daemon=True
                ).start()
            else:
                self._cond.notify()
        call.done.wait(timeout)
        with self._cond:
            if not call.done.is_set():
                queued = call.started is None
                if queued:
                    self._queue.remove(call)  # never runs
                else:
                    call.abandoned = True
                    self._stuck += 1
                    log.warning(
                        "an HDFS call is stuck past its %g s deadline "
                        "(%d of %d call threads stuck)",
                        timeout,
                        self._stuck,
                        self.max_workers,
                    )
                raise DeadlineError(
                    f"no answer within {timeout:g} s", stuck=self._stuck, queued=queued
                )
        if call.ok:
            return call.value
        raise call.value

    def _work(self) -> None:
        while True:
            with self._cond:
                self._idle += 1
                while not self._queue:
                    self._cond.wait()
                self._idle -= 1
                call = self._queue.popleft()
                call.started = time.monotonic()
            try:
                call.value, call.ok = call.fn(), True
            except BaseException as exc:  # noqa: BLE001 (re-raised in the caller)
                call.value = exc
            with self._cond:
                call.done.set()
                if call.abandoned:
                    self._stuck -= 1
                    log.info(
                        "a stuck HDFS call returned after %.0f s",
                        time.monotonic() - call.started,
                    )


#: The process's runner for HDFS metadata calls.
RUNNER = DeadlineRunner()
