"""ParameterServerStrategy training on HDFS through production weather.

ps and worker tasks serve. The chief coordinates a custom loop in rounds of
``--round`` steps; the workers read the TFRecord shards under ``--data``
through the ``hdfs://`` plugin, again every epoch (a small shuffle buffer, so
reads never stop), and the chief saves a checkpoint to ``--checkpoint_dir``
(HDFS) after every round: training reads and writes HDFS all the time. Each
round it reports its step to the master and prints ``round step=N t=T``
(epoch seconds), from which a test or benchmark reads how long training
stalled around an event. A restarted chief resumes from the latest
checkpoint. Prints ``start_step=N t=T`` per start, ``steps=`` and
``accuracy=`` (on the held-out shards, read from HDFS).
"""

from __future__ import annotations

import argparse
import json
import os
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


def serve(task: dict) -> None:
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=task["type"],
        task_index=task["index"],
        protocol="grpc",
        start=True,
    )
    print(f"{task['type']}:{task['index']} serving at {server.target}", flush=True)
    server.join()


def coordinate(args: argparse.Namespace) -> None:
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        w = tf.Variable(tf.zeros([64, 10]), name="w")
        b = tf.Variable(tf.zeros([10]), name="b")
        step = tf.Variable(0, dtype=tf.int64, name="step")
    checkpoint = tf.train.Checkpoint(w=w, b=b, step=step)
    manager = tf.train.CheckpointManager(checkpoint, args.checkpoint_dir, 3)
    if manager.latest_checkpoint:
        checkpoint.restore(manager.latest_checkpoint)
    start = int(step.numpy())
    print(f"start_step={start} t={time.time():.3f}", flush=True)
    tfyarn.report_progress(start, total_steps=args.steps)

    def dataset_fn() -> tf.data.Dataset:
        # Runs on each worker: the glob and every epoch's reads are HDFS calls.
        files = tf.data.Dataset.list_files(args.data + "/train-*", shuffle=True)
        return (
            files.interleave(tf.data.TFRecordDataset, cycle_length=2)
            .shuffle(64)
            .repeat()
            .batch(64)
            .map(parse)
        )

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def train_step(it: tf.data.Iterator) -> None:
        def replica_fn(x: tf.Tensor, y: tf.Tensor) -> None:
            with tf.GradientTape() as tape:
                logits = tf.matmul(x, w) + b
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits)
                )
            gw, gb = tape.gradient(loss, [w, b])
            w.assign_sub(0.05 * gw)
            b.assign_sub(0.05 * gb)
            step.assign_add(1)

        strategy.run(replica_fn, args=next(it))

    current = start
    while current < args.steps:
        for _ in range(args.round):
            coordinator.schedule(train_step, args=(iterator,))
        coordinator.join()
        current = int(step.numpy())
        manager.save(checkpoint_number=current)
        tfyarn.report_progress(current, total_steps=args.steps)
        print(f"round step={current} t={time.time():.3f}", flush=True)
        time.sleep(args.round_sleep)
    test = tf.data.TFRecordDataset(tf.io.gfile.glob(args.data + "/test-*"))
    x, y = parse(next(iter(test.batch(100_000))))
    predicted = tf.argmax(tf.matmul(x, w.numpy()) + b.numpy(), axis=1)
    accuracy = float(tf.reduce_mean(tf.cast(predicted == y, tf.float32)))
    print(f"steps={current}", flush=True)
    print(f"accuracy={accuracy:.4f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True)
    parser.add_argument("--checkpoint_dir", required=True)
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--round", type=int, default=10)
    parser.add_argument("--round_sleep", type=float, default=0.2)
    args = parser.parse_args()
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    restart = os.environ.get("TFYARN_RESTART", "0")
    print(f"{task['type']}:{task['index']} TFYARN_RESTART={restart}", flush=True)
    if task["type"] in ("ps", "worker"):
        serve(task)
    else:
        coordinate(args)


if __name__ == "__main__":
    main()
