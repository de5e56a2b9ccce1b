"""Plain TensorFlow on hdfs:// paths: no tfyarn import, nothing staged locally.

Run on YARN (one task)::

    tfyarn data make-example hdfs:///tmp/tfyarn/digits      # once
    tfyarn submit --num_worker 1 examples/plain_tf_hdfs.py --steps 200

This is a script as the old tutorials wrote it: ``tf.data.TFRecordDataset``
reads the digits TFRecords straight from HDFS (``--data``),
``tf.train.CheckpointManager`` saves to ``--checkpoint_dir`` on HDFS and
``tf.summary`` writes the training loss under ``<checkpoint_dir>/logs`` (point
TensorBoard there). tfyarn registers its ``hdfs://`` filesystem plugin before
the script's first line; outside tfyarn, call ``tfyarn.enable_hdfs()`` first.
Started again with the same directory it resumes from the latest checkpoint,
until the step count reaches ``--steps``. Prints ``start_step=``, ``steps=``
and the held-out ``accuracy=``.
"""

from __future__ import annotations

import argparse

import keras
import tensorflow as tf

FEATURES = {
    "image": tf.io.FixedLenFeature([64], tf.float32),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def parse(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    parsed = tf.io.parse_example(serialized, FEATURES)
    return parsed["image"], parsed["label"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="hdfs:///tmp/tfyarn/digits")
    parser.add_argument(
        "--checkpoint_dir", default="hdfs:///tmp/tfyarn/checkpoints/plain_tf_hdfs"
    )
    parser.add_argument("--steps", type=int, default=200, help="total, across runs")
    parser.add_argument("--checkpoint_every", type=int, default=50)
    parser.add_argument("--batch_size", type=int, default=64)
    args = parser.parse_args()

    files = tf.io.gfile.glob(args.data + "/train-*")
    train = (
        tf.data.TFRecordDataset(files)
        .shuffle(2048)
        .repeat()
        .batch(args.batch_size)
        .map(parse)
        .prefetch(2)
    )

    model = keras.Sequential(
        [
            keras.Input(shape=(64,)),
            keras.layers.Dense(64, activation="relu"),
            keras.layers.Dense(10),
        ]
    )
    optimizer = keras.optimizers.Adam(learning_rate=0.01)
    optimizer.build(model.trainable_variables)  # so its slots are restored
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    manager = tf.train.CheckpointManager(checkpoint, args.checkpoint_dir, max_to_keep=2)
    checkpoint.restore(manager.latest_checkpoint)
    print(f"start_step={int(step.numpy())}", flush=True)
    summaries = tf.summary.create_file_writer(args.checkpoint_dir + "/logs")

    @tf.function
    def train_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(
                    y, model(x, training=True)
                )
            )
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        step.assign_add(1)
        return loss

    batches = iter(train)
    current = int(step.numpy())
    while current < args.steps:
        loss = train_step(*next(batches))
        current = int(step.numpy())
        if current % 10 == 0:
            with summaries.as_default(step=current):
                tf.summary.scalar("loss", loss)
        if current % args.checkpoint_every == 0 or current == args.steps:
            manager.save(checkpoint_number=current)
    summaries.close()
    print(f"steps={current}", flush=True)

    test = tf.data.TFRecordDataset(tf.io.gfile.glob(args.data + "/test-*"))
    x, y = parse(next(iter(test.batch(100_000))))
    predicted = tf.argmax(model(x, training=False), axis=1)
    accuracy = float(tf.reduce_mean(tf.cast(predicted == y, tf.float32)))
    print(f"accuracy={accuracy:.4f}", flush=True)


if __name__ == "__main__":
    main()
