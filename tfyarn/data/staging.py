"""Each ParameterServerStrategy worker reads its own shard of the files.

Under ParameterServerStrategy the coordinator traces the dataset function once
and every worker runs that graph, with no ``InputContext`` naming the worker;
and a Python generator inside it does not run on the workers (TF 2.21 places
it on the coordinator, which crashed when we tried). So a PS worker, *before it
starts its TensorFlow server*, picks its own share of the files from its
``TF_CONFIG`` (:func:`stage_shard`) and writes their list to a file relative to
its working directory (its YARN container directory); the dataset function the
coordinator builds (:func:`per_worker_dataset_fn`) reads that *relative* list,
which each worker resolves in its own container at run time, and the files in
it with TensorFlow's native ``TFRecordDataset``.

Where tfyarn's HDFS plugin is installed (tfyarn tasks register it before the
script's first line), the list holds the ``hdfs://`` URLs and TensorFlow reads
HDFS itself: nothing is copied. An install made without cargo has no plugin,
and TensorFlow alone cannot open ``hdfs://``; there each worker first copies
its files to ``./tfyarn_data/<name>/`` (:func:`copy_files`) and the
list holds the copies. The first call logs which way it goes.

Worker side::

    if role == "worker":
        tfyarn.data.stage_shard("hdfs:///data/digits/train-*", "train")
        server.join()

Coordinator side::

    dataset_fn = tfyarn.data.per_worker_dataset_fn("train", batch_size=64,
                                                   map_fn=parse_digits)
    per_worker = coordinator.create_per_worker_dataset(dataset_fn)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from tfyarn.data import _hdfs_route
from tfyarn.data import fs as _fs
from tfyarn.data.sharding import Shard, shard_files

log = logging.getLogger(__name__)

#: Relative to each worker's working directory (its YARN container directory).
STAGE_ROOT = "tfyarn_data"


def stage_dir(name: str) -> str:
    """The relative directory a data set ``name``'s copies live in (without the plugin)."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"stage name must be a plain directory name, got {name!r}")
    return os.path.join(STAGE_ROOT, name)


def file_list(name: str) -> str:
    """The relative file listing what a worker reads of data set ``name``."""
    return stage_dir(name) + ".files"


def _write_list(path: str, files: list[str]) -> None:
    """One file a line, replaced whole (a restarted worker rewrites it)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as out:
        out.write("\n".join(files))
    os.replace(tmp, path)


def stage_shard(
    pattern: str | list[str],
    name: str,
    *,
    shard: Shard | None = None,
    input_context: Any = None,
) -> list[str]:
    """Make this task's share of ``pattern`` what :func:`per_worker_dataset_fn` reads.

    With tfyarn's HDFS plugin the files stay where they are; without it they
    are copied to ``./tfyarn_data/<name>/``.

    Parameters
    ----------
    pattern : str or list of str
        Files to shard (see :func:`tfyarn.data.shard_files`).
    name : str
        Local data set name; the coordinator's dataset function uses the same.
    shard, input_context
        Override the shard (default: from ``TF_CONFIG``).

    Returns
    -------
    list of str
        The files to read, in sorted order: the URLs themselves with the
        plugin, else the local copies (keeping their names). Either way
        ``tf.data.TFRecordDataset`` opens them in this process.
    """
    target = stage_dir(name)
    files = shard_files(pattern, shard=shard, input_context=input_context)
    if not _hdfs_route.use_plugin(
        files,
        what="tfyarn.data staging",
        fallback="each worker copies its files to local disk",
        log=log,
    ):
        files = copy_files(files, target)
    _write_list(file_list(name), files)
    return files


def per_worker_dataset_fn(
    name: str,
    *,
    batch_size: int,
    map_fn: Callable[[Any], Any] | None = None,
    compression: str = "",
    shuffle_buffer: int = 0,
    repeat: bool = True,
) -> Callable[[], Any]:
    """A ``dataset_fn`` for ``ClusterCoordinator.create_per_worker_dataset``.

    It reads the files :func:`stage_shard` chose on the worker, with
    TensorFlow's native ops only, so it runs entirely on the worker.

    Parameters
    ----------
    name : str
        As given to :func:`stage_shard` on the workers.
    batch_size : int
        Per-worker batch size.
    map_fn : callable, optional
        Applied to each batch of serialized records (e.g. ``parse_digits``).
    compression : str
        ``""``, ``"GZIP"`` or ``"ZLIB"``.
    shuffle_buffer : int
        Records to shuffle over (0: no shuffle).
    repeat : bool
        Repeat forever (the usual PS pattern: the coordinator counts steps).
    """
    listing = file_list(name)

    def dataset_fn() -> Any:
        import tensorflow as tf

        # The list is read by the dataset itself, lazily, where the dataset is
        # iterated (the worker): an eager read at the function's call ran on
        # the coordinator once, which has no such file, and TensorFlow crashed.
        files = tf.data.TextLineDataset(listing).filter(
            lambda line: tf.strings.length(line) > 0
        )
        ds = tf.data.TFRecordDataset(files, compression_type=compression)
        if shuffle_buffer:
            ds = ds.shuffle(shuffle_buffer)
        if repeat:
            ds = ds.repeat()
        ds = ds.batch(batch_size, drop_remainder=True)
        if map_fn is not None:
            ds = ds.map(map_fn)
        return ds.prefetch(tf.data.AUTOTUNE)

    return dataset_fn


def copy_files(urls: list[str], target: str) -> list[str]:
    """Copy ``urls`` into the local directory ``target`` (created), keeping
    names: the fallback without the plugin.

    Returns
    -------
    list of str
        The local paths, in the order of ``urls``.
    """
    os.makedirs(target, exist_ok=True)
    out = []
    for url in urls:
        local = os.path.join(target, url.rstrip("/").rsplit("/", 1)[-1])
        _fs.resolve(url).get_file(url, local)
        out.append(local)
    return out
