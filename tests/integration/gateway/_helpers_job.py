"""A job through tfyarn's HDFS helpers: whichever route the install has.

``tfyarn.data.stage_shard`` gives TensorFlow this task's TFRecords (the
``hdfs://`` URLs with the plugin, local copies without it) and
``tfyarn.checkpoint.CheckpointManager`` saves to HDFS (directly, or locally
then copied). Both log their route once; this script prints ``records=`` and
``saved=``.
"""

from __future__ import annotations

import argparse
import logging

import tensorflow as tf

from tfyarn.checkpoint import CheckpointManager
from tfyarn.data import parse_digits, stage_shard

logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--checkpoint_dir", required=True)
args = parser.parse_args()

files = stage_shard(args.data + "/train-*", "digits")
weights = tf.Variable(tf.zeros([64, 10]))
step = tf.Variable(0, dtype=tf.int64)
records = 0
for images, labels in tf.data.TFRecordDataset(files).batch(256).map(parse_digits):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(
            tf.nn.sparse_softmax_cross_entropy_with_logits(labels, images @ weights)
        )
    weights.assign_sub(0.1 * tape.gradient(loss, weights))
    step.assign_add(1)
    records += int(labels.shape[0])
print(f"records={records}", flush=True)
manager = CheckpointManager(
    tf.train.Checkpoint(weights=weights, step=step), args.checkpoint_dir, chief=True
)
print(f"saved={manager.save()}", flush=True)
