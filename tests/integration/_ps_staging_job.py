"""A ParameterServerStrategy cluster of local processes reading staged HDFS data.

Run as ``python _ps_staging_job.py ROLE SRC_PATTERN`` (ps/worker/chief) with
TF_CONFIG set; the chief prints ``RESULT <n> <distinct>``. Used by
test_hdfs_ps_staging.py: proves that workers stage their own shard before
serving and that create_per_worker_dataset reads it on each worker.
"""

from __future__ import annotations

import sys

import tensorflow as tf

import tfyarn.data as td

STEPS = 16
BATCH = 5


def main() -> None:
    role, pattern = sys.argv[1], sys.argv[2]
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    if role != "chief":
        if role == "worker":
            print("staged", td.stage_shard(pattern, "train"), flush=True)
        server = tf.distribute.Server(
            resolver.cluster_spec(),
            job_name=resolver.task_type,
            task_index=resolver.task_id,
            protocol="grpc",
            start=True,
        )
        server.join()
        return
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    fn = td.per_worker_dataset_fn(
        "train",
        batch_size=BATCH,
        map_fn=lambda b: tf.strings.to_number(b, tf.int64),
        repeat=False,
    )
    iterator = iter(coordinator.create_per_worker_dataset(fn))

    @tf.function
    def step(it):  # type: ignore[no-untyped-def]
        return next(it)

    results = [coordinator.schedule(step, args=(iterator,)) for _ in range(STEPS)]
    coordinator.join()
    values = [v for r in results for v in r.fetch().tolist()]
    print(f"RESULT {len(values)} {len(set(values))}", flush=True)


if __name__ == "__main__":
    main()
