"""TensorBoard logs on HDFS: write event files locally, mirror them to HDFS.

:class:`LogSync` gives a local directory to write summaries to and copies every
new or grown file under it to the HDFS log directory from a background thread
every ``interval`` seconds, plus once more on :meth:`LogSync.close`. Each copy
replaces the remote file atomically (temporary name, rename), so a TensorBoard
reading the HDFS directory sees a live job, always with whole files.

It copies even where tfyarn's HDFS plugin lets TensorFlow's summary writers
open ``hdfs://`` themselves, because of how a file still being written reads.
A summary writer keeps its event file open for the whole run; the NameNode's
block list of an open file leaves out the block being written, and hdfs-native
(under the plugin and the master's TensorBoard mirror) reads a file only as far
as that list goes, where Hadoop's Java client asks a DataNode for the rest. So
an event file written straight to HDFS reads only as far as its completed
blocks (none below the 128 MiB default block size) until the writer closes it,
and TensorBoard would show nothing of a live job. A script may still write summaries to ``hdfs://`` through the
plugin when seeing them after the writer closes is enough.

Examples
--------
>>> with tfyarn.tensorboard.LogSync("hdfs:///user/me/run1/logs") as logs:
...     writer = tf.summary.create_file_writer(logs.local_dir)
...     ...  # train, writing summaries
... # doctest: +SKIP
>>> model.fit(ds, callbacks=[tfyarn.tensorboard.keras_callback(
...     "hdfs:///user/me/run1/logs")])  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
from typing import Any

from tfyarn.data import fs as _fs
from tfyarn.errors import HdfsError, TfyarnError

log = logging.getLogger(__name__)


class LogSync:
    """Mirror a local log directory to a remote one, periodically and at the end.

    Parameters
    ----------
    remote_dir : str
        ``hdfs://...`` (or local) destination; created.
    local_dir : str, optional
        Where summaries are written (default: a new temporary directory).
    interval : float
        Seconds between syncs.
    start : bool
        Start the background thread now.
    """

    def __init__(
        self,
        remote_dir: str,
        *,
        local_dir: str | None = None,
        interval: float = 30.0,
        start: bool = True,
    ) -> None:
        self.remote_dir = remote_dir.rstrip("/")
        self.local_dir = local_dir or tempfile.mkdtemp(prefix="tfyarn-tb-")
        os.makedirs(self.local_dir, exist_ok=True)
        self.interval = interval
        self._fs = _fs.resolve(self.remote_dir)
        self._fs.mkdirs(self.remote_dir)
        self._synced: dict[str, tuple[int, int]] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self.last_error: Exception | None = None
        if start:
            self.start()

    def start(self) -> None:
        """Start the background sync thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="tfyarn-tensorboard-sync", daemon=True
            )
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sync()
            except HdfsError as exc:
                # Keep training; retry next round, and say so once per error.
                if str(exc) != str(self.last_error):
                    log.warning("TensorBoard log sync failed (will retry): %s", exc)
                self.last_error = exc

    def sync(self) -> int:
        """Copy new or changed files now; returns how many were copied."""
        with self._lock:
            copied = 0
            made: set[str] = set()
            for root, dirs, files in os.walk(self.local_dir):
                dirs.sort()
                rel = os.path.relpath(root, self.local_dir)
                remote_root = (
                    self.remote_dir
                    if rel == "."
                    else _fs.join(self.remote_dir, rel.replace(os.sep, "/"))
                )
                for name in sorted(files):
                    path = os.path.join(root, name)
                    try:
                        st = os.stat(path)
                    except FileNotFoundError:
                        continue
                    key = (st.st_size, st.st_mtime_ns)
                    if self._synced.get(path) == key:
                        continue
                    if remote_root not in made:
                        self._fs.mkdirs(remote_root)
                        made.add(remote_root)
                    self._fs.put_file(path, _fs.join(remote_root, name))
                    self._synced[path] = key
                    copied += 1
            return copied

    def close(self) -> None:
        """Stop the thread and do a final sync (raises if that sync fails)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 60)
        self.sync()

    def __enter__(self) -> LogSync:  # noqa: PYI034 (py3.10: no typing.Self)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def keras_callback(
    remote_dir: str, *, interval: float = 30.0, **tensorboard_kwargs: Any
) -> Any:
    """A Keras ``TensorBoard`` callback whose logs are mirrored to ``remote_dir``.

    Extra keyword arguments go to ``tf.keras.callbacks.TensorBoard``. The sync
    starts with training and flushes when training ends.

    Raises
    ------
    TfyarnError
        If the ``tensorboard`` package is missing: Keras' callback writes its
        summaries through it (``tf.summary.write`` alone does not need it).
    """
    import importlib.util

    import tensorflow as tf

    if importlib.util.find_spec("tensorboard") is None:
        raise TfyarnError(
            "the Keras TensorBoard callback needs the 'tensorboard' package, which "
            "is not installed: pip install tensorboard (or write summaries with "
            "tf.summary.write into LogSync(...).local_dir)"
        )
    sync = LogSync(remote_dir, interval=interval, start=False)

    class SyncedTensorBoard(tf.keras.callbacks.TensorBoard):
        def on_train_begin(self, logs: Any = None) -> None:
            super().on_train_begin(logs)
            sync.start()

        def on_train_end(self, logs: Any = None) -> None:
            super().on_train_end(logs)
            sync.close()

    callback = SyncedTensorBoard(log_dir=sync.local_dir, **tensorboard_kwargs)
    callback.log_sync = sync
    return callback
