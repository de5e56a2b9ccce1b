"""MultiWorkerMirrored training that reads HDFS and checkpoints to HDFS.

Submitted to YARN by test_hdfs_job.py. Every worker reads its own shard of the
digits TFRecords through tfyarn.data, the lead worker uploads checkpoints
(tfyarn.checkpoint) and TensorBoard logs (tfyarn.tensorboard); a second run
resumes from the first run's checkpoint. Prints ``start_step=``, ``steps=``
and (lead) ``accuracy=``.
"""

from __future__ import annotations

import argparse
import json
import os

import keras
import tensorflow as tf

import tfyarn.data as td
from tfyarn.checkpoint import CheckpointManager, is_chief
from tfyarn.tensorboard import LogSync


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", required=True)
    parser.add_argument("--checkpoint_dir", required=True)
    parser.add_argument("--log_dir", required=True)
    parser.add_argument("--steps", type=int, required=True, help="total, across runs")
    parser.add_argument("--global_batch_size", type=int, default=64)
    args = parser.parse_args()

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    lead = is_chief()

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        ds = td.tfrecord_dataset(
            args.data + "/train-*",
            input_context=ctx,
            batch_size=ctx.get_per_replica_batch_size(args.global_batch_size),
            drop_remainder=True,
        )
        return ds.map(td.parse_digits).repeat()

    iterator = iter(strategy.distribute_datasets_from_function(dataset_fn))

    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input(shape=(64,)),
                keras.layers.Dense(64, activation="relu"),
                keras.layers.Dense(10),
            ]
        )
        optimizer = keras.optimizers.Adam(learning_rate=0.01)
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")

    ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    manager = CheckpointManager(ckpt, args.checkpoint_dir, max_to_keep=2)
    restored = manager.restore_or_initialize()
    print(f"{task['type']}:{task['index']} restored={restored}", flush=True)
    print(f"start_step={int(step.numpy())}", flush=True)

    def replica_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
                y, model(x, training=True)
            )
            loss = tf.nn.compute_average_loss(
                per_example, global_batch_size=args.global_batch_size
            )
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step() -> tf.Tensor:
        x, y = next(iterator)
        losses = strategy.run(replica_step, args=(x, y))
        step.assign_add(1)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    sync = LogSync(args.log_dir, interval=2) if lead else None
    writer = tf.summary.create_file_writer(sync.local_dir) if sync else None
    while int(step.numpy()) < args.steps:
        loss = float(train_step())
        current = int(step.numpy())
        if writer is not None and current % 10 == 0:
            with writer.as_default():
                tf.summary.write("loss", loss, step=current)
        if current % 50 == 0:
            manager.save()  # every worker calls it; only the lead uploads
    manager.save()
    if writer is not None:
        writer.close()
    if sync is not None:
        sync.close()
    print(f"steps={int(step.numpy())}", flush=True)

    if lead:
        test = td.tfrecord_dataset(args.data + "/test-*", shard=td.Shard(0, 1))
        x, y = td.parse_digits(next(iter(test.batch(100_000))))
        predicted = tf.argmax(model(x, training=False), axis=1)
        accuracy = float(tf.reduce_mean(tf.cast(predicted == y, tf.float32)))
        print(f"accuracy={accuracy:.4f}", flush=True)


if __name__ == "__main__":
    main()
