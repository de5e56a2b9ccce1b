"""TF1-style between-graph asynchronous training, driven by the classic flags.

This is the shape of the old distributed-TensorFlow tutorials: every task is
started with ``--ps_hosts --worker_hosts --job_name --task_index``; ps tasks
block in ``server.join()``; each worker builds its own graph with
``replica_device_setter`` and trains in a ``MonitoredTrainingSession``. tfyarn
supplies the four flags itself::

    tfyarn data make-example hdfs:///tmp/tfyarn/digits      # once
    tfyarn submit --num_ps 1 --num_worker 2 --legacy_flags \\
        examples/tf1_async_legacy.py --steps 300

Each worker takes its own shard of the digits TFRecords (``--data``;
``tfyarn.data.stage_shard``: read from HDFS through tfyarn's plugin, or copied
to local disk where the plugin is not installed) and reads it with ``tf.data``
in its graph. Worker 0 is the
chief: it initializes the variables, or restores them from the latest
checkpoint in ``--checkpoint_dir`` on HDFS (a job started again, or restarted
by tfyarn after a failure, continues from there), saves checkpoints that
``tfyarn.checkpoint.saver_listener`` uploads, and, when the shared global step
reaches ``--steps``, prints ``steps=`` (the final checkpoint's step) and the
held-out ``accuracy=`` and exits, which ends the job (tfyarn stops the ps,
which would otherwise wait forever). ``device_filters`` keeps each worker
talking only to the ps and itself, so a worker does not hang when another one
has gone.

TF1's session manager makes a non-chief worker that finds the variables not yet
initialized check again only every 30 s, so in a run this short worker 1 may
join late or not at all; tfyarn stops it ``--worker_grace`` seconds after the
chief ends.
"""

from __future__ import annotations

import argparse
import tempfile

import tensorflow as tf

import tfyarn
import tfyarn.data as td
from tfyarn.checkpoint import download_latest, saver_listener

HIDDEN = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ps_hosts", required=True, help="h:p,h:p")
    parser.add_argument("--worker_hosts", required=True, help="h:p,h:p")
    parser.add_argument("--job_name", required=True, choices=["ps", "worker"])
    parser.add_argument("--task_index", type=int, required=True)
    parser.add_argument("--data", default="hdfs:///tmp/tfyarn/digits")
    parser.add_argument(
        "--checkpoint_dir", default="hdfs:///tmp/tfyarn/checkpoints/tf1_async_legacy"
    )
    parser.add_argument("--steps", type=int, default=300, help="total, across runs")
    parser.add_argument("--checkpoint_every", type=int, default=100)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.5)
    parser.add_argument(
        "--device_filters",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="--no-device_filters behaves like scripts copied from old posts",
    )
    args = parser.parse_args()

    tf.compat.v1.disable_eager_execution()
    v1 = tf.compat.v1
    workers = args.worker_hosts.split(",")
    cluster = tf.train.ClusterSpec({"ps": args.ps_hosts.split(","), "worker": workers})
    server = tf.distribute.Server(
        cluster, job_name=args.job_name, task_index=args.task_index
    )
    if args.job_name == "ps":
        print(f"ps:{args.task_index} serving", flush=True)
        server.join()
        return

    # This worker's files of the training set, and the whole test set: the
    # hdfs:// URLs with tfyarn's plugin, local copies without it.
    me = td.Shard(args.task_index, len(workers))
    train_files = td.stage_shard(args.data + "/train-*", "train", shard=me)
    test_files = td.stage_shard(args.data + "/test-*", "test", shard=td.Shard(0, 1))

    is_chief = args.task_index == 0
    with v1.device(  # tf.device (v2) refuses device functions
        v1.train.replica_device_setter(
            worker_device=f"/job:worker/task:{args.task_index}", cluster=cluster
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
        train_op = v1.train.GradientDescentOptimizer(args.learning_rate).minimize(
            loss, global_step=global_step
        )

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
    config = v1.ConfigProto(
        device_filters=["/job:ps", f"/job:worker/task:{args.task_index}"]
        if args.device_filters
        else None
    )
    with v1.train.MonitoredTrainingSession(
        master=server.target,
        is_chief=is_chief,
        checkpoint_dir=local_dir if is_chief else None,
        scaffold=v1.train.Scaffold(saver=saver),
        save_checkpoint_secs=None,  # our hook saves instead
        save_summaries_steps=None,
        chief_only_hooks=hooks,
        config=config,
    ) as sess:
        step = sess.run(global_step)
        while step < args.steps:
            _, step, loss_value = sess.run([train_op, global_step, loss])
            tfyarn.report_progress(step, loss=float(loss_value), total_steps=args.steps)
        test_accuracy = sess.run(accuracy)
    # The session's end saved a last checkpoint; its step is where a next run
    # starts (the other worker may have moved the shared step on meanwhile).
    if is_chief:
        final = tf.train.load_variable(
            tf.train.latest_checkpoint(local_dir), "global_step"
        )
        print(f"steps={final}", flush=True)
        print(f"accuracy={test_accuracy:.4f}", flush=True)


if __name__ == "__main__":
    main()
