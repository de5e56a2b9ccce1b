"""Write a few scalars through tfyarn.tensorboard.LogSync, then keep running.

The values are fixed (tests/integration/test_tensorboard.py looks for them in
the job's TensorBoard); the job then sleeps ``--sleep`` seconds so the test
can reach TensorBoard while the job still runs.
"""

from __future__ import annotations

import argparse
import time

import tensorflow as tf

from tfyarn.tensorboard import LogSync

VALUES = (0.5, 0.25, 0.125)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--logdir", required=True)
    parser.add_argument("--sleep", type=float, default=30.0)
    args = parser.parse_args()
    with LogSync(args.logdir, interval=2.0) as logs:
        writer = tf.summary.create_file_writer(logs.local_dir)
        with writer.as_default():
            for step, value in enumerate(VALUES):
                tf.summary.scalar("loss", value, step=step)
        writer.flush()
        logs.sync()
        print("summaries written", flush=True)
        time.sleep(args.sleep)


if __name__ == "__main__":
    main()
