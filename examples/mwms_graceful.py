"""MultiWorkerMirroredStrategy that saves on tfyarn's stop notice: resizable, no steps lost.

Run on YARN (workers only; worker 0 acts as chief)::

    tfyarn data make-example hdfs:///tmp/tfyarn/digits      # once
    tfyarn submit --num_worker 2 --detach examples/mwms_graceful.py --steps 2000
    tfyarn scale APP_ID --num_worker 3     # while it trains
    tfyarn kill --graceful APP_ID          # saves at the current step; resubmit to go on

TensorFlow's ``PreemptionCheckpointHandler`` runs every step; its termination
config comes from ``tfyarn.termination_config()``, so when tfyarn ends the
generation on purpose (a resize, ``tfyarn kill --graceful``) every worker
saves at the same step and exits with tfyarn's restart code (42). The next
generation, with the new number of workers, restores that step: no step is
trained twice. The global batch stays about ``--global_batch_size`` whatever
the size (each worker takes its share, rounded up), and each worker reads its own shard of the digits
TFRecords through ``tfyarn.data`` (re-sharded at every size). A backup
checkpoint every ``--checkpoint_every`` steps covers failures, which give no
notice. Prints ``start_step=``, ``workers=``, ``saved_at=`` (on a notice),
``steps=`` and (worker 0) the held-out ``accuracy=``.
"""

from __future__ import annotations

import argparse
import os
import time

import keras
import tensorflow as tf

import tfyarn
import tfyarn.data as td
from tfyarn.checkpoint import is_chief


def save(checkpoint: tf.train.Checkpoint, directory: str, task_id: int) -> None:
    """A checkpoint in ``directory`` (worker 0 only; every worker must call it:
    MultiWorkerMirroredStrategy's variables are saved together)."""
    chief = is_chief()
    target = directory if chief else f"{directory}/backup_tmp_{task_id}"
    tf.train.CheckpointManager(checkpoint, target, max_to_keep=1).save()
    if not chief:
        tf.io.gfile.rmtree(target)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="hdfs:///tmp/tfyarn/digits")
    parser.add_argument(
        "--checkpoint_dir", default="hdfs:///tmp/tfyarn/checkpoints/mwms_graceful"
    )
    parser.add_argument("--steps", type=int, default=2000, help="total, across runs")
    parser.add_argument("--checkpoint_every", type=int, default=500, help="0: never")
    parser.add_argument("--global_batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument(
        "--pause", type=float, default=0.0, help="seconds between steps (a slow demo)"
    )
    args = parser.parse_args()

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    resolver = strategy.cluster_resolver
    workers = strategy.num_replicas_in_sync
    # About --global_batch_size at every size (3 workers: 22 each, 66 in all).
    per_replica = -(-args.global_batch_size // workers)
    global_batch = per_replica * workers

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        ds = td.tfrecord_dataset(
            args.data + "/train-*",
            input_context=ctx,
            batch_size=per_replica,
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

    # Restores the latest checkpoint in --checkpoint_dir, if any.
    handler = tf.distribute.experimental.PreemptionCheckpointHandler(
        resolver,
        checkpoint,
        checkpoint_dir=args.checkpoint_dir,
        termination_config=tfyarn.termination_config(
            before_exit=lambda: print(f"saved_at={int(step.numpy())}", flush=True)
        ),
    )
    print(f"start_step={int(step.numpy())}", flush=True)
    print(f"workers={workers} restart={os.environ.get('TFYARN_RESTART', '0')}")

    def replica_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
                y, model(x, training=True)
            )
            loss = tf.nn.compute_average_loss(
                per_example, global_batch_size=global_batch
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
        # Saves and exits (tfyarn.RESTART_CODE) here once a notice came.
        loss = float(handler.run(train_step))
        current = int(step.numpy())
        tfyarn.report_progress(current, loss=loss, total_steps=args.steps)
        if args.checkpoint_every and current % args.checkpoint_every == 0:
            save(checkpoint, args.checkpoint_dir, resolver.task_id)
        time.sleep(args.pause)
    save(checkpoint, args.checkpoint_dir, resolver.task_id)
    print(f"steps={current}", flush=True)

    if is_chief():
        test = td.tfrecord_dataset(args.data + "/test-*", shard=td.Shard(0, 1))
        x, y = td.parse_digits(next(iter(test.batch(100_000))))
        predicted = tf.argmax(model(x, training=False), axis=1)
        accuracy = float(tf.reduce_mean(tf.cast(predicted == y, tf.float32)))
        print(f"accuracy={accuracy:.4f}", flush=True)


if __name__ == "__main__":
    main()
