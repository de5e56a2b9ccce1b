"""The training measured by ``overhead.py``, launched by hand or by tfyarn.

Reads its place from ``TF_CONFIG`` only (no tfyarn import), so both launches
run exactly the same code. ``--mode mwms``: every worker trains with
MultiWorkerMirroredStrategy, worker 0 reports. ``--mode ps``: ps and workers
serve, the chief coordinates with ParameterServerStrategy and reports. The lead
prints ``OVERHEAD_RESULT {"steps": N, "seconds": S}`` for the timed steps,
after ``--warmup`` steps that are not timed (graph tracing, connections).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import tensorflow as tf

BATCH = 256
FEATURES = 64
HIDDEN = 256


def _data() -> tf.data.Dataset:
    x = tf.random.stateless_normal([BATCH * 8, FEATURES], [1, 2])
    y = tf.cast(tf.reduce_sum(x, axis=1) > 0, tf.int32)
    return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH)


def _variables() -> list[tf.Variable]:
    return [
        tf.Variable(tf.random.stateless_normal([FEATURES, HIDDEN], [3, 4]) * 0.1),
        tf.Variable(tf.zeros([HIDDEN])),
        tf.Variable(tf.random.stateless_normal([HIDDEN, 2], [5, 6]) * 0.1),
        tf.Variable(tf.zeros([2])),
    ]


def _loss(variables: list[tf.Variable], x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
    w1, b1, w2, b2 = variables
    logits = tf.nn.relu(x @ w1 + b1) @ w2 + b2
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)
    )


def _report(steps: int, seconds: float) -> None:
    print("OVERHEAD_RESULT " + json.dumps({"steps": steps, "seconds": seconds}))


def mwms(args: argparse.Namespace, task: dict) -> None:
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        variables = _variables()
        optimizer = tf.keras.optimizers.SGD(0.1)
    iterator = iter(strategy.experimental_distribute_dataset(_data()))

    @tf.function
    def step() -> None:
        def replica_step(x: tf.Tensor, y: tf.Tensor) -> None:
            with tf.GradientTape() as tape:
                loss = _loss(variables, x, y)
            grads = tape.gradient(loss, variables)
            optimizer.apply_gradients(zip(grads, variables, strict=True))

        strategy.run(replica_step, args=next(iterator))

    for _ in range(args.warmup):
        step()
    started = time.perf_counter()
    for _ in range(args.steps):
        step()
    # The last step's all-reduce has returned on every worker once this runs.
    seconds = time.perf_counter() - started
    if task["index"] == 0:
        _report(args.steps, seconds)


def ps(args: argparse.Namespace, task: dict) -> None:
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if task["type"] in ("ps", "worker"):
        tf.distribute.Server(
            resolver.cluster_spec(),
            job_name=task["type"],
            task_index=task["index"],
            protocol="grpc",
            start=True,
        ).join()
        return
    coordinate(resolver, args.steps, args.warmup)


def coordinate(resolver: object, steps: int, warmup: int) -> None:
    """The coordinator's part, wherever it runs (a chief in YARN, or a program
    on the gateway: tests/benchmarks/servers.py). Prints ``FIRST_STEP_AT`` (wall
    clock) once the first step has run on a worker."""
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        variables = _variables()
        optimizer = tf.keras.optimizers.SGD(0.1)
    per_worker = coordinator.create_per_worker_dataset(lambda: _data())
    iterator = iter(per_worker)

    @tf.function
    def step(it: object) -> None:
        def replica_step(x: tf.Tensor, y: tf.Tensor) -> None:
            with tf.GradientTape() as tape:
                loss = _loss(variables, x, y)
            grads = tape.gradient(loss, variables)
            optimizer.apply_gradients(zip(grads, variables, strict=True))

        strategy.run(replica_step, args=next(it))

    coordinator.schedule(step, args=(iterator,))
    coordinator.join()
    print(f"FIRST_STEP_AT {time.time()}", flush=True)
    for _ in range(warmup):
        coordinator.schedule(step, args=(iterator,))
    coordinator.join()
    started = time.perf_counter()
    for _ in range(steps):
        coordinator.schedule(step, args=(iterator,))
    coordinator.join()
    _report(steps, time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["mwms", "ps"], required=True)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()
    task = json.loads(os.environ["TF_CONFIG"])["task"]
    (mwms if args.mode == "mwms" else ps)(args, task)


if __name__ == "__main__":
    main()
