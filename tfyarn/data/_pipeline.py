"""The shared shape of every reader: files -> interleaved Python batch generators.

Python generators feed tf.data one element per call, and each call costs a few
microseconds of interpreter and tensor conversion: one record per call tops out
near 5k records/s, batches of a few hundred records reach ~250k records/s
(FIELD_NOTES). So every generator here yields *batches*, several files are read
in parallel through ``interleave``, and the result is re-batched in C++.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

#: Records per Python -> TensorFlow hand-off.
GENERATOR_BATCH = 512

#: Files read at once through Python. The parsing holds the GIL, so more
#: threads only contend: on the benchmark (2 cores, HDFS) 2 gave 186-208k
#: records/s in three runs, 4 gave 92-197k.
GENERATOR_CYCLE = 2


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
