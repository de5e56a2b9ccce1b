"""CSV files on HDFS (or local disk) as a ``tf.data.Dataset`` of column dicts.

pyarrow's streaming CSV reader parses blocks of the file in C++; column types
are inferred from the first file (or given) and imposed on every file, so all
shards produce the same tensors.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tfyarn.data import _columns, _pipeline
from tfyarn.data import fs as _fs
from tfyarn.data._pipeline import PipelineOptions
from tfyarn.errors import HdfsError

_BLOCK = 4 << 20


def _reader(url: str, column_types: dict[str, Any] | None, delimiter: str) -> Any:
    import pyarrow as pa
    import pyarrow.csv as pacsv

    stream = _fs.resolve(url).open_input(url)
    try:
        return pacsv.open_csv(
            stream,
            read_options=pacsv.ReadOptions(block_size=_BLOCK),
            parse_options=pacsv.ParseOptions(delimiter=delimiter),
            convert_options=pacsv.ConvertOptions(column_types=column_types),
        )
    except pa.ArrowInvalid as exc:
        raise HdfsError(f"cannot parse CSV file {url}: {exc}") from exc


def csv_dataset(
    pattern: str | list[str],
    *,
    columns: list[str] | None = None,
    column_types: dict[str, Any] | None = None,
    delimiter: str = ",",
    options: PipelineOptions | None = None,
    **pipeline: Any,
) -> Any:
    """This task's share of CSV files (with a header row) as ``{column: tensor}``.

    Parameters
    ----------
    pattern : str or list of str
        ``hdfs://``/``viewfs://`` URL, local path, glob or directory.
    columns : list of str, optional
        Columns to emit (default all).
    column_types : dict, optional
        ``{name: pyarrow type}`` overriding inference (e.g. ``pa.float32()``).
    delimiter : str
        Field separator.
    options : PipelineOptions, optional
        Sharding, batching and prefetching, as for
        :func:`tfyarn.data.tfrecord_dataset` (also as keywords: ``shard=``,
        ``batch_size=``, ...).

    Raises
    ------
    HdfsError
        No match, unreachable HDFS, or an unparsable file (named).

    Examples
    --------
    >>> ds = csv_dataset("hdfs:///data/iris/*.csv", batch_size=32)  # doctest: +SKIP
    """
    import pyarrow as pa

    opts = PipelineOptions.of(options, pipeline)
    files = opts.files(pattern)
    first = _reader(files[0], column_types, delimiter)
    schema = first.schema
    # Narrow int64/float64 only when asked; inferred types are kept as they are.
    types = {f.name: f.type for f in schema}
    signature = _columns.output_signature(schema, columns)
    names = list(signature)

    def batches(url: str) -> Iterator[dict[str, Any]]:
        reader = _reader(url, types, delimiter)
        try:
            for batch in reader:
                yield from _split(_columns.to_numpy(batch, names))
        except pa.ArrowInvalid as exc:
            raise HdfsError(f"cannot parse CSV file {url}: {exc}") from exc

    return _pipeline.dataset_of_batches(files, batches, signature, opts)


def _split(columns: dict[str, Any]) -> Iterator[dict[str, Any]]:
    # A 4 MiB CSV block can hold 100k rows: hand them over in moderate pieces
    # so prefetch buffers stay small.
    n = len(next(iter(columns.values()))) if columns else 0
    step = 8 * _pipeline.GENERATOR_BATCH
    for lo in range(0, n, step):
        yield {k: v[lo : lo + step] for k, v in columns.items()}
