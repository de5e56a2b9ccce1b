"""A job that uses HDFS before and after its first delegation tokens end.

``python _long_token_job.py BASE [--plain]`` with BASE an ``hdfs://`` directory
holding ``in.txt``. It reads when its submission's HDFS tokens end from its
token file, then:

1. reads ``BASE/in.txt`` and (not ``--plain``) trains a tiny model under
   MultiWorkerMirroredStrategy, 5 steps, and checkpoints to ``BASE/ckpt``;
2. sleeps until 15 s past the tokens' end;
3. reads ``in.txt`` and writes ``BASE/out-<index>.txt`` in a new process (a
   new NameNode connection, which needs a valid token: an open connection
   outlives its token), then (not ``--plain``) trains 5 more steps and
   checkpoints again.

``--plain`` (no TensorFlow, no step 1) is the keytab-less job, which fails in
step 3. "End" is when hdfs-native stops using a token: 60 s before its
maximum date (``tfyarn.contract.tokens.CLIENT_SLACK_S``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from tfyarn.contract.tokens import HDFS_KIND, TokenFile, dates, usable_until
from tfyarn.data import fs

CHILD = """
import sys
from tfyarn.data import fs
src, dst = sys.argv[1], sys.argv[2]
data = b"".join(fs.resolve(src).read_chunks(src))
with fs.resolve(dst).open_output(dst) as out:
    out.write(data)
print("new connection read", len(data), "bytes", flush=True)
"""


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def read(url: str) -> bytes:
    return b"".join(fs.resolve(url).read_chunks(url))


def main() -> None:
    base, plain = sys.argv[1].rstrip("/"), "--plain" in sys.argv
    index = (
        json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {}).get("index", 0)
    )
    token_file = TokenFile.read(os.environ["HADOOP_TOKEN_FILE_LOCATION"])
    found = token_file.of_kind(HDFS_KIND)
    ends = min(usable_until(d) for t in found if (d := dates(t)))
    say(f"TOKENS_END in {ends - time.time():.0f} s")
    say(f"keytab in this task: {os.path.exists('tfyarn.keytab')}")
    if not plain:  # (the plain job may start too late to use its tokens)
        say(f"PHASE1 read {len(read(base + '/in.txt'))} bytes")
        train = trainer(base)
        say(f"PHASE1 ok step={train()}")
    while time.time() < ends + 15:
        time.sleep(min(10.0, ends + 15 - time.time()))
    say("the submission's tokens have ended")
    done = subprocess.run(
        [sys.executable, "-c", CHILD, f"{base}/in.txt", f"{base}/out-{index}.txt"],
        capture_output=True,
        text=True,
        check=False,
    )
    sys.stdout.write(done.stdout)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        sys.exit(1)
    say(f"PHASE2 read {len(read(base + '/in.txt'))} bytes (open connection)")
    if not plain:
        say(f"PHASE2 ok step={train()}")


def trainer(base: str):  # type: ignore[no-untyped-def]
    import tensorflow as tf

    from tfyarn.checkpoint import CheckpointManager

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
        optimizer = tf.keras.optimizers.SGD(0.01)
        step = tf.Variable(0, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step)
    manager = CheckpointManager(checkpoint, f"{base}/ckpt", max_to_keep=2)
    manager.restore_or_initialize()
    x = tf.ones((8, 4))

    @tf.function
    def train_step() -> None:
        def replica() -> None:
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(x) - 1.0))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(
                zip(grads, model.trainable_variables, strict=True)
            )

        strategy.run(replica)

    def train() -> int:
        for _ in range(5):
            train_step()
            step.assign_add(1)
        manager.save()  # every worker calls it; worker 0 uploads
        return int(step.numpy())

    return train


if __name__ == "__main__":
    main()
