"""Synchronous MultiWorkerMirroredStrategy training: Keras 3 layers, custom loop.

Run on YARN (workers only; worker 0 acts as chief)::

    tfyarn submit --num_worker 2 examples/mwms_keras.py --epochs 3

Every worker runs the same program. Gradients are all-reduced across workers
each step, so all replicas hold identical weights. (Keras 3's ``model.fit``
does not work under this strategy, hence the custom loop.) Worker 0 prints the
held-out ``accuracy=0.9xxx`` at the end.

The problem is synthetic and in memory: points inside or outside a circle (no
straight line separates them, so the hidden layers matter); every worker
generates the same data and the strategy shards it.
"""

from __future__ import annotations

import argparse
import json
import os

import keras
import numpy as np
import tensorflow as tf


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Points inside / outside a circle: not linearly separable."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1, 1, size=(n, 2)).astype("float32")
    y = ((x**2).sum(axis=1) < 0.5).astype("float32")
    return x, y


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--global_batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.05)
    parser.add_argument("--min_accuracy", type=float, default=0.9)
    args = parser.parse_args()

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    is_lead = task["type"] == "chief" or (
        task["type"] == "worker" and task["index"] == 0
    )
    print(
        f"{task['type']}:{task['index']} in sync with "
        f"{strategy.num_replicas_in_sync} replicas",
        flush=True,
    )

    x, y = make_data(4096, seed=1)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = (
        tf.data.experimental.AutoShardPolicy.DATA
    )
    dataset = (
        tf.data.Dataset.from_tensor_slices((x, y[:, None]))
        .shuffle(4096, seed=0)
        .batch(args.global_batch_size, drop_remainder=True)
        .with_options(options)
    )
    dist_dataset = strategy.experimental_distribute_dataset(dataset)

    with strategy.scope():
        model = keras.Sequential(
            [
                keras.Input(shape=(2,)),
                keras.layers.Dense(32, activation="relu"),
                keras.layers.Dense(32, activation="relu"),
                keras.layers.Dense(1),
            ]
        )
        optimizer = keras.optimizers.Adam(learning_rate=args.learning_rate)

    def replica_step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = model(xb, training=True)
            per_example = tf.nn.sigmoid_cross_entropy_with_logits(
                labels=yb, logits=logits
            )
            loss = tf.nn.compute_average_loss(
                per_example, global_batch_size=args.global_batch_size
            )
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step(xb: tf.Tensor, yb: tf.Tensor) -> tf.Tensor:
        losses = strategy.run(replica_step, args=(xb, yb))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    steps = 0
    for epoch in range(args.epochs):
        total = 0.0
        batches = 0
        for xb, yb in dist_dataset:
            total += float(train_step(xb, yb))
            batches += 1
            steps += 1
        print(f"epoch {epoch + 1}: loss={total / max(batches, 1):.4f}", flush=True)

    x_test, y_test = make_data(2000, seed=2)
    logits = model(x_test, training=False).numpy()[:, 0]
    accuracy = float(np.mean((logits > 0) == (y_test > 0.5)))
    print(f"steps={steps}", flush=True)
    if is_lead:
        print(f"accuracy={accuracy:.4f}", flush=True)
        if accuracy < args.min_accuracy:
            raise SystemExit(f"accuracy {accuracy:.4f} is below {args.min_accuracy}")


if __name__ == "__main__":
    main()
