"""Synchronous parameter-server training the TF1 way: SyncReplicasOptimizer.

Each step, the chief worker waits for a gradient from every worker, averages
them on the ps and applies one update. The script names its own flags, so
tfyarn fills them through placeholders instead of ``--legacy_flags``::

    tfyarn submit --num_ps 1 --num_worker 2 examples/tf1_sync_replicas.py \\
        --job {job_name} --index {task_index} --ps {ps_hosts} \\
        --workers {worker_hosts} --steps 200

Worker 0 prints the held-out ``accuracy=0.9xxx`` once the global step reaches
``--steps`` and exits, which ends the job: tfyarn stops the ps and, after a
grace period, any worker still waiting for a sync token.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import tensorflow as tf

DIM = 10


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Linearly separable points: label = (x . w_true - 0.2 > 0)."""
    rng = np.random.default_rng(seed)
    w_true = np.random.default_rng(7).normal(size=DIM).astype("float32")
    x = rng.normal(size=(n, DIM)).astype("float32")
    y = (x @ w_true - 0.2 > 0).astype("float32")[:, None]
    return x, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, choices=["ps", "worker"])
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--ps", required=True, help="h:p,h:p")
    parser.add_argument("--workers", required=True, help="h:p,h:p")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.5)
    parser.add_argument("--min_accuracy", type=float, default=0.9)
    args = parser.parse_args()

    tf.compat.v1.disable_eager_execution()
    v1 = tf.compat.v1
    workers = args.workers.split(",")
    cluster = tf.train.ClusterSpec({"ps": args.ps.split(","), "worker": workers})
    server = tf.distribute.Server(cluster, job_name=args.job, task_index=args.index)
    if args.job == "ps":
        print(f"ps:{args.index} serving", flush=True)
        server.join()
        return

    is_chief = args.index == 0
    with v1.device(
        v1.train.replica_device_setter(
            worker_device=f"/job:worker/task:{args.index}", cluster=cluster
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
        optimizer = v1.train.SyncReplicasOptimizer(
            v1.train.GradientDescentOptimizer(args.learning_rate),
            replicas_to_aggregate=len(workers),
            total_num_replicas=len(workers),
        )
        train_op = optimizer.minimize(loss, global_step=global_step)

    sync_hook = optimizer.make_session_run_hook(is_chief)
    config = v1.ConfigProto(
        device_filters=["/job:ps", f"/job:worker/task:{args.index}"]
    )
    x_train, y_train = make_data(4096, seed=1 + args.index)
    x_test, y_test = make_data(2000, seed=100)
    rng = np.random.default_rng(args.index)
    start, mine = time.time(), 0
    with v1.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        hooks=[sync_hook],
        config=config,
        # The chief's token queue-runner blocks once the others stop taking
        # tokens; without a short grace, closing the session waits 120 s for it.
        stop_grace_period_secs=3,
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
            f"worker:{args.index} pushed {mine} gradients for {step} synchronous "
            f"steps in {time.time() - start:.1f} s",
            flush=True,
        )
        if is_chief:
            print(f"accuracy={test_accuracy:.4f}", flush=True)
    if is_chief and test_accuracy < args.min_accuracy:
        raise SystemExit(f"accuracy {test_accuracy:.4f} is below {args.min_accuracy}")


if __name__ == "__main__":
    main()
