"""TFRecord files on HDFS (or local disk) as a ``tf.data.Dataset``.

Remote files are streamed in large chunks through hdfs-native, optionally
decompressed (GZIP/ZLIB), split into records with every CRC checked, and handed
to TensorFlow a batch at a time. Local files use TensorFlow's own
``TFRecordDataset`` (same records, same checks) unless ``reader="python"``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from tfyarn import hdfs
from tfyarn.contract import hdfs_plugin as _built
from tfyarn.data import _framing, _pipeline
from tfyarn.data import fs as _fs
from tfyarn.data._pipeline import PipelineOptions
from tfyarn.errors import HdfsError


class CorruptTFRecordError(HdfsError):
    """A TFRecord file is damaged; the message names the file and the offset."""


def read_record_batches(
    url: str,
    *,
    compression: str | None = "auto",
    batch_size: int = _pipeline.GENERATOR_BATCH,
    verify: bool = True,
) -> Iterator[list[bytes]]:
    """Yield the records of one TFRecord file in lists of up to ``batch_size``.

    Raises
    ------
    CorruptTFRecordError
        Framing, checksum or compression errors; the message names ``url``.
    HdfsError
        The file cannot be opened or read.
    """
    comp = _framing.normalize_compression(compression, url)
    chunks = _fs.resolve(url).read_chunks(url)
    try:
        yield from _framing.iter_record_batches(
            _framing.decompress(chunks, comp), batch_size=batch_size, verify=verify
        )
    except _framing.CorruptRecordError as exc:
        if exc.offset == 0:  # not one good record: not TFRecord framing at all
            raise CorruptTFRecordError(
                f"{url} is not a TFRecord file ({exc}): its first bytes are not a "
                "TFRecord header. Is it another format (Parquet, CSV, text), or "
                "compressed (pass the compression, e.g. --compression GZIP)?"
            ) from exc
        raise CorruptTFRecordError(
            f"corrupt TFRecord file {url}: {exc}. Rewrite the file, or remove it "
            "from the input pattern."
        ) from exc
    except Exception as exc:  # zlib.error and friends
        import zlib

        if isinstance(exc, zlib.error):
            raise CorruptTFRecordError(
                f"corrupt {comp or 'uncompressed'} TFRecord file {url}: {exc}. Is the "
                "compression right? (compression='GZIP'|'ZLIB'|'')"
            ) from exc
        raise


def tfrecord_dataset(
    pattern: str | list[str],
    *,
    compression: str | None = "auto",
    verify_crc: bool = True,
    reader: str = "auto",
    options: PipelineOptions | None = None,
    **pipeline: Any,
) -> Any:
    """Raw serialized records of this task's share of TFRecord files.

    Parameters
    ----------
    pattern : str or list of str
        ``hdfs://``/``viewfs://`` URL, local path, glob or directory.
    compression : {"auto", "GZIP", "ZLIB", ""}
        ``auto`` picks by extension (``.gz``, ``.zlib``).
    verify_crc : bool
        Check every record's CRC32C (remote reader).
    reader : {"auto", "python", "native"}
        ``auto`` uses TensorFlow's reader for local files and tfyarn's streaming
        reader for HDFS; ``python`` forces tfyarn's reader everywhere;
        ``native`` TensorFlow's everywhere (HDFS through tfyarn's HDFS plugin).
    options : PipelineOptions, optional
        Sharding, batching and prefetching (``tfyarn.data.PipelineOptions``).
        Each of its fields may also be given as a keyword, which overrides
        ``options``: ``input_context=``, ``shard=``, ``batch_size=`` (emit
        ``tf.string`` vectors of this many records; without it records are
        scalars, like ``TFRecordDataset``), ``drop_remainder=``,
        ``cycle_length=``, ``deterministic=``, ``prefetch=``.

    Returns
    -------
    tf.data.Dataset
        With auto-sharding OFF, since the files are already sharded.

    Raises
    ------
    HdfsError
        No file matches, or HDFS is unreachable. Errors while reading surface
        from the iterator; a damaged file raises ``CorruptTFRecordError`` naming it
        (TensorFlow reports it as an ``UnknownError`` whose message carries it).
    ShardError
        Fewer files than input pipelines.
    TypeError
        A keyword that is neither a parameter nor a pipeline option.

    Examples
    --------
    >>> def dataset_fn(ctx):
    ...     ds = tfrecord_dataset("hdfs:///data/digits/train-*", input_context=ctx,
    ...                           batch_size=ctx.get_per_replica_batch_size(64))
    ...     return ds.map(parse_digits)
    >>> dist = strategy.distribute_datasets_from_function(dataset_fn)  # doctest: +SKIP
    """
    import tensorflow as tf

    opts = PipelineOptions.of(options, pipeline)
    if reader not in ("auto", "python", "native"):
        raise ValueError(f"reader must be 'auto', 'python' or 'native', got {reader!r}")
    files = opts.files(pattern)
    remote = any(_fs.is_remote(f) for f in files)
    if reader == "native" and remote:
        if not hdfs.available():
            raise HdfsError(
                f"reader='native' opens hdfs:// through the plugin: "
                f"{_built.NOT_INSTALLED}; or use reader='auto'"
            )
        hdfs.enable()
    if reader == "native" or (reader == "auto" and not remote):
        comps = {_framing.normalize_compression(compression, f) for f in files}
        if len(comps) > 1:
            raise ValueError(
                f"files mix compressions {sorted(comps)}; pass compression= explicitly"
            )
        cycle = max(1, min(opts.cycle_length or 4, len(files)))
        ds = tf.data.TFRecordDataset(
            files,
            compression_type=comps.pop(),
            num_parallel_reads=cycle if len(files) > 1 else None,
        )
        if opts.batch_size is not None:
            ds = ds.batch(opts.batch_size, drop_remainder=opts.drop_remainder)
        ds = ds.prefetch(tf.data.AUTOTUNE if opts.prefetch is None else opts.prefetch)
        return _pipeline.no_autoshard(ds)

    # Hand over batches of the size asked for, so rebatch only mends file ends.
    batch_size = opts.batch_size
    gen_batch = batch_size if batch_size and batch_size <= 8192 else None
    gen_batch = gen_batch or _pipeline.GENERATOR_BATCH

    def batches(url: str) -> Iterator[Any]:
        yield from read_record_batches(
            url, compression=compression, batch_size=gen_batch, verify=verify_crc
        )

    signature = tf.TensorSpec(shape=[None], dtype=tf.string)
    return _pipeline.dataset_of_batches(files, batches, signature, opts)
