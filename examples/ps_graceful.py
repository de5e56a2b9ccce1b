"""Parameter-server training whose coordinator saves on tfyarn's stop notice.

Run on YARN (the chief coordinates; ps and workers serve)::

    tfyarn data make-example hdfs:///tmp/tfyarn/digits      # once
    tfyarn submit --num_chief 1 --num_ps 1 --num_worker 2 --detach \\
        examples/ps_graceful.py --steps 2000
    tfyarn scale APP_ID --num_worker 4     # while it trains
    tfyarn kill --graceful APP_ID          # saves at the current step

``ParameterServerStrategy`` is the coordinator's own (TensorFlow's
``PreemptionCheckpointHandler`` does not support it), so the chief asks
``tfyarn.should_stop()`` between rounds of ``--round`` steps. When tfyarn ends
the generation on purpose (a resize, ``tfyarn kill --graceful``), the ps and
workers keep serving while the chief waits for the steps in flight, saves the
variables from the ps and exits with tfyarn's restart code (42); then tfyarn
stops the servers and forms the next generation, whose chief resumes at that
exact step, with however many workers it now has (each worker stages its
shard of the digits anew, split by its place in ``TF_CONFIG``). A checkpoint
every ``--checkpoint_every`` steps covers failures, which give no notice.
Prints ``start_step=``, ``workers=``, ``saved_at=`` (on a notice), ``steps=``
and the held-out ``accuracy=``; when the chief exits 0, tfyarn stops the
servers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

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
    tfyarn.should_stop()  # heeds notices from now on: tfyarn waits for the save
    workers = len(resolver.cluster_spec().as_dict().get("worker", []))
    print(f"start_step={int(step.numpy())}", flush=True)
    print(f"workers={workers} restart={os.environ.get('TFYARN_RESTART', '0')}")

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

    # Schedule in rounds: after each, report progress, maybe checkpoint, and
    # save and stop if tfyarn sent a notice.
    current = saved = int(step.numpy())
    while current < args.steps:
        todo = min(args.round, args.steps - current)
        losses = [coordinator.schedule(train_step, (iterator,)) for _ in range(todo)]
        coordinator.join()  # every step in flight done: the step is exact
        current, loss = int(step.numpy()), float(losses[-1].fetch())
        tfyarn.report_progress(current, loss=loss, total_steps=args.steps)
        if tfyarn.should_stop():
            manager.save()
            print(f"saved_at={current}", flush=True)
            sys.exit(tfyarn.RESTART_CODE)
        if current - saved >= args.checkpoint_every:
            manager.save()
            saved = current
            print(f"step {current}: loss={loss:.4f}", flush=True)
        time.sleep(args.pause)
    manager.save()
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
        "--checkpoint_dir", default="hdfs:///tmp/tfyarn/checkpoints/ps_graceful"
    )
    parser.add_argument("--steps", type=int, default=2000, help="total, across runs")
    parser.add_argument("--round", type=int, default=10, help="steps between checks")
    parser.add_argument(
        "--pause", type=float, default=0.0, help="seconds between rounds (a slow demo)"
    )
    parser.add_argument("--checkpoint_every", type=int, default=500)
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
