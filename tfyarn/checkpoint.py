"""TensorFlow checkpoints kept on HDFS, restorable in any container.

A :class:`CheckpointManager` saves and restores a ``tf.train.Checkpoint`` at an
``hdfs://`` (or ``viewfs://``, or local) directory; only the chief writes, and
every task can restore, so a job resumes after losing the container that wrote
its checkpoints.

Where tfyarn's HDFS plugin is installed (:func:`tfyarn.hdfs.available`; tfyarn
tasks register it before the script's first line), TensorFlow's own
``tf.train.CheckpointManager`` works on the HDFS directory itself: it writes
each checkpoint under temporary names and renames it into place, then the
``checkpoint`` state file (relative paths), then deletes checkpoints beyond
``max_to_keep``; so a reader that follows the state file always finds a
complete checkpoint. An install made without cargo has no plugin, and
TensorFlow alone cannot open ``hdfs://``; there the manager falls back to
saving locally and copying (:mod:`tfyarn._mirror.checkpoints`: the files of a
checkpoint first, the state file last). The first manager logs which way it
goes.

The TF1 helpers :func:`download_latest`, :func:`upload_latest` and
:func:`saver_listener` copy a ``Saver``'s local checkpoint directory to and
from HDFS (with the plugin, a ``Saver`` can save to ``hdfs://`` itself).

Examples
--------
>>> ckpt = tf.train.Checkpoint(model=model, optimizer=opt, step=step)  # doctest: +SKIP
>>> manager = tfyarn.checkpoint.CheckpointManager(
...     ckpt, "hdfs:///user/me/run1/ckpt", max_to_keep=3)  # doctest: +SKIP
>>> manager.restore_or_initialize()  # doctest: +SKIP
>>> manager.save()  # doctest: +SKIP
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from tfyarn._checkpoint_files import STATE_FILE, checkpoint_prefix, require_complete
from tfyarn._mirror.checkpoints import (
    MirroredCheckpoints,
    download_latest,
    saver_listener,
    upload_latest,
)
from tfyarn.data import _hdfs_route
from tfyarn.data import fs as _fs
from tfyarn.errors import HdfsError

__all__ = [
    "STATE_FILE",
    "CheckpointManager",
    "HdfsError",
    "checkpoint_callback",
    "download_latest",
    "is_chief",
    "saver_listener",
    "upload_latest",
]

log = logging.getLogger(__name__)

_T = TypeVar("_T")


def is_chief(tf_config: str | None = None) -> bool:
    """Whether this task writes checkpoints: the ``chief``, or ``worker`` 0 in a
    cluster without a chief, or any process outside a cluster."""
    raw = os.environ.get("TF_CONFIG", "") if tf_config is None else tf_config
    if not raw.strip():
        return True
    config = json.loads(raw)
    cluster = config.get("cluster", {}) or {}
    task = config.get("task", {}) or {}
    role, index = task.get("type", ""), int(task.get("index", 0))
    if role == "chief":
        return True
    return role == "worker" and index == 0 and not cluster.get("chief")


class _Store(Protocol):
    """Where the chief's checkpoints live; one per route (plugin or mirror)."""

    def latest(self) -> str | None: ...
    def fetch(self, prefix: str) -> str: ...
    def reload(self) -> None: ...
    def kept(self) -> list[str]: ...
    def save(self, checkpoint_number: Any = None) -> str: ...


def _tf_io(what: str, url: str, call: Callable[[], _T]) -> _T:
    """``call()``, with TensorFlow's I/O errors raised as :class:`HdfsError`."""
    import tensorflow as tf

    try:
        return call()
    except tf.errors.OpError as exc:
        raise HdfsError(f"cannot {what} {url}: {exc.message}") from exc


