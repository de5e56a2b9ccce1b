"""TF1 in-graph replication from the gateway, against servers on YARN.

The two-step way: start the servers, then run this client on the gateway with
only the printed flags::

    tfyarn data make-example hdfs:///tmp/tfyarn/digits      # once
    tfyarn servers --num_ps 1 --num_worker 2 --detach > servers.txt
    python examples/in_graph_client.py $(sed -n 2p servers.txt) --steps 200
    tfyarn kill $(head -1 servers.txt)

One client builds one graph: the variables on ``/job:ps``, a copy of the
forward and backward pass on each ``/job:worker/task:i`` (each reading its own
shard of the ``hdfs://`` TFRecords, on the worker: the servers read HDFS
through tfyarn's plugin), the averaged gradients applied on the ps; it drives
the graph through a session on worker 0's target. It saves a checkpoint to
``--checkpoint_dir`` on HDFS (the save op runs on a server; this process
writes the ``checkpoint`` index, through ``tfyarn.enable_hdfs()``), resumes
from it when run again, and prints ``steps=`` and the held-out ``accuracy=``.
"""

from __future__ import annotations

import argparse

import tensorflow as tf

import tfyarn
from tfyarn.data import parse_digits

HIDDEN = 64


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ps_hosts", required=True, help="h:p,h:p")
    parser.add_argument("--worker_hosts", required=True, help="h:p,h:p")
    parser.add_argument("--data", default="hdfs:///tmp/tfyarn/digits")
    parser.add_argument(
        "--checkpoint_dir", default="hdfs:///tmp/tfyarn/checkpoints/in_graph_client"
    )
    parser.add_argument("--steps", type=int, default=200, help="total, across runs")
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.5)
    args = parser.parse_args()

    tfyarn.enable_hdfs()  # this process lists the data and writes the index file
    tf.compat.v1.disable_eager_execution()
    v1 = tf.compat.v1
    workers = args.worker_hosts.split(",")
    train_files = sorted(tf.io.gfile.glob(args.data + "/train-*"))
    test_files = sorted(tf.io.gfile.glob(args.data + "/test-*"))
    if not train_files or not test_files:
        raise SystemExit(f"no train-*/test-* files under {args.data}")

    with tf.device("/job:ps/task:0"):
        glorot, zeros = v1.glorot_normal_initializer(), v1.zeros_initializer()
        w1 = v1.get_variable("w1", [64, HIDDEN], initializer=glorot)
        b1 = v1.get_variable("b1", [HIDDEN], initializer=zeros)
        w2 = v1.get_variable("w2", [HIDDEN, 10], initializer=glorot)
        b2 = v1.get_variable("b2", [10], initializer=zeros)
        global_step = v1.train.get_or_create_global_step()
    params = [w1, b1, w2, b2]

    def logits_of(images: tf.Tensor) -> tf.Tensor:
        return tf.matmul(tf.nn.relu(tf.matmul(images, w1) + b1), w2) + b2

    optimizer = v1.train.GradientDescentOptimizer(args.learning_rate)
    tower_grads, losses = [], []
    for i in range(len(workers)):
        with tf.device(f"/job:worker/task:{i}"):
            shard = train_files[i :: len(workers)] or train_files
            data = tf.data.TFRecordDataset(shard).shuffle(1000).repeat()
            x, y = v1.data.make_one_shot_iterator(
                data.batch(args.batch_size).map(parse_digits)
            ).get_next()
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(y, logits_of(x))
            )
            losses.append(loss)
            tower_grads.append(optimizer.compute_gradients(loss, var_list=params))
    with tf.device("/job:ps/task:0"):
        averaged = [
            (tf.add_n([g for g, _ in pairs]) / len(pairs), pairs[0][1])
            for pairs in zip(*tower_grads, strict=True)
        ]
        train_op = optimizer.apply_gradients(averaged, global_step=global_step)
    with tf.device("/job:worker/task:0"):
        test = tf.data.TFRecordDataset(test_files).batch(100_000).map(parse_digits)
        x_test, y_test = v1.data.make_one_shot_iterator(test).get_next()
        predicted = tf.argmax(logits_of(x_test), axis=1)
        accuracy = tf.reduce_mean(tf.cast(tf.equal(predicted, y_test), tf.float32))
    saver = v1.train.Saver([*params, global_step])

    target = "grpc://" + workers[0]
    with v1.Session(target) as sess:
        latest = tf.train.latest_checkpoint(args.checkpoint_dir)
        if latest:
            saver.restore(sess, latest)
        else:
            sess.run(v1.global_variables_initializer())
        start = int(sess.run(global_step))
        print(f"start_step={start} towers={len(workers)}", flush=True)
        # One traced step: which tasks ran its ops (the ps and every worker).
        traced = v1.RunMetadata()
        _, step = sess.run(
            [train_op, global_step],
            options=v1.RunOptions(trace_level=v1.RunOptions.FULL_TRACE),
            run_metadata=traced,
        )
        tasks = sorted(
            {d.device.split("/device:")[0] for d in traced.step_stats.dev_stats}
        )
        print("ran_on=" + ",".join(tasks), flush=True)
        while step < args.steps:
            _, step, loss_value = sess.run([train_op, global_step, losses[0]])
            if step % 50 == 0:
                print(f"step={step} loss={loss_value:.4f}", flush=True)
        path = saver.save(sess, args.checkpoint_dir + "/model", global_step=step)
        print(f"saved={path}", flush=True)
        print(f"steps={step}", flush=True)
        print(f"accuracy={sess.run(accuracy):.4f}", flush=True)


if __name__ == "__main__":
    main()
