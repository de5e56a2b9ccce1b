"""TF2 parameter-server training with a coordinating chief.

Run on YARN (the chief coordinates; ps and workers serve)::

    tfyarn data make-example hdfs:///tmp/tfyarn/digits      # once
    tfyarn submit --num_chief 1 --num_ps 1 --num_worker 2 \\
        examples/ps_coordinator.py --steps 200

Each worker first takes its own shard of the digits TFRecords (``--data``,
split by its place in ``TF_CONFIG``; ``tfyarn.data.stage_shard``: read from
HDFS through tfyarn's plugin, or copied to local disk where the plugin is not
installed), then serves; ps tasks only serve. The chief builds a
``ParameterServerStrategy`` and schedules training steps on the workers with a
``ClusterCoordinator`` and a custom loop (Keras 3 dropped ``model.fit`` for
this strategy); each worker's steps read its own shard. The chief checkpoints to ``--checkpoint_dir`` on HDFS, so a job
started again with the same directory, or restarted by tfyarn after a failure,
resumes from the latest checkpoint, until the step count reaches ``--steps``.
It prints ``start_step=``, ``steps=`` and the held-out ``accuracy=``; when it
exits 0, tfyarn stops the servers.
"""

from __future__ import annotations

import argparse
import json
import os

import tensorflow as tf

import tfyarn
import tfyarn.data as td
from tfyarn.checkpoint import CheckpointManager

HIDDEN = 64


def serve(task: dict, args: argparse.Namespace) -> None:
    """ps and worker tasks: host variables / run steps until tfyarn stops us."""
    if task["type"] == "worker":
        # Before the server starts: the chief's dataset function reads it here.
        td.stage_shard(args.data + "/train-*", "train")
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=task["type"],
        task_index=task["index"],
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    print(f"{task['type']}:{task['index']} serving at {server.target}", flush=True)
    server.join()


def coordinate(args: argparse.Namespace) -> None:
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

    with strategy.scope():  # the variables live on the ps
        w1 = tf.Variable(tf.random.stateless_normal([64, HIDDEN], [1, 2]) * 0.18)
        b1 = tf.Variable(tf.zeros([HIDDEN]))
        w2 = tf.Variable(tf.random.stateless_normal([HIDDEN, 10], [3, 4]) * 0.3)
        b2 = tf.Variable(tf.zeros([10]))
        step = tf.Variable(0, dtype=tf.int64, name="step")
    params = [w1, b1, w2, b2]

    def logits_of(x: tf.Tensor) -> tf.Tensor:
        return tf.nn.relu(x @ w1 + b1) @ w2 + b2

    checkpoint = tf.train.Checkpoint(params=params, step=step)
    manager = CheckpointManager(
        checkpoint, args.checkpoint_dir, max_to_keep=2, chief=True
    )
    manager.restore_or_initialize()
    print(f"start_step={int(step.numpy())}", flush=True)

    dataset_fn = td.per_worker_dataset_fn(
        "train", batch_size=args.batch_size, map_fn=td.parse_digits, shuffle_buffer=1000
    )
    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def train_step(iterator: tf.data.Iterator) -> tf.Tensor:
        def replica_fn(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(
                    tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits_of(x))
                )
            # Plain SGD on the ps variables: async updates, no Keras optimizer
            # (its step counter loses increments under async PS).
            for var, grad in zip(params, tape.gradient(loss, params), strict=True):
                var.assign_sub(args.learning_rate * grad)
            step.assign_add(1)
            return loss

        return strategy.run(replica_fn, args=next(iterator))

    # Schedule in rounds: after each, report progress and maybe checkpoint.
    current = int(step.numpy())
    while current < args.steps:
        todo = min(args.checkpoint_every, args.steps - current)
        losses = [coordinator.schedule(train_step, (iterator,)) for _ in range(todo)]
        coordinator.join()
        current, loss = int(step.numpy()), float(losses[-1].fetch())
        tfyarn.report_progress(current, loss=loss, total_steps=args.steps)
        manager.save()
        print(f"step {current}: loss={loss:.4f}", flush=True)
    print(f"steps={current}", flush=True)

    test = td.tfrecord_dataset(args.data + "/test-*", shard=td.Shard(0, 1))
    x, y = td.parse_digits(next(iter(test.batch(100_000))))
    predicted = tf.argmax(logits_of(x), axis=1)
    accuracy = float(tf.reduce_mean(tf.cast(predicted == y, tf.float32)))
    print(f"accuracy={accuracy:.4f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="hdfs:///tmp/tfyarn/digits")
    parser.add_argument(
        "--checkpoint_dir", default="hdfs:///tmp/tfyarn/checkpoints/ps_coordinator"
    )
    parser.add_argument("--steps", type=int, default=200, help="total, across runs")
    parser.add_argument("--checkpoint_every", type=int, default=50)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.5)
    args = parser.parse_args()

    task = json.loads(os.environ["TF_CONFIG"])["task"]
    if task["type"] in ("ps", "worker"):
        serve(task, args)
    elif task["type"] == "chief":
        coordinate(args)
    else:
        raise SystemExit(f"this example has no {task['type']} task")


if __name__ == "__main__":
    main()