class _TensorFlowCheckpoints:
    """The checkpoint directory opened by TensorFlow itself (the plugin's route).

    ``tf.train.get_checkpoint_state`` takes an unreadable state file for no
    checkpoint at all; here it is an error, so that a job whose NameNode is
    unreachable does not start over and overwrite its checkpoints.
    """

    def __init__(
        self,
        checkpoint: Any,
        directory: str,
        *,
        max_to_keep: int,
        checkpoint_name: str,
        chief: bool,
    ) -> None:
        import tensorflow as tf

        self.checkpoint = checkpoint
        self.directory = directory
        self.max_to_keep = max_to_keep
        self.checkpoint_name = checkpoint_name
        if chief:
            _tf_io("create", directory, lambda: tf.io.gfile.makedirs(directory))
        self.latest()  # fails now, not at the first save, if HDFS cannot be read
        self.reload()

    def reload(self) -> None:
        """A new manager, reading the state file (it prunes what that lists)."""
        import tensorflow as tf

        self._manager = tf.train.CheckpointManager(
            self.checkpoint,
            self.directory,
            max_to_keep=self.max_to_keep,
            checkpoint_name=self.checkpoint_name,
        )

    def latest(self) -> str | None:
        """The newest checkpoint's prefix (``ckpt-12``), or ``None``."""
        import tensorflow as tf

        state_file = _fs.join(self.directory, STATE_FILE)
        if not _tf_io("read", state_file, lambda: tf.io.gfile.exists(state_file)):
            return None
        state = tf.train.get_checkpoint_state(self.directory)
        if state is None:
            raise HdfsError(
                f"cannot read {state_file} (TensorFlow's log above says why). "
                "Check HDFS, or delete the file to start over."
            )
        if not state.model_checkpoint_path:
            return None
        return os.path.basename(state.model_checkpoint_path)

    def fetch(self, prefix: str) -> str:
        """Check that checkpoint ``prefix`` is complete; the path to restore from."""
        import tensorflow as tf

        pattern = _fs.join(self.directory, prefix + ".*")
        names = [
            name
            for name in (
                p.rsplit("/", 1)[-1]
                for p in _tf_io("list", pattern, lambda: tf.io.gfile.glob(pattern))
            )
            if checkpoint_prefix(name) == prefix
        ]
        require_complete(self.directory, prefix, names)
        return _fs.join(self.directory, prefix)

    def kept(self) -> list[str]:
        """Prefixes of the kept checkpoints, oldest first."""
        return [os.path.basename(p) for p in self._manager.checkpoints]

    def save(self, checkpoint_number: Any = None) -> str:
        """Save (state file last, then pruning); the prefix saved."""
        return os.path.basename(self._manager.save(checkpoint_number=checkpoint_number))


class CheckpointManager:
    """Save and restore a ``tf.train.Checkpoint`` at an HDFS (or local) URL.

    Through TensorFlow and tfyarn's HDFS plugin where it is installed; without
    the plugin through a local working copy that is uploaded (see the module
    docstring).

    Parameters
    ----------
    checkpoint : tf.train.Checkpoint
        What to save.
    directory : str
        ``hdfs://.../ckpt`` (also ``viewfs://`` or a local path).
    max_to_keep : int
        Checkpoints kept.
    checkpoint_name : str
        File name prefix (``ckpt`` gives ``ckpt-1.index`` ...).
    local_dir : str, optional
        The local working copy of the fallback without the plugin (default: a
        fresh temporary directory). With the plugin nothing is written there
        (a directory given is still created).
    chief : bool, optional
        Whether this task writes (default: :func:`is_chief` from ``TF_CONFIG``).

    Raises
    ------
    HdfsError
        The remote directory cannot be read or created.
    """

    def __init__(
        self,
        checkpoint: Any,
        directory: str,
        *,
        max_to_keep: int = 5,
        checkpoint_name: str = "ckpt",
        local_dir: str | None = None,
        chief: bool | None = None,
    ) -> None:
        self.checkpoint = checkpoint
        self.directory = directory.rstrip("/")
        self.max_to_keep = max_to_keep
        self.checkpoint_name = checkpoint_name
        self.chief = is_chief() if chief is None else chief
        self.local_dir = local_dir
        self._store: _Store
        if _hdfs_route.use_plugin(
            self.directory,
            what="tfyarn.checkpoint",
            fallback="checkpoints are saved locally, then copied to HDFS",
            log=log,
        ):
            if local_dir:
                os.makedirs(local_dir, exist_ok=True)
            self._store = _TensorFlowCheckpoints(
                checkpoint,
                self.directory,
                max_to_keep=max_to_keep,
                checkpoint_name=checkpoint_name,
                chief=self.chief,
            )
        else:
            mirror = MirroredCheckpoints(
                checkpoint,
                self.directory,
                max_to_keep=max_to_keep,
                checkpoint_name=checkpoint_name,
                local_dir=local_dir,
                chief=self.chief,
            )
            self.local_dir = mirror.local_dir
            self._store = mirror

    @property
    def mirrored(self) -> bool:
        """Whether checkpoints go through a local copy (the fallback without the plugin)."""
        return isinstance(self._store, MirroredCheckpoints)

    def _remote(self, name: str) -> str:
        return _fs.join(self.directory, name)

    # -- reading ------------------------------------------------------------------

    def latest_checkpoint(self) -> str | None:
        """URL prefix of the newest complete remote checkpoint, or ``None``."""
        prefix = self._store.latest()
        return None if prefix is None else self._remote(prefix)

    def restore(self, *, expect_partial: bool = False) -> str | None:
        """Restore the newest checkpoint.

        Returns
        -------
        str or None
            The remote prefix restored, or ``None`` if there is no checkpoint.

        Raises
        ------
        HdfsError
            The state file names a checkpoint whose files are missing.
        """
        prefix = self._store.latest()
        if prefix is None:
            return None
        status = self.checkpoint.restore(self._store.fetch(prefix))
        if expect_partial:
            status.expect_partial()
        # Re-read the state so this manager continues numbering after it.
        self._store.reload()
        log.info("restored %s", self._remote(prefix))
        return self._remote(prefix)

    def restore_or_initialize(self) -> str | None:
        """Restore the newest checkpoint if there is one; ``None`` otherwise."""
        return self.restore()

    @property
    def checkpoints(self) -> list[str]:
        """Remote URL prefixes of the kept checkpoints, oldest first."""
        return [self._remote(p) for p in self._store.kept()]

    # -- writing ------------------------------------------------------------------

    def save(self, checkpoint_number: Any = None) -> str | None:
        """Save a checkpoint; only the chief's reaches the directory.

        Every task of a MultiWorkerMirroredStrategy job must call this (saving
        may run collective ops); non-chiefs write to a scratch directory that is
        deleted again.

        Returns
        -------
        str or None
            The remote prefix written (chief), or ``None`` (others).
        """
        if not self.chief:
            import tensorflow as tf

            scratch = tempfile.mkdtemp(prefix="tfyarn-ckpt-scratch-")
            try:
                tf.train.CheckpointManager(
                    self.checkpoint,
                    scratch,
                    max_to_keep=self.max_to_keep,
                    checkpoint_name=self.checkpoint_name,
                ).save(checkpoint_number=checkpoint_number)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            return None
        prefix = self._store.save(checkpoint_number)
        log.info("saved %s", self._remote(prefix))
        return self._remote(prefix)


