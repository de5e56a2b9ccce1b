"""MultiWorkerMirrored training that survives restarts (fault-injection tests).

Every worker trains a small Keras model on in-memory data in lock-step
(all-reduce); the lead (worker 0) reports progress to the master and uploads
checkpoints to ``--checkpoint_dir`` on HDFS every ``--checkpoint_every`` steps
(every worker calls ``save``, as MWMS needs). A restarted cluster resumes from
the latest checkpoint. Prints ``start_step=``, ``steps=`` and (lead)
``accuracy=``.
"""

from __future__ import annotations

import argparse
import time

import keras
import numpy as np
import tensorflow as tf

import tfyarn
from tfyarn.checkpoint import CheckpointManager, is_chief

DIM = 10


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    w_true = np.random.default_rng(0).normal(size=DIM).astype("float32")
    x = rng.normal(size=(n, DIM)).astype("float32")
    return x, (x @ w_true + 0.1 > 0).astype("int64")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint_dir", required=True)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--step_sleep", type=float, default=0.1)
    parser.add_argument("--checkpoint_every", type=int, default=30)
    args = parser.parse_args()

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    lead = is_chief()
    x, y = make_data(4096, seed=1)
    ds = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(4096).repeat().batch(64)
    iterator = iter(strategy.experimental_distribute_dataset(ds))
    with strategy.scope():
        model = keras.Sequential([keras.Input(shape=(DIM,)), keras.layers.Dense(2)])
        optimizer = keras.optimizers.SGD(learning_rate=0.5)
        optimizer.build(model.trainable_variables)
        step = tf.Variable(0, dtype=tf.int64, trainable=False, name="step")
    manager = CheckpointManager(
        tf.train.Checkpoint(model=model, optimizer=optimizer, step=step),
        args.checkpoint_dir,
        max_to_keep=2,
    )
    restored = manager.restore_or_initialize()
    start = int(step.numpy())
    print(f"restored={restored} start_step={start}", flush=True)
    if lead:
        tfyarn.report_progress(start, total_steps=args.steps)

    def replica_step(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(
                y, model(x, training=True)
            )
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=64)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def train_step() -> tf.Tensor:
        xb, yb = next(iterator)
        losses = strategy.run(replica_step, args=(xb, yb))
        step.assign_add(1)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)

    current = start
    while current < args.steps:
        train_step()
        current = int(step.numpy())
        if lead:
            tfyarn.report_progress(current, total_steps=args.steps)
        if current % args.checkpoint_every == 0:
            manager.save()
        time.sleep(args.step_sleep)
    manager.save()
    print(f"steps={current}", flush=True)
    if lead:
        x_test, y_test = make_data(2000, seed=2)
        predicted = np.argmax(model(x_test, training=False).numpy(), axis=1)
        print(f"accuracy={float(np.mean(predicted == y_test)):.4f}", flush=True)


if __name__ == "__main__":
    main()
