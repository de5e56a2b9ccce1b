"""Write TFRecord and Parquet shards to HDFS (or local disk).

Each shard is streamed to a hidden temporary name in the target directory and
renamed into place when complete, so a reader listing ``part-*`` never sees a
half-written file, and a writer that dies leaves only a ``._tmp.*`` file behind.
Shard names sort in shard order: ``{prefix}-00003-of-00008.tfrecord``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import IO, Any

from tfyarn.data import _framing
from tfyarn.data import fs as _fs


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


def put(local: str, remote: str) -> list[str]:
    """Copy a local file or directory tree to ``remote``, each file atomically.

    A file put to an existing directory (or a URL ending in ``/``) lands inside
    it under its own name. Returns the URLs written; existing files are replaced.
    """
    import os

    fs = _fs.resolve(remote)
    if os.path.isdir(local):
        written = []
        for root, dirs, files in os.walk(local):
            dirs.sort()
            rel = os.path.relpath(root, local)
            target = (
                remote if rel == "." else _fs.join(remote, rel.replace(os.sep, "/"))
            )
            fs.mkdirs(target)
            for name in sorted(files):
                url = _fs.join(target, name)
                fs.put_file(os.path.join(root, name), url)
                written.append(url)
        return written
    if not os.path.exists(local):
        raise FileNotFoundError(f"{local} does not exist")
    # Like `hdfs dfs -put`: into an existing directory (or one named with a
    # trailing slash), keeping the file's name.
    if remote.endswith("/") or (fs.exists(remote) and fs.info(remote).is_dir):
        remote = _fs.join(remote, os.path.basename(local))
    parent = remote.rstrip("/").rsplit("/", 1)[0]
    if parent and parent != remote:
        fs.mkdirs(parent)
    fs.put_file(local, remote)
    return [remote]
