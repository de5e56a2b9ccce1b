"""Checkpoints saved on local disk and copied to HDFS: the fallback without the plugin.

:class:`MirroredCheckpoints` is what ``tfyarn.checkpoint.CheckpointManager``
uses where tfyarn's HDFS plugin is not installed. It saves with
``tf.train.CheckpointManager`` into a local directory, then uploads: the data
files and ``.index`` of the new checkpoint first, the ``checkpoint`` state file
last, then deletes the remote files of checkpoints the state no longer lists
(``max_to_keep``). Every file is written under a temporary name and renamed,
so a reader that follows the state file always finds a complete checkpoint,
whenever it looks. Restoring downloads the state file and the newest
checkpoint's files, then restores from the local copy; since
CheckpointManager writes relative paths in the state file, the directory
restores in any container.

The TF1 helpers (:func:`download_latest`, :func:`upload_latest`,
:func:`saver_listener`) copy a ``Saver``'s local directory the same way, for
TF1 programs that save and restore locally.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from typing import Any

from tfyarn._checkpoint_files import STATE_FILE, checkpoint_prefix, require_complete
from tfyarn.data import fs as _fs

log = logging.getLogger("tfyarn.checkpoint")


def _read_state(local_dir: str) -> Any:
    import tensorflow as tf

    return tf.train.get_checkpoint_state(local_dir)


def _download_checkpoint(fs: Any, directory: str, prefix: str, local_dir: str) -> None:
    """Copy one checkpoint's files (data, index, a TF1 ``.meta``) into ``local_dir``.

    Refuses a checkpoint the state file names but whose index or data is missing.
    """
    infos = [
        i
        for i in fs.glob(_fs.join(directory, prefix + ".*"))
        if checkpoint_prefix(i.url.rsplit("/", 1)[-1]) == prefix
    ]
    require_complete(directory, prefix, [i.url.rsplit("/", 1)[-1] for i in infos])
    for info in infos:
        fs.get_file(info.url, os.path.join(local_dir, info.url.rsplit("/", 1)[-1]))


def _upload_order(local_dir: str, prefix: str) -> list[str]:
    """The files of checkpoint ``prefix`` in ``local_dir``, the ``.index`` last:
    the index says the data is complete."""
    files = sorted(n for n in os.listdir(local_dir) if checkpoint_prefix(n) == prefix)
    files.sort(key=lambda n: n.endswith(".index"))
    return files


class MirroredCheckpoints:
    """A remote checkpoint directory through a local working copy.

    Parameters
    ----------
    checkpoint : tf.train.Checkpoint
        What to save.
    directory : str
        The remote directory (``hdfs://``, ``viewfs://`` or local).
    max_to_keep : int
        Checkpoints kept, locally and remotely.
    checkpoint_name : str
        File name prefix.
    local_dir : str, optional
        The working copy (default: a fresh temporary directory).
    chief : bool
        Whether this task creates the remote directory.

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
        max_to_keep: int,
        checkpoint_name: str,
        local_dir: str | None,
        chief: bool,
    ) -> None:
        self.checkpoint = checkpoint
        self.directory = directory
        self.max_to_keep = max_to_keep
        self.checkpoint_name = checkpoint_name
        self._fs = _fs.resolve(directory)
        self.local_dir = local_dir or tempfile.mkdtemp(prefix="tfyarn-ckpt-")
        os.makedirs(self.local_dir, exist_ok=True)
        if chief:
            self._fs.mkdirs(directory)
        # The local manager must see the remote state when it starts, so that
        # max_to_keep prunes the checkpoints an earlier container wrote.
        self._download_state()
        self.reload()

    def reload(self) -> None:
        """A new local manager, reading the (downloaded) state file."""
        import tensorflow as tf

        self._manager = tf.train.CheckpointManager(
            self.checkpoint,
            self.local_dir,
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

    def latest(self) -> str | None:
        """The newest remote checkpoint's prefix (``ckpt-12``), or ``None``."""
        if not self._download_state():
            return None
        state = _read_state(self.local_dir)
        if state is None or not state.model_checkpoint_path:
            return None
        return os.path.basename(state.model_checkpoint_path)

    def fetch(self, prefix: str) -> str:
        """Download checkpoint ``prefix``; the local path to restore from."""
        _download_checkpoint(self._fs, self.directory, prefix, self.local_dir)
        return os.path.join(self.local_dir, prefix)

    def kept(self) -> list[str]:
        """Prefixes of the kept checkpoints, oldest first."""
        return [os.path.basename(p) for p in self._manager.checkpoints]

    def save(self, checkpoint_number: Any = None) -> str:
        """Save locally, upload (state file last), prune; the prefix saved."""
        prefix = os.path.basename(
            self._manager.save(checkpoint_number=checkpoint_number)
        )
        for name in _upload_order(self.local_dir, prefix):
            self._fs.put_file(os.path.join(self.local_dir, name), self._remote(name))
        # The state file last: from now on readers see the new checkpoint.
        self._fs.put_file(
            os.path.join(self.local_dir, STATE_FILE), self._remote(STATE_FILE)
        )
        self._prune_remote()
        return prefix

    def _prune_remote(self) -> None:
        keep = set(self.kept())
        for info in self._fs.ls(self.directory):
            prefix = checkpoint_prefix(info.url.rsplit("/", 1)[-1])
            if (
                prefix is not None
                and prefix.startswith(self.checkpoint_name + "-")
                and prefix not in keep
            ):
                self._fs.delete(info.url)


# -- TF1: a Saver's local directory, copied to and from HDFS ----------------------


def download_latest(directory: str, local_dir: str) -> str | None:
    """Copy the newest checkpoint at ``directory`` into ``local_dir``.

    For TF1 programs whose ``Saver`` / ``MonitoredTrainingSession`` restores
    from a local ``checkpoint_dir``: call this before the session starts.
    (With tfyarn's HDFS plugin a TF1 program can instead give the session the
    ``hdfs://`` directory itself.)

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
    for name in _upload_order(local_dir, prefix):
        fs.put_file(os.path.join(local_dir, name), _fs.join(directory, name))
    scratch = tempfile.mkdtemp(prefix="tfyarn-ckpt-state-")
    try:
        _write_state(scratch, keep)
        fs.put_file(os.path.join(scratch, STATE_FILE), _fs.join(directory, STATE_FILE))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for info in fs.ls(directory):
        old = checkpoint_prefix(info.url.rsplit("/", 1)[-1])
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
    copied to ``directory`` with :func:`upload_latest`. (With tfyarn's HDFS
    plugin the hook can instead save into the ``hdfs://`` directory itself.)

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
