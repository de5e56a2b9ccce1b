"""Which way a tfyarn helper reaches HDFS: TensorFlow itself, or the mirror fallback.

With tfyarn's HDFS plugin (:mod:`tfyarn.hdfs`) TensorFlow opens ``hdfs://``
and ``viewfs://`` URLs like local paths, so :mod:`tfyarn.checkpoint` and the
staging helpers of :mod:`tfyarn.data` give TensorFlow the URL. The plugin is
compiled from Rust when tfyarn is installed, and the install skips it where
cargo is missing: only there do the helpers fall back to :mod:`tfyarn._mirror`,
which keeps TensorFlow on local disk and copies through hdfs-native. Each
helper logs once per process which way it goes. (:mod:`tfyarn.tensorboard`
copies either way; its docstring says why.)
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

from tfyarn import hdfs
from tfyarn.contract import hdfs_plugin as _built
from tfyarn.data import fs as _fs
from tfyarn.errors import HdfsError

NOT_INSTALLED = _built.NOT_INSTALLED

_said: set[str] = set()
_lock = threading.Lock()


def use_plugin(
    urls: str | Sequence[str], *, what: str, fallback: str, log: logging.Logger
) -> bool:
    """Whether TensorFlow opens ``urls`` itself through tfyarn's HDFS plugin.

    True where the plugin is installed (:func:`tfyarn.hdfs.available`); for
    remote URLs it is then registered with TensorFlow (idempotent). False
    without it, or if TensorFlow refuses it: the caller takes its mirror
    fallback. The first call for each ``what`` logs the choice.

    Parameters
    ----------
    urls : str or sequence of str
        The locations the helper will use.
    what : str
        The helper's subject for the log line ("checkpoints", ...).
    fallback : str
        What the fallback does, for the log line ("saved locally, then copied").
    log : logging.Logger
        The helper's logger.
    """
    remote = any(_fs.is_remote(u) for u in ([urls] if isinstance(urls, str) else urls))
    if not hdfs.available():
        _once(log, logging.INFO, what, f"{what}: {fallback}: {NOT_INSTALLED}")
        return False
    if remote:
        try:
            hdfs.enable()
        except HdfsError as exc:
            _once(log, logging.WARNING, what, f"{what}: {fallback}: {exc}")
            return False
    _once(
        log,
        logging.INFO,
        what,
        f"{what}: TensorFlow opens hdfs:// itself through tfyarn's HDFS plugin",
    )
    return True


def _once(log: logging.Logger, level: int, what: str, message: str) -> None:
    with _lock:
        if what in _said:
            return
        _said.add(what)
    log.log(level, "%s", message)
