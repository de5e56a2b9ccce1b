"""Parquet files on HDFS (or local disk) as a ``tf.data.Dataset`` of column dicts.

pyarrow reads each file through a seekable hdfs-native stream (footer first,
then the row groups it needs), in record batches that become one dict of
tensors each; nothing crosses into TensorFlow one row at a time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tfyarn.data import _columns, _pipeline
from tfyarn.data import fs as _fs
from tfyarn.data._pipeline import PipelineOptions
from tfyarn.errors import HdfsError


def _open(url: str) -> Any:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(_fs.resolve(url).open_input(url))
    except pa.ArrowInvalid as exc:
        raise HdfsError(f"{url} is not a readable Parquet file: {exc}") from exc


def read_schema(url: str) -> Any:
    """The Arrow schema of one Parquet file (reads only its footer)."""
    return _open(url).schema_arrow


def iter_batches(
    url: str, *, columns: list[str] | None, batch_size: int
) -> Iterator[dict[str, Any]]:
    """Yield ``{column: numpy array}`` batches of one Parquet file."""
    pf = _open(url)
    names = columns if columns is not None else pf.schema_arrow.names
    for batch in pf.iter_batches(batch_size=batch_size, columns=names):
        yield _columns.to_numpy(batch, names)


def parquet_dataset(
    pattern: str | list[str],
    *,
    columns: list[str] | None = None,
    options: PipelineOptions | None = None,
    **pipeline: Any,
) -> Any:
    """This task's share of Parquet files as a dataset of ``{column: tensor}``.

    Parameters
    ----------
    pattern : str or list of str
        ``hdfs://``/``viewfs://`` URL, local path, glob or directory.
    columns : list of str, optional
        Columns to read (default all). Supported types: bool, ints, floats,
        strings/binary, dates/timestamps (as int64) and fixed-size lists of
        those (as ``[batch, n]`` tensors).
    options : PipelineOptions, optional
        Sharding, batching and prefetching, as for
        :func:`tfyarn.data.tfrecord_dataset` (also as keywords: ``shard=``,
        ``batch_size=``, ...).

    Returns
    -------
    tf.data.Dataset
        Elements are dicts of column tensors (batched if ``batch_size``).

    Raises
    ------
    HdfsError
        No match, unreachable HDFS, or the first file is not Parquet.
    ColumnTypeError
        An unsupported column type.

    Examples
    --------
    >>> ds = parquet_dataset("hdfs:///data/digits-parquet/train-*",  # doctest: +SKIP
    ...                      columns=["image", "label"], batch_size=64)
    >>> ds = ds.map(lambda d: (d["image"], d["label"]))  # doctest: +SKIP
    """
    opts = PipelineOptions.of(options, pipeline)
    files = opts.files(pattern)
    schema = read_schema(files[0])
    signature = _columns.output_signature(schema, columns)
    names = list(signature)

    def batches(url: str) -> Iterator[dict[str, Any]]:
        yield from iter_batches(
            url, columns=names, batch_size=_pipeline.GENERATOR_BATCH
        )

    return _pipeline.dataset_of_batches(files, batches, signature, opts)
