"""Stop notices in the script: save before the master ends the generation.

When the master ends a generation on purpose (``tfyarn scale``, ``tfyarn kill
--graceful``, a restart it decided), every task gets a notice before any
signal (ARCHITECTURE.md, "Graceful stops"). A script that heeds it saves and
exits with :data:`RESTART_CODE`; the master waits for it (up to the job's
``stop_grace``), then stops what is left, and the next generation resumes from
the saved step. Scripts that never ask are stopped as before (SIGTERM).

- :func:`should_stop`: a plain, cheap check for custom training loops and the
  coordinator of a ``ParameterServerStrategy`` job;
- :func:`termination_config`: a ready
  ``tf.distribute.experimental.TerminationConfig`` for TensorFlow's
  ``PreemptionCheckpointHandler`` (``MultiWorkerMirroredStrategy``): every
  worker saves at the same step, then exits with :data:`RESTART_CODE`;
- :func:`stop_notice`: the notice itself (why, until when), or None.

Outside a tfyarn job nothing is ever noticed: :func:`should_stop` is False.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from typing import Any

from tfyarn.contract.notice import (
    RESTART_CODE,
    STOP_FILE,
    STOP_GRACE,
    Notice,
    heeded_marker,
)

__all__ = [
    "RESTART_CODE",
    "should_stop",
    "stop_grace",
    "stop_notice",
    "termination_config",
]

_heeded: set[str] = set()  # stop files whose marker this process left


def should_stop() -> bool:
    """Whether the master asked this task to save and end (a stop notice came).

    Cheap (one ``stat``): call it every step. The first call also tells the
    master that this script heeds notices, so call it (or
    :func:`termination_config`) early: the master then waits for this script
    to save and exit, up to the job's ``stop_grace``, before it stops the rest.

    Returns
    -------
    bool
        True once a notice arrived; then save and ``sys.exit(tfyarn.RESTART_CODE)``.
        Always False outside a tfyarn job.

    Examples
    --------
    >>> import tfyarn
    >>> tfyarn.should_stop()  # not in a tfyarn job here
    False
    """
    path = os.environ.get(STOP_FILE)
    if not path:
        return False
    if path not in _heeded:
        _heeded.add(path)
        _leave_marker(path)
    return os.path.exists(path)


def stop_notice() -> Notice | None:
    """The notice (``reason``, ``grace_seconds``, ``deadline`` in epoch seconds)
    if one arrived, else None. Does not mark the script as heeding notices."""
    path = os.environ.get(STOP_FILE)
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            return Notice.from_json(f.read())
    except (OSError, ValueError):
        return None


def stop_grace() -> float:
    """The job's ``stop_grace``: seconds from a notice to SIGTERM (0 outside a job)."""
    try:
        return float(os.environ.get(STOP_GRACE) or 0.0)
    except ValueError:
        return 0.0


def termination_config(
    *,
    grace_period: float = 0.0,
    save_fn: Any = None,
    before_exit: Callable[[], object] | None = None,
) -> Any:
    """A ``tf.distribute.experimental.TerminationConfig`` wired to tfyarn's notices.

    Pass it to ``tf.distribute.experimental.PreemptionCheckpointHandler``
    (``MultiWorkerMirroredStrategy``): its watcher is :func:`should_stop`, so
    when a notice reaches any worker, every worker saves at the same step and
    then exits with :data:`RESTART_CODE`, which the master takes as "saved,
    start me again" (not a failure, nothing charged). The exit is immediate
    (``os._exit`` once stdout, stderr and logging are flushed): the
    checkpoint is written by then, and the interpreter's teardown of a
    multi-worker TensorFlow runtime whose peers are exiting too can take
    seconds or hang. ``atexit`` handlers do not run; put what must happen in
    ``before_exit``.

    Parameters
    ----------
    grace_period
        TensorFlow's grace period. 0 (the default): save at the next step and
        exit, so the generation ends as soon as every worker saved (a resize
        waits no longer than that). A positive value makes TensorFlow train on
        and save once more shortly before it ends; keep it below
        :func:`stop_grace`, after which the master sends SIGTERM.
    save_fn
        TensorFlow's ``save_fn`` (default: the handler's checkpoint manager).
    before_exit
        Called once the checkpoint is saved, just before the exit (say, to
        print the step it was saved at).

    Returns
    -------
    tf.distribute.experimental.TerminationConfig

    Examples
    --------
    >>> handler = tf.distribute.experimental.PreemptionCheckpointHandler(
    ...     strategy.cluster_resolver, manager,
    ...     termination_config=tfyarn.termination_config())  # doctest: +SKIP
    """
    import tensorflow as tf

    should_stop()  # heeds notices from now on, before the first step
    return tf.distribute.experimental.TerminationConfig(
        termination_watcher_fn=should_stop,
        exit_fn=functools.partial(_exit_for_restart, before_exit),
        grace_period=grace_period,
        save_fn=save_fn,
    )


def _exit_for_restart(before_exit: Callable[[], object] | None = None) -> None:
    """Exit with the restart code now: what must be said is flushed first."""
    try:
        if before_exit is not None:
            before_exit()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        logging.shutdown()
        os._exit(RESTART_CODE)


def _leave_marker(path: str) -> None:
    try:
        heeded_marker(path).touch()
    except OSError:  # the master then does not wait for this script: no harm
        pass
