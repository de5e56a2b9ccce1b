"""Copy this task's shard of files to local disk: the ParameterServerStrategy path.

Under ParameterServerStrategy the coordinator traces the dataset function once
and every worker runs that graph; a Python generator inside it does not run on
the workers (TF 2.21 places it on the coordinator, which crashed when we tried).
And TensorFlow's own readers cannot open ``hdfs://``. So a PS worker, *before it
starts its TensorFlow server*, copies its own share of the files (chosen from its
``TF_CONFIG``) into a directory relative to its working directory; the dataset
function the coordinator builds lists that *relative* directory, which each
worker resolves in its own container at run time, and reads it with
TensorFlow's native ``TFRecordDataset``.

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

import os
from collections.abc import Callable
from typing import Any

from tfyarn.data import fs as _fs
from tfyarn.data.sharding import Shard, shard_files

#: Relative to each worker's working directory (its YARN container directory).
STAGE_ROOT = "tfyarn_data"


def stage_dir(name: str) -> str:
    """The relative directory a staged data set ``name`` lives in."""
    if not name or "/" in name or name.startswith("."):
        raise ValueError(f"stage name must be a plain directory name, got {name!r}")
    return os.path.join(STAGE_ROOT, name)


def stage_shard(
    pattern: str | list[str],
    name: str,
    *,
    shard: Shard | None = None,
    input_context: Any = None,
) -> list[str]:
    """Copy this task's share of ``pattern`` to ``./tfyarn_data/<name>/``.

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
        Local paths of the staged files (keeping their names, so their order is
        the sorted order of the originals).
    """
    files = shard_files(pattern, shard=shard, input_context=input_context)
    target = stage_dir(name)
    os.makedirs(target, exist_ok=True)
    out = []
    for url in files:
        local = os.path.join(target, url.rstrip("/").rsplit("/", 1)[-1])
        _fs.resolve(url).get_file(url, local)
        out.append(local)
    return out


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

    It reads the worker-local files staged by :func:`stage_shard` with
    TensorFlow's native reader, so it runs entirely on the worker.

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
    pattern = os.path.join(stage_dir(name), "*")

    def dataset_fn() -> Any:
        import tensorflow as tf

        # matching_files runs on the worker, so it sees that worker's files.
        files = tf.io.matching_files(pattern)
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
