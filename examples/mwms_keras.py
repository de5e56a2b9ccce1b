"""Synchronous MultiWorkerMirroredStrategy training: Keras 3 layers, custom loop.

Run on YARN (workers only; worker 0 acts as chief)::

    tfyarn data make-example hdfs:///tmp/tfyarn/digits      # once
    tfyarn submit --num_worker 2 examples/mwms_keras.py --steps 200

Every worker runs the same program and reads its own shard of the digits
TFRecords on HDFS (``--data``) through ``tfyarn.data``. Gradients are
all-reduced across workers each step, so all replicas hold identical weights.
(Keras 3's ``model.fit`` does not work under this strategy, hence the custom
loop.) Checkpoints go to ``--checkpoint_dir`` on HDFS (only worker 0 writes them);
a job started again with the same directory, or restarted by tfyarn after a
failure, resumes from the latest one, until the step count reaches ``--steps``.
Prints ``start_step=``, ``steps=`` and (worker 0) the held-out ``accuracy=``.
"""

from __future__ import annotations

import argparse

import keras
import tensorflow as tf

import tfyarn
import tfyarn.data as td
from tfyarn.checkpoint import CheckpointManager, is_chief


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="hdfs:///tmp/tfyarn/digits")
    parser.add_argument(
        "--checkpoint_dir", default="hdfs:///tmp/tfyarn/checkpoints/mwms_keras"
    )
    parser.add_argument("--steps", type=int, default=200, help="total, across runs")
    parser.add_argument("--checkpoint_every", type=int, default=50)
    parser.add_argument("--global_batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.01)
    args = parser.parse_args()

    strategy = tf.distribute.MultiWorkerMirroredStrategy()

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        # This worker's files only; equal shards + drop_remainder keep every
        # worker taking the same number of steps (the all-reduce needs it).
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
        optimizer = keras.optimizers.Adam(learning_rate=args.learning_rate)
        optimizer.build(model.trainable_variables)  # so its slots are restored
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")

    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    manager = CheckpointManager(checkpoint, args.checkpoint_dir, max_to_keep=2)
    manager.restore_or_initialize()
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
        losses = strategy.run(replica_step, args=next(iterator))
        step.assign_add(1)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    current = int(step.numpy())
    while current < args.steps:
        loss = float(train_step())
        current = int(step.numpy())
        tfyarn.report_progress(current, loss=loss, total_steps=args.steps)
        if current % args.checkpoint_every == 0 or current == args.steps:
            manager.save()  # every worker calls it; only worker 0 writes
    print(f"steps={current}", flush=True)

    if is_chief():
        test = td.tfrecord_dataset(args.data + "/test-*", shard=td.Shard(0, 1))
        x, y = td.parse_digits(next(iter(test.batch(100_000))))
        predicted = tf.argmax(model(x, training=False), axis=1)
        accuracy = float(tf.reduce_mean(tf.cast(predicted == y, tf.float32)))
        print(f"accuracy={accuracy:.4f}", flush=True)


if __name__ == "__main__":
    main()
