"""ParameterServerStrategy training that survives restarts (fault-injection tests).

ps and worker tasks serve; the chief coordinates a custom loop in rounds of
``--round`` steps, reports each round's step to the master
(``tfyarn.report_progress``) and checkpoints to ``--checkpoint_dir`` on HDFS
(``tfyarn.checkpoint``) every ``--checkpoint_every`` steps. A restarted chief
resumes from the latest checkpoint. Prints ``start_step=``, ``steps=`` and
``accuracy=``. ``--round_sleep`` paces training so a test can fault it midway.
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np
import tensorflow as tf

import tfyarn
from tfyarn.checkpoint import CheckpointManager

DIM = 10


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Linearly separable points: label = (x . w_true + 0.1 > 0)."""
    rng = np.random.default_rng(seed)
    w_true = np.random.default_rng(0).normal(size=DIM).astype("float32")
    x = rng.normal(size=(n, DIM)).astype("float32")
    return x, (x @ w_true + 0.1 > 0).astype("float32")


# Each worker writes its identity into its own container's working directory;
# the per-worker dataset reads it there (a graph op, so on the worker), and
# every step adds one to that identity's counter: the steps each worker
# attempt ran, which shows a replaced worker was taken back.
IDENTITY_FILE = "tfyarn_task_slot.txt"
ATTEMPTS = 10  # slot = worker index * ATTEMPTS + attempt


def serve(task: dict) -> None:
    if task["type"] == "worker":
        slot = task["index"] * ATTEMPTS + int(os.environ.get("TFYARN_ATTEMPT", "0"))
        with open(IDENTITY_FILE, "w") as f:
            f.write(str(slot))
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
        w = tf.Variable(tf.zeros([DIM, 1]), name="w")
        b = tf.Variable(tf.zeros([1]), name="b")
        step = tf.Variable(0, dtype=tf.int64, name="step")
        by_slot = tf.Variable(tf.zeros([100 * ATTEMPTS], tf.int64), name="by_slot")
    manager = CheckpointManager(
        tf.train.Checkpoint(w=w, b=b, step=step), args.checkpoint_dir, chief=True
    )
    restored = manager.restore_or_initialize()
    start = int(step.numpy())
    print(f"restored={restored} start_step={start}", flush=True)
    tfyarn.report_progress(start, total_steps=args.steps)

    def dataset_fn() -> tf.data.Dataset:
        x, y = make_data(4096, seed=1)
        ds = tf.data.Dataset.from_tensor_slices((x, y[:, None]))
        slot = tf.strings.to_number(tf.io.read_file(IDENTITY_FILE), tf.int64)
        return ds.shuffle(4096).repeat().batch(64).map(lambda x, y: (x, y, slot))

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def train_step(it: tf.data.Iterator) -> tf.Tensor:
        def replica_fn(x: tf.Tensor, y: tf.Tensor, slot: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                logits = tf.matmul(x, w) + b
                loss = tf.reduce_mean(
                    tf.nn.sigmoid_cross_entropy_with_logits(labels=y, logits=logits)
                )
            gw, gb = tape.gradient(loss, [w, b])
            w.assign_sub(0.5 * gw)
            b.assign_sub(0.5 * gb)
            step.assign_add(1)  # at least once per scheduled step (async PS)
            by_slot.scatter_add(tf.IndexedSlices(tf.ones([1], tf.int64), [slot]))
            return loss

        x, y, slot = next(it)
        return strategy.run(replica_fn, args=(x, y, slot))

    saved_at = start
    current = start
    while current < args.steps:
        for _ in range(args.round):
            coordinator.schedule(train_step, args=(iterator,))
        coordinator.join()
        current = int(step.numpy())
        tfyarn.report_progress(current, total_steps=args.steps)
        if current - saved_at >= args.checkpoint_every:
            manager.save()
            saved_at = current
            print(f"checkpoint at step {current}", flush=True)
        if args.hang_at and current >= args.hang_at and _restart() == 0:
            print(f"hanging at step {current} (a wedged input pipeline)", flush=True)
            time.sleep(3600)  # alive and heartbeating, but no progress
        time.sleep(args.round_sleep)
    manager.save()
    x_test, y_test = make_data(2000, seed=2)
    logits = x_test @ w.numpy() + b.numpy()
    accuracy = float(np.mean((logits[:, 0] > 0) == (y_test > 0.5)))
    print(f"steps={current}", flush=True)
    counts = by_slot.numpy()
    ran = {
        f"worker:{n // ATTEMPTS} attempt {n % ATTEMPTS}": int(counts[n])
        for n in np.flatnonzero(counts)
    }
    print(f"steps_by_worker={json.dumps(ran)}", flush=True)
    print(f"accuracy={accuracy:.4f}", flush=True)


def _restart() -> int:
    return int(os.environ.get("TFYARN_RESTART", "0"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint_dir", required=True)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--round", type=int, default=10)
    parser.add_argument("--round_sleep", type=float, default=0.5)
    parser.add_argument("--checkpoint_every", type=int, default=40)
    parser.add_argument(
        "--hang_at", type=int, default=0, help="first run only: stop progressing here"
    )
    args = parser.parse_args()
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    print(f"{task['type']}:{task['index']} TFYARN_RESTART={_restart()}", flush=True)
    if task["type"] in ("ps", "worker"):
        serve(task)
    else:
        coordinate(args)


if __name__ == "__main__":
    main()
