"""ParameterServerStrategy reading hdfs:// on the workers, with an evaluator.

Run on YARN::

    tfyarn data make-example hdfs:///tmp/tfyarn/digits      # once
    tfyarn submit --num_chief 1 --num_ps 1 --num_worker 2 --num_evaluator 1 \\
        examples/ps_hdfs_evaluator.py --steps 200

Plain TensorFlow, no tfyarn import: tfyarn registers its ``hdfs://`` plugin in
every task before the script's first line.

- ps and worker tasks start a TensorFlow server and serve. Nothing is staged:
  the chief's dataset function (``create_per_worker_dataset``) runs *on each
  worker* and reads the TFRecord shards under ``--data`` on HDFS there, every
  worker all of them in its own random order (shuffled file list, shuffle
  buffer, repeat: TensorFlow's advice for parameter-server input, which has no
  per-worker sharding).
- The chief builds the ``ParameterServerStrategy``, schedules training steps
  with a ``ClusterCoordinator`` (a custom loop: Keras 3 dropped ``model.fit``
  for this strategy) and saves a checkpoint to ``--checkpoint_dir`` on HDFS
  every ``--checkpoint_every`` steps and at the end, with
  ``tf.train.CheckpointManager``. A job started again with the same directory
  resumes from the latest checkpoint until the step count reaches ``--steps``.
- The evaluator (no strategy, not in the cluster) watches ``--checkpoint_dir``
  with ``tf.train.checkpoints_iterator``, evaluates each new checkpoint on the
  held-out ``test-*`` shards and writes ``accuracy`` and ``loss`` summaries
  under ``<checkpoint_dir>/eval`` on HDFS (point TensorBoard there). It prints
  ``evaluated step=N accuracy=A`` per checkpoint.

The evaluator never ends by itself: when the chief exits 0, tfyarn stops it
(SIGTERM, then SIGKILL after ``--stop_grace``, 10 s by default). On SIGTERM it
stops waiting and evaluates the latest checkpoint if it has not yet (the chief
saved its final one before exiting), so the last summary is the final
model's; raise ``--stop_grace`` if one evaluation takes longer. It then prints
``evaluator done: evaluated=K last_step=N`` and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading

import tensorflow as tf

HIDDEN = 64
FEATURES = {
    "image": tf.io.FixedLenFeature([64], tf.float32),
    "label": tf.io.FixedLenFeature([], tf.int64),
}


def parse(serialized: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    parsed = tf.io.parse_example(serialized, FEATURES)
    return parsed["image"], parsed["label"]


class Model:
    """A 64-unit MLP as plain variables: the chief's live on the ps."""

    def __init__(self) -> None:
        self.w1 = tf.Variable(tf.random.stateless_normal([64, HIDDEN], [1, 2]) * 0.18)
        self.b1 = tf.Variable(tf.zeros([HIDDEN]))
        self.w2 = tf.Variable(tf.random.stateless_normal([HIDDEN, 10], [3, 4]) * 0.3)
        self.b2 = tf.Variable(tf.zeros([10]))
        self.step = tf.Variable(0, dtype=tf.int64, name="step")
        self.params = [self.w1, self.b1, self.w2, self.b2]

    def logits(self, x: tf.Tensor) -> tf.Tensor:
        return tf.nn.relu(x @ self.w1 + self.b1) @ self.w2 + self.b2

    def loss(self, x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
        return tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(y, self.logits(x))
        )

    def checkpoint(self) -> tf.train.Checkpoint:
        # The same object graph on the chief and the evaluator.
        return tf.train.Checkpoint(params=self.params, step=self.step)


def serve(task: dict, _args: argparse.Namespace) -> None:
    """ps and worker tasks: host variables / run steps until tfyarn stops us."""
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(
        resolver.cluster_spec(),
        job_name=task["type"],
        task_index=task["index"],
        protocol=resolver.rpc_layer or "grpc",
        start=True,
    )
    print(f"{task['type']}:{task['index']} serving at {server.target}", flush=True)
    server.join()


