"""TensorFlow checkpoints kept on HDFS (TensorFlow 2.21 cannot write ``hdfs://``).

A :class:`CheckpointManager` saves with ``tf.train.CheckpointManager`` into a
local directory, then uploads: the data files and ``.index`` of the new
checkpoint first, the ``checkpoint`` state file last, then deletes the remote
files of checkpoints the state no longer lists (``max_to_keep``). Every file is
written under a temporary name and renamed, so a reader that follows the state
file always finds a complete checkpoint, whenever it looks. Restoring downloads
the state file and the newest checkpoint's files, then restores from the local
copy; since CheckpointManager writes relative paths in the state file, the
directory restores in any container. Only the chief uploads; other tasks save
to a scratch directory (MultiWorkerMirroredStrategy needs every worker to take
part in ``save``) and read from HDFS.

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
from typing import Any

from tfyarn.data import fs as _fs
from tfyarn.errors import HdfsError

log = logging.getLogger(__name__)

STATE_FILE = "checkpoint"


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


def _checkpoint_prefix(name: str) -> str | None:
    """``ckpt-12`` for ``ckpt-12.index`` / ``ckpt-12.data-00000-of-00001``."""
    if name.endswith(".index"):
        return name[: -len(".index")]
    if ".data-" in name:
        return name.split(".data-", 1)[0]
    if name.endswith(".meta"):  # TF1 Saver's graph, part of its checkpoint
        return name[: -len(".meta")]
    return None


def _download_checkpoint(fs: Any, directory: str, prefix: str, local_dir: str) -> None:
    """Copy one checkpoint's files (data, index, a TF1 ``.meta``) into ``local_dir``.

    Refuses a checkpoint the state file names but whose index or data is missing.
    """
    infos = [
        i
        for i in fs.glob(_fs.join(directory, prefix + ".*"))
        if _checkpoint_prefix(i.url.rsplit("/", 1)[-1]) == prefix
    ]
    names = [i.url.rsplit("/", 1)[-1] for i in infos]
    if prefix + ".index" not in names or not any(".data-" in n for n in names):
        raise HdfsError(
            f"checkpoint {_fs.join(directory, prefix)} is listed in "
            f"{_fs.join(directory, STATE_FILE)} but its files are incomplete "
            f"(found {names}). Delete the state file to start over, or restore an "
            "older checkpoint by hand."
        )
    for info in infos:
        fs.get_file(info.url, os.path.join(local_dir, info.url.rsplit("/", 1)[-1]))


def _read_state(local_dir: str) -> Any:
    import tensorflow as tf

    return tf.train.get_checkpoint_state(local_dir)


class CheckpointManager:
    """Save and restore a ``tf.train.Checkpoint`` at an HDFS (or local) URL.

    Parameters
    ----------
    checkpoint : tf.train.Checkpoint
        What to save.
    directory : str
        ``hdfs://.../ckpt`` (also ``viewfs://`` or a local path).
    max_to_keep : int
        Checkpoints kept, locally and remotely.
    checkpoint_name : str
        File name prefix (``ckpt`` gives ``ckpt-1.index`` ...).
    local_dir : str, optional
        Local working copy (default: a fresh temporary directory).
    chief : bool, optional
        Whether this task uploads (default: :func:`is_chief` from ``TF_CONFIG``).

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
        self._fs = _fs.resolve(self.directory)
        self.local_dir = local_dir or tempfile.mkdtemp(prefix="tfyarn-ckpt-")
        os.makedirs(self.local_dir, exist_ok=True)
        if self.chief:
            self._fs.mkdirs(self.directory)
        # The local manager must see the remote state when it starts, so that
        # max_to_keep prunes the checkpoints an earlier container wrote.
        self._download_state()
        self._manager = self._new_manager(self.local_dir)

    def _new_manager(self, directory: str) -> Any:
        import tensorflow as tf

        return tf.train.CheckpointManager(
            self.checkpoint,
            directory,
            max_to_keep=self.max_to_keep,
            checkpoint_name=self.checkpoint_name,
        )

    def _remote(self, name: str) -> str:
        return _fs.join(self.directory, name)

    def _download_state(self) -> bool:
        remote = self._remote(STATE_FILE)
        if not self._fs.exists(remote):
            return False
        self._fs.get_file(remote, os.path.join(self.local_dir, STATE_FILE))
        return True

    # -- reading ------------------------------------------------------------------

    def latest_checkpoint(self) -> str | None:
        """URL prefix of the newest complete remote checkpoint, or ``None``."""
        if not self._download_state():
            return None
        state = _read_state(self.local_dir)
        if state is None or not state.model_checkpoint_path:
            return None
        return self._remote(os.path.basename(state.model_checkpoint_path))

    def restore(self, *, expect_partial: bool = False) -> str | None:
        """Download and restore the newest remote checkpoint.

        Returns
        -------
        str or None
            The remote prefix restored, or ``None`` if there is no checkpoint.

        Raises
        ------
        HdfsError
            The state file names a checkpoint whose files are missing.
        """
        latest = self.latest_checkpoint()
        if latest is None:
            return None
        prefix = latest.rsplit("/", 1)[-1]
        _download_checkpoint(self._fs, self.directory, prefix, self.local_dir)
        status = self.checkpoint.restore(os.path.join(self.local_dir, prefix))
        if expect_partial:
            status.expect_partial()
        # Re-read the state so this manager continues numbering after it.
        self._manager = self._new_manager(self.local_dir)
        log.info("restored %s", latest)
        return latest

    def restore_or_initialize(self) -> str | None:
        """Restore the newest checkpoint if there is one; ``None`` otherwise."""
        return self.restore()

    @property
    def checkpoints(self) -> list[str]:
        """Remote URL prefixes of the kept checkpoints, oldest first."""
        return [self._remote(os.path.basename(p)) for p in self._manager.checkpoints]

    # -- writing ------------------------------------------------------------------

    def save(self, checkpoint_number: Any = None) -> str | None:
        """Save a checkpoint and, on the chief, upload it (state file last).

        Every task of a MultiWorkerMirroredStrategy job must call this (saving
        may run collective ops); non-chiefs write to a scratch directory that is
        deleted again.

        Returns
        -------
        str or None
            The remote prefix written (chief), or ``None`` (others).
        """
        if not self.chief:
            scratch = tempfile.mkdtemp(prefix="tfyarn-ckpt-scratch-")
            try:
                self._new_manager(scratch).save(checkpoint_number=checkpoint_number)
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
            return None
        path = self._manager.save(checkpoint_number=checkpoint_number)
        prefix = os.path.basename(path)
        files = sorted(
            n for n in os.listdir(self.local_dir) if _checkpoint_prefix(n) == prefix
        )
        # Data before index: the .index file says the data is complete.
        files.sort(key=lambda n: n.endswith(".index"))
        for name in files:
            self._fs.put_file(os.path.join(self.local_dir, name), self._remote(name))
        # The state file last: from now on readers see the new checkpoint.
        self._fs.put_file(
            os.path.join(self.local_dir, STATE_FILE), self._remote(STATE_FILE)
        )
        self._prune_remote()
        log.info("saved %s", self._remote(prefix))
        return self._remote(prefix)

    def _prune_remote(self) -> None:
        keep = {os.path.basename(p) for p in self._manager.checkpoints}
        for info in self._fs.ls(self.directory):
            name = info.url.rsplit("/", 1)[-1]
            prefix = _checkpoint_prefix(name)
            if (
                prefix is not None
                and prefix.startswith(self.checkpoint_name + "-")
                and prefix not in keep
            ):
                self._fs.delete(info.url)


