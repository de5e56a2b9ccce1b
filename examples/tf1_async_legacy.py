"""TF1-style between-graph asynchronous training, driven by the classic flags.

This is the shape of the old distributed-TensorFlow tutorials: every task is
started with ``--ps_hosts --worker_hosts --job_name --task_index``; ps tasks
block in ``server.join()``; each worker builds its own graph with
``replica_device_setter`` and trains in a ``MonitoredTrainingSession``. tfyarn
supplies the four flags itself::

    tfyarn submit --num_ps 1 --num_worker 2 --legacy_flags \\
        examples/tf1_async_legacy.py --steps 400

Worker 0 is the chief: it initializes the variables and, when the shared
global step reaches ``--steps``, prints the held-out ``accuracy=0.9xxx`` and
exits, which ends the job (tfyarn stops the ps, which would otherwise wait
forever). ``device_filters`` keeps each worker talking only to the ps and
itself, so a worker does not hang when another one has gone.

TF1's session manager makes a non-chief worker that finds the variables not yet
initialized check again only every 30 s, so in a run this short worker 1 may
join late or not at all; tfyarn stops it ``--worker_grace`` seconds after the
chief ends.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow as tf

DIM = 10


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Linearly separable points: label = (x . w_true + 0.1 > 0)."""
    rng = np.random.default_rng(seed)
    w_true = np.random.default_rng(0).normal(size=DIM).astype("float32")
    x = rng.normal(size=(n, DIM)).astype("float32")
    y = (x @ w_true + 0.1 > 0).astype("float32")[:, None]
    return x, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ps_hosts", required=True, help="h:p,h:p")
    parser.add_argument("--worker_hosts", required=True, help="h:p,h:p")
    parser.add_argument("--job_name", required=True, choices=["ps", "worker"])
    parser.add_argument("--task_index", type=int, required=True)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.5)
    parser.add_argument("--min_accuracy", type=float, default=0.9)
    parser.add_argument(
        "--device_filters",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="--no-device_filters behaves like scripts copied from old posts",
    )
    args = parser.parse_args()

    tf.compat.v1.disable_eager_execution()
    cluster = tf.train.ClusterSpec(
        {"ps": args.ps_hosts.split(","), "worker": args.worker_hosts.split(",")}
    )
    server = tf.distribute.Server(
        cluster, job_name=args.job_name, task_index=args.task_index
    )
    if args.job_name == "ps":
        print(f"ps:{args.task_index} serving", flush=True)
        server.join()
        return

    is_chief = args.task_index == 0
    v1 = tf.compat.v1
    with v1.device(  # tf.device (v2) refuses device functions
        v1.train.replica_device_setter(
            worker_device=f"/job:worker/task:{args.task_index}", cluster=cluster
        )
    ):
        x = v1.placeholder(tf.float32, [None, DIM])
        y = v1.placeholder(tf.float32, [None, 1])
        w = v1.get_variable("w", [DIM, 1], initializer=v1.zeros_initializer())
        b = v1.get_variable("b", [1], initializer=v1.zeros_initializer())
        logits = tf.matmul(x, w) + b
        loss = tf.reduce_mean(
            tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits)
        )
        accuracy = tf.reduce_mean(
            tf.cast(tf.equal(tf.cast(logits > 0, tf.float32), y), tf.float32)
        )
        global_step = v1.train.get_or_create_global_step()
        train_op = v1.train.GradientDescentOptimizer(args.learning_rate).minimize(
            loss, global_step=global_step
        )

    config = v1.ConfigProto(
        device_filters=["/job:ps", f"/job:worker/task:{args.task_index}"]
        if args.device_filters
        else None
    )
    x_train, y_train = make_data(4096, seed=1 + args.task_index)
    x_test, y_test = make_data(2000, seed=100)
    rng = np.random.default_rng(args.task_index)
    start, mine = time.time(), 0
    with v1.train.MonitoredTrainingSession(
        master=server.target, is_chief=is_chief, config=config
    ) as sess:
        step = 0
        while step < args.steps:
            idx = rng.integers(0, len(x_train), args.batch_size)
            _, step = sess.run(
                [train_op, global_step], {x: x_train[idx], y: y_train[idx]}
            )
            mine += 1
        test_accuracy = sess.run(accuracy, {x: x_test, y: y_test})
    print(
        f"worker:{args.task_index} ran {mine} of {step} global steps "
        f"in {time.time() - start:.1f} s",
        flush=True,
    )
    if is_chief:
        print(f"accuracy={test_accuracy:.4f}", flush=True)
        if test_accuracy < args.min_accuracy:
            raise SystemExit(
                f"accuracy {test_accuracy:.4f} is below {args.min_accuracy}"
            )


if __name__ == "__main__":
    main()
