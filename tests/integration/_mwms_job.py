"""A two-worker MultiWorkerMirroredStrategy process reading HDFS TFRecords.

Run as ``python _mwms_job.py PATTERN`` with TF_CONFIG set; prints
``RECORDS <comma-separated ints>`` for the records this worker's replica saw
through ``distribute_datasets_from_function``.
"""

from __future__ import annotations

import sys

import tensorflow as tf

import tfyarn.data as td


def main() -> None:
    pattern = sys.argv[1]
    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        ds = td.tfrecord_dataset(
            pattern,
            input_context=ctx,
            batch_size=ctx.get_per_replica_batch_size(10),
            drop_remainder=True,
        )
        return ds.map(lambda b: tf.strings.to_number(b, tf.int64))

    dist = strategy.distribute_datasets_from_function(dataset_fn)
    seen: list[int] = []
    for batch in dist:
        local = strategy.experimental_local_results(batch)
        for t in local:
            seen += t.numpy().tolist()
        # An all-reduce per step: workers must stay in lock-step, as in training.
        strategy.reduce(
            tf.distribute.ReduceOp.SUM,
            strategy.run(lambda b: tf.reduce_sum(b), args=(batch,)),
            axis=None,
        )
    print("RECORDS " + ",".join(map(str, seen)), flush=True)


if __name__ == "__main__":
    main()