# -- TF1: a Saver's local directory mirrored to HDFS -----------------------------


def download_latest(directory: str, local_dir: str) -> str | None:
    """Copy the newest checkpoint at ``directory`` into ``local_dir``.

    For TF1 programs whose ``Saver`` / ``MonitoredTrainingSession`` restores
    from a local ``checkpoint_dir``: call this before the session starts.

    Parameters
    ----------
    directory : str
        Remote directory written by :func:`upload_latest` (``hdfs://...``).
    local_dir : str
        Local directory (created).

    Returns
    -------
    str or None
        Local prefix of the checkpoint copied, or ``None`` if there is none yet.

    Raises
    ------
    HdfsError
        The remote state file names a checkpoint whose files are missing.
    """
    fs = _fs.resolve(directory)
    state_url = _fs.join(directory, STATE_FILE)
    if not fs.exists(state_url):
        return None
    os.makedirs(local_dir, exist_ok=True)
    fs.get_file(state_url, os.path.join(local_dir, STATE_FILE))
    state = _read_state(local_dir)
    if state is None or not state.model_checkpoint_path:
        return None
    prefix = os.path.basename(state.model_checkpoint_path)
    _download_checkpoint(fs, directory, prefix, local_dir)
    # Only the newest checkpoint came along: the state file must say so, or a
    # local Saver would try to prune files that are not here.
    _write_state(local_dir, [prefix])
    return os.path.join(local_dir, prefix)


