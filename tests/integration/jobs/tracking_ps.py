"""A small ParameterServerStrategy job that keeps running until the test is done.

ps and worker tasks serve; the chief schedules a one-variable step on the
workers every ``--step_sleep`` seconds and reports it (``tfyarn.report_progress``
with ``total_steps``), until the test puts ``test.done`` in the application's
key-value store or ``--total_steps`` ran out (so a forgotten job ends by itself).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import skein
import tensorflow as tf

import tfyarn


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--total_steps", type=int, default=400)
    parser.add_argument("--step_sleep", type=float, default=0.25)
    args = parser.parse_args()
    task = json.loads(os.environ["TF_CONFIG"])["task"]
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
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        counter = tf.Variable(0, dtype=tf.int64)

    @tf.function
    def step() -> tf.Tensor:
        return counter.assign_add(1)

    app = skein.ApplicationClient.from_current()
    for n in range(1, args.total_steps + 1):
        coordinator.schedule(step)
        coordinator.join()
        tfyarn.report_progress(n, loss=1.0 / n, total_steps=args.total_steps)
        if app.kv.get("test.done"):
            break
        time.sleep(args.step_sleep)
    print(f"steps={int(counter.numpy())}", flush=True)


if __name__ == "__main__":
    main()
