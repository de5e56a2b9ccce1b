"""TF2 parameter-server training with a coordinating chief.

Run on YARN (the chief coordinates; ps and workers serve)::

    tfyarn submit --num_chief 1 --num_ps 1 --num_worker 2 \\
        examples/ps_coordinator.py --steps 300

ps and worker tasks only run a ``tf.distribute.Server`` and wait; the chief
builds a ``ParameterServerStrategy``, schedules training steps on the workers
with a ``ClusterCoordinator`` and a custom loop (Keras 3 dropped ``model.fit``
for this strategy), then evaluates on held-out data and prints
``accuracy=0.9xxx``. When the chief exits 0, tfyarn stops the servers.

The problem is synthetic and in memory: points in 10 dimensions labelled by
which side of a fixed hyperplane they lie on (linearly separable).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import tensorflow as tf

DIM = 10


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Linearly separable points: label = (x . w_true + 0.1 > 0)."""
    rng = np.random.default_rng(seed)
    w_true = np.random.default_rng(0).normal(size=DIM).astype("float32")
    x = rng.normal(size=(n, DIM)).astype("float32")
    y = (x @ w_true + 0.1 > 0).astype("float32")
    return x, y


def serve(task: dict) -> None:
    """ps and worker tasks: host variables / run steps until tfyarn stops us."""
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

    with strategy.scope():
        w = tf.Variable(tf.zeros([DIM, 1]), name="w")
        b = tf.Variable(tf.zeros([1]), name="b")

    def dataset_fn() -> tf.data.Dataset:
        x, y = make_data(4096, seed=1)
        ds = tf.data.Dataset.from_tensor_slices((x, y[:, None]))
        return ds.shuffle(4096).repeat().batch(args.batch_size)

    per_worker = coordinator.create_per_worker_dataset(dataset_fn)
    per_worker_iter = iter(per_worker)

    @tf.function
    def train_step(iterator: tf.data.Iterator) -> tf.Tensor:
        def replica_fn(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                logits = tf.matmul(x, w) + b
                loss = tf.reduce_mean(
                    tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits)
                )
            gw, gb = tape.gradient(loss, [w, b])
            # Plain SGD on the ps variables: async updates, no Keras optimizer
            # (its step counter loses increments under async PS).
            w.assign_sub(args.learning_rate * gw)
            b.assign_sub(args.learning_rate * gb)
            return loss

        x, y = next(iterator)
        return strategy.run(replica_fn, args=(x, y))

    start = time.time()
    losses = [
        coordinator.schedule(train_step, args=(per_worker_iter,))
        for _ in range(args.steps)
    ]
    coordinator.join()
    # Count steps ourselves: every scheduled closure ran at least once.
    done = sum(1 for r in losses if r.fetch() is not None)
    elapsed = time.time() - start

    x_test, y_test = make_data(2000, seed=2)
    logits = x_test @ w.numpy() + b.numpy()
    accuracy = float(np.mean((logits[:, 0] > 0) == (y_test > 0.5)))
    print(
        f"steps={done} last_loss={float(losses[-1].fetch()):.4f} seconds={elapsed:.1f}",
        flush=True,
    )
    print(f"accuracy={accuracy:.4f}", flush=True)
    if accuracy < args.min_accuracy:
        raise SystemExit(f"accuracy {accuracy:.4f} is below {args.min_accuracy}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.5)
    parser.add_argument("--min_accuracy", type=float, default=0.9)
    args = parser.parse_args()

    task = json.loads(os.environ["TF_CONFIG"])["task"]
    if task["type"] in ("ps", "worker"):
        serve(task)
    elif task["type"] == "chief":
        coordinate(args)
    else:
        raise SystemExit(f"this example has no {task['type']} task")


if __name__ == "__main__":
    main()
