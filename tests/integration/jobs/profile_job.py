"""Training that reads and checkpoints on HDFS until told to stop.

``python profile_job.py --data DIR --checkpoint_dir DIR --until FILE``: each
worker trains its own small softmax model (no collective: each task's rounds
are its own, so the test decides the job's length) in rounds of ``--round``
steps. Every round reads TFRecord shards under ``--data`` afresh through
tfyarn's ``hdfs://`` plugin, saves a checkpoint under ``--checkpoint_dir``
(``worker-<index>``), reports its step to the master and prints ``round
step=N t=T``. Once ``--until`` exists (looked up every round, through the
plugin too) it prints ``steps=N`` and ``accuracy=`` on the held-out shards.
First it prints where its interpreter and TensorFlow come from
(``profile_job python=... tensorflow=...``), for the shipped-environment check.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import tensorflow as tf

import tfyarn

FEATURES = {
    "image": tf.io.FixedLenFeature([64], tf.float32),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def parse(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    parsed = tf.io.parse_example(serialized, FEATURES)
    return parsed["image"], parsed["label"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--checkpoint_dir", required=True)
    parser.add_argument("--until", required=True)
    parser.add_argument("--round", type=int, default=10)
    parser.add_argument("--round_sleep", type=float, default=0.5)
    parser.add_argument("--max_rounds", type=int, default=2000)
    args = parser.parse_args()
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    print(f"profile_job python={sys.executable} tensorflow={tf.__file__}", flush=True)
    tfyarn.enable_hdfs()

    w = tf.Variable(tf.zeros([64, 10]))
    b = tf.Variable(tf.zeros([10]))
    step = tf.Variable(0, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(w=w, b=b, step=step)
    where = f"{args.checkpoint_dir}/{task['type']}-{task['index']}"
    manager = tf.train.CheckpointManager(checkpoint, where, max_to_keep=2)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint)
    print(f"start_step={int(step.numpy())} t={time.time():.3f}", flush=True)
    optimizer = tf.keras.optimizers.SGD(0.1)

    @tf.function
    def train_step(x: tf.Tensor, y: tf.Tensor) -> None:
        with tf.GradientTape() as tape:
            logits = tf.matmul(x, w) + b
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
            )
        grads = tape.gradient(loss, [w, b])
        optimizer.apply_gradients(zip(grads, [w, b], strict=True))
        step.assign_add(1)

    for _ in range(args.max_rounds):
        # A new glob and new reads every round: NameNode and DataNode calls.
        files = tf.io.gfile.glob(args.data + "/train-*")
        batches = tf.data.TFRecordDataset(files).shuffle(256).batch(64).map(parse)
        for x, y in batches.take(args.round):
            train_step(x, y)
        manager.save(checkpoint_number=int(step.numpy()))
        current = int(step.numpy())
        tfyarn.report_progress(current)
        print(f"round step={current} t={time.time():.3f}", flush=True)
        if tf.io.gfile.exists(args.until):
            break
        time.sleep(args.round_sleep)
    test = tf.data.TFRecordDataset(tf.io.gfile.glob(args.data + "/test-*"))
    x, y = parse(next(iter(test.batch(100_000))))
    predicted = tf.argmax(tf.matmul(x, w) + b, axis=1)
    accuracy = float(tf.reduce_mean(tf.cast(predicted == y, tf.float32)))
    print(f"steps={int(step.numpy())}", flush=True)
    print(f"accuracy={accuracy:.4f}", flush=True)


if __name__ == "__main__":
    main()
