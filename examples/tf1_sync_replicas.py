"""Synchronous parameter-server training the TF1 way: SyncReplicasOptimizer.

Each step, the chief worker waits for a gradient from every worker, averages
them on the ps and applies one update. The script names its own flags, so
tfyarn fills them through placeholders instead of ``--legacy_flags``::

    tfyarn data make-example hdfs:///tmp/tfyarn/digits      # once
    tfyarn submit --num_ps 1 --num_worker 2 examples/tf1_sync_replicas.py \\
        --job {job_name} --index {task_index} --ps {ps_hosts} \\
        --workers {worker_hosts} --steps 200

Each worker takes its own shard of the digits TFRecords (``--data``;
``tfyarn.data.stage_shard``: read from HDFS through tfyarn's plugin, or copied
to local disk where the plugin is not installed) and reads it with ``tf.data``
in its graph. Worker 0 (the chief)
restores from the latest checkpoint in ``--checkpoint_dir`` on HDFS if there is
one (a job started again, or restarted by tfyarn after a failure, continues
from there), saves checkpoints that ``tfyarn.checkpoint.saver_listener``
uploads, and once the global step reaches ``--steps`` prints ``steps=`` and
the held-out ``accuracy=`` and exits, which ends the job: tfyarn stops the ps
and, after a grace period, any worker still waiting for a sync token.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import tensorflow as tf

import tfyarn
import tfyarn.data as td
from tfyarn.checkpoint import download_latest, saver_listener

HIDDEN = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", required=True, choices=["ps", "worker"])
    parser.add_argument("--index", type=int, required=True)
    parser.add_argument("--ps", required=True, help="h:p,h:p")
    parser.add_argument("--workers", required=True, help="h:p,h:p")
    parser.add_argument("--data", default="hdfs:///tmp/tfyarn/digits")
    parser.add_argument(
        "--checkpoint_dir", default="hdfs:///tmp/tfyarn/checkpoints/tf1_sync_replicas"
    )
    parser.add_argument("--steps", type=int, default=200, help="total, across runs")
    parser.add_argument("--checkpoint_every", type=int, default=50)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.5)
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

    # This worker's files of the training set, and the whole test set: the
    # hdfs:// URLs with tfyarn's plugin, local copies without it.
    me = td.Shard(args.index, len(workers))
    train_files = td.stage_shard(args.data + "/train-*", "train", shard=me)
    test_files = td.stage_shard(args.data + "/test-*", "test", shard=td.Shard(0, 1))

    is_chief = args.index == 0
    with v1.device(
        v1.train.replica_device_setter(
            worker_device=f"/job:worker/task:{args.index}", cluster=cluster
        )
    ):
        train = tf.data.TFRecordDataset(train_files).shuffle(1000).repeat()
        x, y = v1.data.make_one_shot_iterator(
            train.batch(args.batch_size).map(td.parse_digits)
        ).get_next()
        test = tf.data.TFRecordDataset(test_files).batch(100_000)
        x_test, y_test = v1.data.make_one_shot_iterator(
            test.map(td.parse_digits)
        ).get_next()

        glorot, zeros = v1.glorot_normal_initializer(), v1.zeros_initializer()
        w1 = v1.get_variable("w1", [64, HIDDEN], initializer=glorot)
        b1 = v1.get_variable("b1", [HIDDEN], initializer=zeros)
        w2 = v1.get_variable("w2", [HIDDEN, 10], initializer=glorot)
        b2 = v1.get_variable("b2", [10], initializer=zeros)

        def logits_of(images: tf.Tensor) -> tf.Tensor:
            return tf.matmul(tf.nn.relu(tf.matmul(images, w1) + b1), w2) + b2

        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits_of(x))
        )
        predicted = tf.argmax(logits_of(x_test), axis=1)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(predicted, y_test), tf.float32))
        global_step = v1.train.get_or_create_global_step()
        optimizer = v1.train.SyncReplicasOptimizer(
            v1.train.GradientDescentOptimizer(args.learning_rate),
            replicas_to_aggregate=len(workers),
            total_num_replicas=len(workers),
        )
        train_op = optimizer.minimize(loss, global_step=global_step)

    # The chief saves into a local directory (ops outside the device scope run
    # on this worker, so the files land here, not on the ps), uploads each
    # checkpoint to HDFS, and restores from the newest one fetched from there.
    local_dir = tempfile.mkdtemp(prefix="ckpt-")
    saver = v1.train.Saver(max_to_keep=2, save_relative_paths=True)
    hooks = []
    if is_chief:
        restored = download_latest(args.checkpoint_dir, local_dir)
        # Read it here: once the session starts, other workers move the step.
        start_step = tf.train.load_variable(restored, "global_step") if restored else 0
        print(f"start_step={start_step}", flush=True)
        hooks.append(
            v1.train.CheckpointSaverHook(
                local_dir,
                save_steps=args.checkpoint_every,
                saver=saver,
                listeners=[saver_listener(args.checkpoint_dir, local_dir)],
            )
        )
    # After the checkpoint hook: its first save runs before any step can.
    hooks.append(optimizer.make_session_run_hook(is_chief))
    config = v1.ConfigProto(
        device_filters=["/job:ps", f"/job:worker/task:{args.index}"]
    )
    # A sync step waits for the other workers' gradients: bound that wait.
    wait_at_most = v1.RunOptions(timeout_in_ms=10_000)
    start, mine = time.time(), 0
    with v1.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        checkpoint_dir=local_dir if is_chief else None,
        scaffold=v1.train.Scaffold(saver=saver),
        save_checkpoint_secs=None,  # our hook saves instead
        save_summaries_steps=None,
        hooks=hooks,
        config=config,
        # The chief's token queue-runner blocks once the others stop taking
        # tokens; without a short grace, closing the session waits 120 s for it.
        stop_grace_period_secs=3,
    ) as sess:
        step = sess.run(global_step)
        while step < args.steps:
            try:
                _, step, loss_value = sess.run(
                    [train_op, global_step, loss], options=wait_at_most
                )
            except tf.errors.DeadlineExceededError:
                # No step completed in time: the other worker may have finished
                # the last steps and left, or not have joined yet; look again.
                step = sess.run(global_step)
                continue
            tfyarn.report_progress(step, loss=float(loss_value), total_steps=args.steps)
            mine += 1
        test_accuracy = sess.run(accuracy)
        print(
            f"worker:{args.index} pushed {mine} gradients, at step {step} "
            f"after {time.time() - start:.1f} s",
            flush=True,
        )
    # The session's end saved a last checkpoint; its step is where a next run
    # starts (a sync update may have landed after our last read of the step).
    if is_chief:
        final = tf.train.load_variable(
            tf.train.latest_checkpoint(local_dir), "global_step"
        )
        print(f"steps={final}", flush=True)
        print(f"accuracy={test_accuracy:.4f}", flush=True)


if __name__ == "__main__":
    main()
