"""Write TFRecord and Parquet shards to HDFS (or local disk).

Each shard is streamed to a hidden temporary name in the target directory and
renamed into place when complete, so a reader listing ``part-*`` never sees a
half-written file, and a writer that dies leaves only a ``._tmp.*`` file behind.
Shard names sort in shard order: ``{prefix}-00003-of-00008.tfrecord``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any, TypeVar

from tfyarn.data import _framing
from tfyarn.data import fs as _fs
from tfyarn.data.fs.base import _temp_sibling

T = TypeVar("T")


def shard_name(prefix: str, index: int, count: int, suffix: str) -> str:
    """``prefix-00003-of-00008suffix``."""
    return f"{prefix}-{index:05d}-of-{count:05d}{suffix}"


def _suffix(kind: str, compression: str) -> str:
    return {"": kind, "GZIP": kind + ".gz", "ZLIB": kind + ".zlib"}[compression]


def write_tfrecord(
    url: str, records: Iterable[bytes], *, compression: str | None = ""
) -> int:
    """Write one TFRecord file atomically; returns the number of records.

    Parameters
    ----------
    url : str
        Destination (``hdfs://...`` or local path). Its directory must exist.
    records : iterable of bytes
        Serialized records (e.g. ``tf.train.Example.SerializeToString()``).
    compression : {"", "GZIP", "ZLIB", "auto"}
        ``auto`` picks by the extension of ``url``.
    """
    fs = _fs.resolve(url)
    comp = _framing.normalize_compression(compression, url)
    count = 0

    def write(out: IO[bytes]) -> None:
        nonlocal count
        writer = _framing.FrameWriter(out, compression=comp)
        for rec in records:
            writer.write(rec)
        writer.finish()
        count = writer.records

    fs.write_atomic(url, write)
    return count


def write_tfrecord_shards(
    directory: str,
    records: Sequence[bytes],
    *,
    shards: int,
    prefix: str = "part",
    compression: str = "",
) -> list[str]:
    """Split records into ``shards`` contiguous TFRecord files in ``directory``.

    Parameters
    ----------
    directory : str
        Created if missing.
    records : sequence of bytes
        All records (the split is by position, sizes differ by at most one).
    shards : int
        Number of files; at least the number of input pipelines that will read
        them.
    prefix, compression : str
        File name prefix and ``""``/``"GZIP"``/``"ZLIB"``.

    Returns
    -------
    list of str
        The URLs written, in shard order.
    """
    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    comp = _framing.normalize_compression(compression)
    fs = _fs.resolve(directory)
    fs.mkdirs(directory)
    n = len(records)
    urls = []
    for i in range(shards):
        lo, hi = i * n // shards, (i + 1) * n // shards
        url = _fs.join(
            directory, shard_name(prefix, i, shards, _suffix(".tfrecord", comp))
        )
        write_tfrecord(url, records[lo:hi], compression=comp)
        urls.append(url)
    return urls


def write_parquet(url: str, table: Any, *, row_group_size: int = 16384) -> None:
    """Write a ``pyarrow.Table`` as one Parquet file, atomically."""
    import pyarrow.parquet as pq

    def write(out: IO[bytes]) -> None:
        pq.write_table(table, out, row_group_size=row_group_size)

    _fs.resolve(url).write_atomic(url, write)


def write_parquet_shards(
    directory: str,
    table: Any,
    *,
    shards: int,
    prefix: str = "part",
    row_group_size: int = 16384,
) -> list[str]:
    """Split a ``pyarrow.Table`` (or a dict of columns) into Parquet shards.

    Fixed-length vectors (an image's pixels) should be a
    ``pyarrow.FixedSizeListArray`` column so readers know their shape.
    """
    import pyarrow as pa

    if shards < 1:
        raise ValueError(f"shards must be >= 1, got {shards}")
    if not isinstance(table, pa.Table):
        table = pa.table(table)
    fs = _fs.resolve(directory)
    fs.mkdirs(directory)
    n = table.num_rows
    urls = []
    for i in range(shards):
        lo, hi = i * n // shards, (i + 1) * n // shards
        url = _fs.join(directory, shard_name(prefix, i, shards, ".parquet"))
        write_parquet(url, table.slice(lo, hi - lo), row_group_size=row_group_size)
        urls.append(url)
    return urls


def replace_tree(target: str, fill: Callable[[str], T], *, force: bool = False) -> T:
    """Write a directory tree whole: ``fill(tmp)`` writes it, then it moves into place.

    The tree is written under a hidden sibling of ``target`` and renamed to
    ``target`` only once complete, so a reader sees the old set or the new one,
    never a mix or a part (with ``force``, ``target`` is missing for the moment
    between two renames). A failure removes what was written.

    Raises
    ------
    PathExistsError
        ``target`` exists and ``force`` is False.
    """
    fs = _fs.resolve(target)
    target = target.rstrip("/")
    exists = fs.exists(target)
    if exists and not force:
        raise _fs.PathExistsError(
            f"{target} already exists; add --force to replace it whole "
            "(its files are deleted once the new ones are complete)"
        )
    parent = target.rsplit("/", 1)[0]
    if parent and parent != target:
        fs.mkdirs(parent)
    tmp = _temp_sibling(target)
    try:
        fs.mkdirs(tmp)
        result = fill(tmp)
        if exists:
            old = _temp_sibling(target)
            fs.rename(target, old)
            fs.rename(tmp, target)
            fs.delete(old, recursive=True)
        else:
            fs.rename(tmp, target)
    except BaseException:
        with contextlib.suppress(_fs.HdfsError, OSError):
            fs.delete(tmp, recursive=True)
        raise
    return result


def put(local: str, remote: str, *, force: bool = False) -> list[str]:
    """Copy a local file or directory tree to ``remote``; never a partial result.

    A file lands at ``remote``, or inside it under its own name when ``remote``
    is an existing directory or ends in ``/`` (like ``hdfs dfs -put``); it is
    written under a temporary name and renamed into place. A directory's tree
    becomes ``remote`` itself, written whole (see :func:`replace_tree`). An
    existing destination is refused unless ``force``, which replaces it.

    Returns the URLs written (with ``remote``'s prefix).

    Raises
    ------
    FileNotFoundError
        ``local`` does not exist.
    PathExistsError
        The destination exists and ``force`` is False.
    """
    import os

    if not os.path.exists(local):
        raise FileNotFoundError(f"{local} does not exist on the local disk")
    fs = _fs.resolve(remote)
    if os.path.isdir(local):

        def copy_tree(tmp: str) -> list[str]:
            written = []
            for root, dirs, files in os.walk(local):
                dirs.sort()
                rel = os.path.relpath(root, local).replace(os.sep, "/")
                if rel != ".":
                    fs.mkdirs(_fs.join(tmp, rel))
                for name in sorted(files):
                    path = name if rel == "." else f"{rel}/{name}"
                    fs.put_file(os.path.join(root, name), _fs.join(tmp, path))
                    written.append(_fs.join(remote, path))
            return written

        return replace_tree(remote, copy_tree, force=force)
    # Like `hdfs dfs -put`: into an existing directory (or one named with a
    # trailing slash), keeping the file's name.
    if remote.endswith("/") or (fs.exists(remote) and fs.info(remote).is_dir):
        remote = _fs.join(remote, os.path.basename(local))
    if not force and fs.exists(remote):
        raise _fs.PathExistsError(f"{remote} already exists; add --force to replace it")
    parent = remote.rstrip("/").rsplit("/", 1)[0]
    if parent and parent != remote:
        fs.mkdirs(parent)
    fs.put_file(local, remote)
    return [remote]