def upload_latest(local_dir: str, directory: str) -> str | None:
    """Upload the newest checkpoint of ``local_dir`` to ``directory``.

    Data, ``.meta`` and ``.index`` files first, then a ``checkpoint`` state
    file with relative paths (so it restores in any container), then remote
    checkpoints the local state no longer lists are deleted.

    Returns
    -------
    str or None
        Remote prefix uploaded, or ``None`` if ``local_dir`` holds no checkpoint.
    """
    state = _read_state(local_dir)
    if state is None or not state.model_checkpoint_path:
        return None
    keep = [os.path.basename(p) for p in state.all_model_checkpoint_paths]
    prefix = os.path.basename(state.model_checkpoint_path)
    if prefix not in keep:
        keep.append(prefix)
    fs = _fs.resolve(directory)
    fs.mkdirs(directory)
    files = sorted(n for n in os.listdir(local_dir) if _checkpoint_prefix(n) == prefix)
    files.sort(key=lambda n: n.endswith(".index"))  # the index says "complete"
    for name in files:
        fs.put_file(os.path.join(local_dir, name), _fs.join(directory, name))
    scratch = tempfile.mkdtemp(prefix="tfyarn-ckpt-state-")
    try:
        _write_state(scratch, keep)
        fs.put_file(os.path.join(scratch, STATE_FILE), _fs.join(directory, STATE_FILE))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for info in fs.ls(directory):
        old = _checkpoint_prefix(info.url.rsplit("/", 1)[-1])
        if old is not None and old not in keep:
            fs.delete(info.url)
    log.info("uploaded %s", _fs.join(directory, prefix))
    return _fs.join(directory, prefix)


def _write_state(local_dir: str, prefixes: list[str]) -> None:
    """A ``checkpoint`` state file listing ``prefixes`` (newest last), relative."""
    import tensorflow as tf

    tf.compat.v1.train.update_checkpoint_state(
        local_dir, prefixes[-1], all_model_checkpoint_paths=prefixes
    )


def saver_listener(directory: str, local_dir: str) -> Any:
    """A ``CheckpointSaverListener`` that uploads each new checkpoint.

    Pass it to a ``tf.compat.v1.train.CheckpointSaverHook`` saving into
    ``local_dir`` (on the chief); each save, and the hook's final one, is then
    copied to ``directory`` with :func:`upload_latest`.

    Examples
    --------
    >>> hook = tf.compat.v1.train.CheckpointSaverHook(
    ...     local_dir, save_steps=100, saver=saver,
    ...     listeners=[saver_listener("hdfs:///ckpt", local_dir)])  # doctest: +SKIP
    """
    import tensorflow as tf

    class Upload(tf.compat.v1.train.CheckpointSaverListener):
        def after_save(self, session: Any, global_step_value: Any) -> None:
            upload_latest(local_dir, directory)

    return Upload()


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
        Whether this task uploads (default from ``TF_CONFIG``).

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
