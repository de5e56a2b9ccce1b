"""Training data on HDFS: listing, sharding, readers and writers.

Nothing here imports TensorFlow until a dataset is built, so the CLI stays fast.
See the README section "Data on HDFS".
"""

from tfyarn.data._pipeline import PipelineOptions
from tfyarn.data.csv import csv_dataset
from tfyarn.data.example import parse_digits, write_digits
from tfyarn.data.fs import FileSystem, resolve
from tfyarn.data.parquet import parquet_dataset
from tfyarn.data.sharding import (
    Shard,
    ShardError,
    current_shard,
    list_files,
    shard_files,
)
from tfyarn.data.staging import per_worker_dataset_fn, stage_shard
from tfyarn.data.tfrecord import CorruptTFRecordError, tfrecord_dataset
from tfyarn.data.writers import (
    put,
    write_parquet,
    write_parquet_shards,
    write_tfrecord,
    write_tfrecord_shards,
)