def checkpoint_callback(
    directory: str,
    *,
    checkpoint: Any = None,
    max_to_keep: int = 5,
    save_freq: str | int = "epoch",
    restore: bool = True,
    chief: bool | None = None,
) -> Any:
    """A Keras callback that keeps checkpoints at ``directory`` (``hdfs://``).

    Parameters
    ----------
    directory : str
        Remote checkpoint directory.
    checkpoint : tf.train.Checkpoint, optional
        Default: ``tf.train.Checkpoint(model=model, optimizer=model.optimizer)``.
    max_to_keep : int
        Checkpoints kept.
    save_freq : "epoch" or int
        Save at each epoch end, or every N training batches.
    restore : bool
        Restore the newest checkpoint when training begins.
    chief : bool, optional
        Whether this task writes (default from ``TF_CONFIG``).

    Returns
    -------
    keras.callbacks.Callback
        Built on ``tf.keras`` (Keras 3, or tf-keras with ``TF_USE_LEGACY_KERAS=1``).

    Examples
    --------
    >>> model.fit(ds, epochs=3, callbacks=[
    ...     tfyarn.checkpoint.checkpoint_callback("hdfs:///user/me/run1/ckpt")])
    ... # doctest: +SKIP
    """
    import tensorflow as tf

    base = tf.keras.callbacks.Callback

    class HdfsCheckpoint(base):  # type: ignore[misc,valid-type]
        def __init__(self) -> None:
            super().__init__()
            self.manager: CheckpointManager | None = None
            self._batches = 0

        def _ensure(self) -> CheckpointManager:
            if self.manager is None:
                ckpt = checkpoint or tf.train.Checkpoint(
                    model=self.model, optimizer=self.model.optimizer
                )
                self.manager = CheckpointManager(
                    ckpt, directory, max_to_keep=max_to_keep, chief=chief
                )
            return self.manager

        def on_train_begin(self, logs: Any = None) -> None:
            manager = self._ensure()
            if restore:
                manager.restore(expect_partial=True)

        def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
            self._batches += 1
            if isinstance(save_freq, int) and self._batches % save_freq == 0:
                self._ensure().save()

        def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
            if save_freq == "epoch":
                self._ensure().save()

    return HdfsCheckpoint()