def coordinate(args: argparse.Namespace) -> None:
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = Model()
    manager = tf.train.CheckpointManager(
        model.checkpoint(), args.checkpoint_dir, max_to_keep=3
    )
    if manager.latest_checkpoint:
        model.checkpoint().restore(manager.latest_checkpoint)
    print(f"start_step={int(model.step.numpy())}", flush=True)

    def dataset_fn() -> tf.data.Dataset:
        # Built here, run on each worker: the glob and the reads are the worker's.
        files = tf.data.Dataset.list_files(args.data + "/train-*", shuffle=True)
        return (
            files.interleave(tf.data.TFRecordDataset, cycle_length=2)
            .shuffle(1000)
            .repeat()
            .batch(args.batch_size)
            .map(parse)
            .prefetch(2)
        )

    iterator = iter(coordinator.create_per_worker_dataset(dataset_fn))

    @tf.function
    def train_step(iterator: tf.data.Iterator) -> tf.Tensor:
        def replica_fn(x: tf.Tensor, y: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = model.loss(x, y)
            # Plain SGD on the ps variables (a Keras optimizer's step counter
            # loses increments under asynchronous updates).
            grads = tape.gradient(loss, model.params)
            for var, grad in zip(model.params, grads, strict=True):
                var.assign_sub(args.learning_rate * grad)
            model.step.assign_add(1)
            return loss

        return strategy.run(replica_fn, args=next(iterator))

    current = int(model.step.numpy())
    while current < args.steps:
        todo = min(args.checkpoint_every, args.steps - current)
        losses = [coordinator.schedule(train_step, (iterator,)) for _ in range(todo)]
        coordinator.join()
        current, loss = int(model.step.numpy()), float(losses[-1].fetch())
        manager.save(checkpoint_number=current)
        print(f"step {current}: loss={loss:.4f} saved", flush=True)
    print(f"steps={current}", flush=True)


def evaluate(args: argparse.Namespace) -> None:
    """The evaluator: every new checkpoint in --checkpoint_dir, until stopped."""
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())

    model = Model()
    checkpoint = model.checkpoint()
    test = tf.data.TFRecordDataset(tf.io.gfile.glob(args.data + "/test-*"))
    x, y = parse(next(iter(test.batch(100_000))))
    summaries = tf.summary.create_file_writer(args.checkpoint_dir + "/eval")
    evaluated: list[int] = []

    def evaluate_one(path: str) -> None:
        try:
            checkpoint.restore(path).assert_existing_objects_matched()
        except tf.errors.NotFoundError:
            # max_to_keep deleted it before we got to it; a newer one follows.
            print(f"skipped {path}: already deleted", flush=True)
            return
        step = int(model.step.numpy())
        predicted = tf.argmax(model.logits(x), axis=1)
        accuracy = float(tf.reduce_mean(tf.cast(predicted == y, tf.float32)))
        loss = float(model.loss(x, y))
        with summaries.as_default(step=step):
            tf.summary.scalar("accuracy", accuracy)
            tf.summary.scalar("loss", loss)
        summaries.flush()  # readers of the HDFS file see it now
        evaluated.append(step)
        print(f"evaluated step={step} accuracy={accuracy:.4f}", flush=True)

    last = None
    for path in tf.train.checkpoints_iterator(
        args.checkpoint_dir,
        min_interval_secs=args.eval_interval,
        timeout=1,
        timeout_fn=stopping.is_set,  # True: stop waiting for more
    ):
        evaluate_one(path)
        last = path
        if stopping.is_set():
            break
    # Stopped: the chief has ended, so the latest checkpoint is its final one.
    final = tf.train.latest_checkpoint(args.checkpoint_dir)
    if final and final != last:
        evaluate_one(final)
    summaries.close()
    last_step = evaluated[-1] if evaluated else -1
    print(
        f"evaluator done: evaluated={len(evaluated)} last_step={last_step}", flush=True
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default="hdfs:///tmp/tfyarn/digits")
    parser.add_argument(
        "--checkpoint_dir", default="hdfs:///tmp/tfyarn/checkpoints/ps_hdfs_evaluator"
    )
    parser.add_argument("--steps", type=int, default=200, help="total, across runs")
    parser.add_argument("--checkpoint_every", type=int, default=50)
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--learning_rate", type=float, default=0.5)
    parser.add_argument(
        "--eval_interval", type=float, default=0, help="seconds between evaluations"
    )
    args = parser.parse_args()

    task = json.loads(os.environ["TF_CONFIG"])["task"]
    if task["type"] in ("ps", "worker"):
        serve(task, args)
    elif task["type"] == "chief":
        coordinate(args)
    elif task["type"] == "evaluator":
        evaluate(args)
    else:
        raise SystemExit(f"this example has no {task['type']} task")


if __name__ == "__main__":
    main()
