"""The shared shape of every reader: files -> interleaved Python batch generators.

Python generators feed tf.data one element per call, and each call costs a few
microseconds of interpreter and tensor conversion: one record per call tops out
near 5k records/s, batches of a few hundred records reach ~250k records/s
(measured on 2 cores over 100k records; TensorFlow's native TFRecordDataset
read ~157k records/s there). So every generator here yields *batches*, several files are read
in parallel through ``interleave``, and the result is re-batched in C++.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tfyarn.data.sharding import Shard, shard_files

#: Records per Python -> TensorFlow hand-off.
GENERATOR_BATCH = 512

#: Files read at once through Python. The parsing holds the GIL, so more
#: threads only contend: on the benchmark (2 cores, HDFS) 2 gave 186-208k
#: records/s in three runs, 4 gave 92-197k.
GENERATOR_CYCLE = 2


@dataclass(frozen=True, kw_only=True)
class PipelineOptions:
    """How a reader shards, batches and prefetches: the options every
    ``*_dataset`` reader takes, by keyword or as one object (``options=``).

    Parameters
    ----------
    input_context : tf.distribute.InputContext, optional
        From ``distribute_datasets_from_function``; picks the file shard.
        Without it the shard comes from ``TF_CONFIG`` (see ``tfyarn.data.sharding``).
    shard : Shard, optional
        An explicit shard (overrides the above); ``Shard(0, 1)`` reads all files.
    batch_size : int, optional
        Emit batches of this many records (cheaper than batching later);
        ``None`` emits single records.
    drop_remainder : bool
        Drop the last short batch.
    cycle_length : int, optional
        Files read in parallel (default 2 through Python, 4 for TensorFlow's
        native local TFRecord reads; at most the number of files).
    deterministic : bool
        Keep a reproducible order (slightly slower when files differ in speed).
    prefetch : int, optional
        Elements to prefetch (default: autotune).

    Examples
    --------
    >>> opts = PipelineOptions(shard=Shard(0, 1), batch_size=64)
    >>> ds = tfrecord_dataset("hdfs:///data/train-*", options=opts)  # doctest: +SKIP
    >>> ds = csv_dataset("hdfs:///data/t/*.csv", options=opts)  # doctest: +SKIP
    """

    input_context: Any = None
    shard: Shard | None = None
    batch_size: int | None = None
    drop_remainder: bool = False
    cycle_length: int | None = None
    deterministic: bool = True
    prefetch: int | None = None

    @classmethod
    def of(
        cls, options: PipelineOptions | None, overrides: dict[str, Any]
    ) -> PipelineOptions:
        """``options`` (or the defaults) with the keyword ``overrides`` applied.

        Raises
        ------
        TypeError
            A keyword that is not a pipeline option, naming the ones there are.
        """
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - names)
        if unknown:
            raise TypeError(
                f"unknown reader option(s) {', '.join(unknown)}; the pipeline "
                f"options are {', '.join(sorted(names))}"
            )
        return dataclasses.replace(options or cls(), **overrides)

    def files(self, pattern: str | list[str]) -> list[str]:
        """This input pipeline's share of the files matching ``pattern``."""
        return shard_files(pattern, input_context=self.input_context, shard=self.shard)


def dataset_of_batches(
    files: list[str],
    make_batches: Callable[[str], Iterator[Any]],
    output_signature: Any,
    options: PipelineOptions,
) -> Any:
    """The reader's dataset: ``make_batches(url)`` of each file, interleaved,
    rebatched as ``options`` asks, with auto-sharding off."""
    ds = interleave_files(
        files,
        make_batches,
        output_signature,
        cycle_length=options.cycle_length,
        deterministic=options.deterministic,
    )
    ds = finish(
        ds,
        batch_size=options.batch_size,
        drop_remainder=options.drop_remainder,
        prefetch=options.prefetch,
    )
    return no_autoshard(ds)


def interleave_files(
    files: list[str],
    make_batches: Callable[[str], Iterator[Any]],
    output_signature: Any,
    *,
    cycle_length: int | None,
    deterministic: bool,
) -> Any:
    """A dataset of the batches ``make_batches(url)`` yields for each file.

    Files are read ``cycle_length`` at a time, in parallel threads.
    """
    import tensorflow as tf

    def gen(url: bytes) -> Iterator[Any]:
        yield from make_batches(url.decode())

    cycle = max(1, min(cycle_length or GENERATOR_CYCLE, len(files)))
    files_ds = tf.data.Dataset.from_tensor_slices(files)
    return files_ds.interleave(
        lambda url: tf.data.Dataset.from_generator(
            gen, args=(url,), output_signature=output_signature
        ),
        cycle_length=cycle,
        block_length=1,
        num_parallel_calls=cycle,
        deterministic=deterministic,
    )


def finish(
    ds: Any, *, batch_size: int | None, drop_remainder: bool, prefetch: int | None
) -> Any:
    """Turn a dataset of variable-size batches into records or fixed batches."""
    import tensorflow as tf

    if batch_size is None:
        ds = ds.unbatch()
    else:
        ds = ds.rebatch(batch_size, drop_remainder=drop_remainder)
    return ds.prefetch(tf.data.AUTOTUNE if prefetch is None else prefetch)


def no_autoshard(ds: Any) -> Any:
    """Turn off tf.distribute auto-sharding: files are sharded explicitly.

    MultiWorkerMirroredStrategy would otherwise fall back to DATA sharding on a
    generator pipeline, making every worker read every file and drop most.
    """
    import tensorflow as tf

    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.OFF
    )
    return ds.with_options(options)
