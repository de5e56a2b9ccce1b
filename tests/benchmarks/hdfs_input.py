"""Benchmark: TFRecord input from HDFS through tfyarn.data vs TensorFlow's native
reader on local disk, same files, same run.

    eval "$(tfyarn cluster env)"
    python tests/benchmarks/hdfs_input.py [--records 200000] [--record-bytes 1000]

Writes the data set once locally (shards of ``--record-bytes`` random records),
puts it on HDFS, then alternates timed passes: native ``TFRecordDataset`` on the
local files, ``tfyarn.data.tfrecord_dataset`` on the HDFS files (CRC checked),
both batched by 256; ``tfyarn.data.parquet_dataset`` over the same records
as Parquet on HDFS; and TensorFlow's native ``TFRecordDataset`` on the HDFS
files through tfyarn's filesystem plugin (``hdfs://`` inside TensorFlow, the
same reader options as native local). Each line of output is JSON; the LAST
line is the summary with ``ratio`` = HDFS records/s ÷ native local records/s
and ``plugin_ratio`` = plugin records/s ÷ native local records/s (best pass of each),
the ratio of medians, the CPU seconds per pass of each (robust when other work
shares the machine), and the load average.

``plugin_ratio`` comes from a second interpreter that alternates only native
local and plugin passes. In this one, ``tfyarn.data``'s generator dataset has
made TensorFlow fix glibc's mmap threshold at 128 KiB for the whole process
("Memory patch applied" in TensorFlow's log), which a pipeline of
``TFRecordDataset`` over ``hdfs://`` never does, and which slows both readers,
the plugin more (its packet buffers are 128 KiB). The comparison made in this
process is reported too, as ``plugin_ratio_after_generator``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

BATCH = 256


def _emit(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _drain(ds: Any) -> tuple[int, float, float, float]:
    """Records read, wall seconds, seconds to the first batch, CPU seconds.

    CPU seconds barely depend on what else runs on the machine; wall time does.
    (The DataNode's own CPU is in another process and not counted.)

    The clock stops at the last batch, before the iterator is freed: freeing
    it waits for tf.data's autotuning thread to wake, up to one optimisation
    period (1.28 s by the end of a one-second pass). That is not reading, and
    it fell on some passes and not others.
    """
    start = time.perf_counter()
    cpu = _cpu_seconds()
    n = 0
    first = 0.0
    iterator = iter(ds)
    for batch in iterator:
        if not n:
            first = time.perf_counter() - start
        if isinstance(batch, dict):
            batch = next(iter(batch.values()))
        n += int(batch.shape[0])
    result = n, time.perf_counter() - start, first, _cpu_seconds() - cpu
    del iterator
    return result


class Passes:
    """Timed passes of several readers, alternating, after one untimed pass of
    each (which warms the page cache and HDFS, and puts the process in the
    same state for every timed pass)."""

    def __init__(self, records: int, total_bytes: int) -> None:
        self.records = records
        self.total_bytes = total_bytes
        self.best: dict[str, float] = {}
        self.rates: dict[str, list[float]] = {}
        self.cpu: dict[str, list[float]] = {}

    def run(self, readers: dict[str, Any], passes: int, emit: bool = True) -> None:
        for make in readers.values():
            _drain(make())
        for p in range(passes):
            for name, make in readers.items():
                n, secs, first_s, cpu_s = _drain(make())
                if n != self.records:
                    raise SystemExit(
                        f"{name} read {n} records, expected {self.records}"
                    )
                rate = n / secs
                self.best[name] = max(self.best.get(name, 0.0), rate)
                self.rates.setdefault(name, []).append(rate)
                self.cpu.setdefault(name, []).append(cpu_s)
                if emit:
                    _emit(
                        phase="read",
                        reader=name,
                        run=p,
                        records=n,
                        seconds=round(secs, 3),
                        records_per_s=round(rate),
                        mb_per_s=round(self.total_bytes / 1e6 / secs, 1),
                        first_batch_s=round(first_s, 3),
                        cpu_s=round(cpu_s, 3),
                    )

    def ratio(self, name: str, base: str = "native_local") -> float:
        return round(self.best[name] / self.best[base], 3)

    def median_ratio(self, name: str, base: str = "native_local") -> float:
        return round(
            statistics.median(self.rates[name]) / statistics.median(self.rates[base]),
            3,
        )

    def cpu_s(self, name: str) -> float:
        return round(min(self.cpu[name]), 3)


def _tfrecord_pipeline(files: list[str]) -> Any:
    import tensorflow as tf

    return (
        tf.data.TFRecordDataset(files, num_parallel_reads=4)
        .batch(BATCH)
        .prefetch(tf.data.AUTOTUNE)
    )


def _tfrecord_files(local_dir: str, url: str) -> tuple[list[str], list[str]]:
    """The same shards on local disk and on HDFS (globbed through the plugin)."""
    import tensorflow as tf

    import tfyarn

    tfyarn.enable_hdfs()
    local_files = sorted(os.path.join(local_dir, f) for f in os.listdir(local_dir))
    remote_files = sorted(tf.io.gfile.glob(url + "/part-*"))
    assert len(remote_files) == len(local_files), remote_files
    return local_files, remote_files


def _plugin_vs_native(local_dir: str, url: str, records: int, passes: int) -> int:
    """The second interpreter: native local and plugin passes only."""
    local_files, remote_files = _tfrecord_files(local_dir, url)
    total_bytes = sum(os.path.getsize(f) for f in local_files)
    timed = Passes(records, total_bytes)
    timed.run(
        {
            "native_local": lambda: _tfrecord_pipeline(local_files),
            "plugin_hdfs": lambda: _tfrecord_pipeline(remote_files),
        },
        passes,
        emit=False,
    )
    _emit(
        native_local_records_per_s=round(timed.best["native_local"]),
        plugin_hdfs_records_per_s=round(timed.best["plugin_hdfs"]),
        plugin_ratio=timed.ratio("plugin_hdfs"),
        plugin_median_ratio=timed.median_ratio("plugin_hdfs"),
        native_local_cpu_s=timed.cpu_s("native_local"),
        plugin_hdfs_cpu_s=timed.cpu_s("plugin_hdfs"),
    )
    return 0


def _in_a_fresh_interpreter(local_dir: str, url: str, records: int, passes: int) -> Any:
    argv = [sys.executable, __file__, "--records", str(records)]
    argv += ["--passes", str(passes), "--plugin-vs-native", local_dir, url]
    done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="hdfs:///tmp/tfyarn-bench/hdfs_input")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-bytes", type=int, default=1000)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the remote data")
    parser.add_argument(
        "--plugin-vs-native",
        nargs=2,
        metavar=("LOCAL_DIR", "URL"),
        help=argparse.SUPPRESS,
    )
    args = parser.parse_args(argv)
    if args.plugin_vs_native:
        local_dir, url = args.plugin_vs_native
        return _plugin_vs_native(local_dir, url, args.records, args.passes)

    import numpy as np
    import pyarrow as pa

    from tfyarn.data import (
        Shard,
        parquet_dataset,
        put,
        resolve,
        tfrecord_dataset,
        write_parquet_shards,
        write_tfrecord_shards,
    )

    rng = np.random.default_rng(0)
    blob = rng.bytes(args.records * args.record_bytes)
    records = [
        blob[i * args.record_bytes : (i + 1) * args.record_bytes]
        for i in range(args.records)
    ]
    local = tempfile.mkdtemp(prefix="tfyarn-bench-")
    fs = resolve(args.url)
    try:
        t0 = time.perf_counter()
        write_tfrecord_shards(
            os.path.join(local, "tfrecord"), records, shards=args.shards
        )
        local_files = sorted(
            os.path.join(local, "tfrecord", f)
            for f in os.listdir(os.path.join(local, "tfrecord"))
        )
        total_bytes = sum(os.path.getsize(f) for f in local_files)
        fs.delete(args.url, recursive=True)
        t1 = time.perf_counter()
        put(os.path.join(local, "tfrecord"), args.url + "/tfrecord")
        put_s = time.perf_counter() - t1
        write_parquet_shards(
            args.url + "/parquet",
            pa.table({"record": pa.array(records, type=pa.binary())}),
            shards=args.shards,
        )
        _emit(
            phase="write",
            records=args.records,
            mb=round(total_bytes / 1e6, 1),
            files=len(local_files),
            local_write_s=round(t1 - t0, 2),
            hdfs_put_s=round(put_s, 2),
            hdfs_put_mb_s=round(total_bytes / 1e6 / put_s, 1),
        )
        del blob, records
        local_files, remote_files = _tfrecord_files(
            os.path.join(local, "tfrecord"), args.url + "/tfrecord"
        )

        def hdfs() -> Any:
            return tfrecord_dataset(
                args.url + "/tfrecord/part-*",
                shard=Shard(0, 1),
                batch_size=BATCH,
                reader="python",
            )

        def parquet() -> Any:
            return parquet_dataset(
                args.url + "/parquet/part-*", shard=Shard(0, 1), batch_size=BATCH
            )

        timed = Passes(args.records, total_bytes)
        timed.run(
            {
                "native_local": lambda: _tfrecord_pipeline(local_files),
                "hdfs": hdfs,
                "parquet_hdfs": parquet,
                "plugin_hdfs": lambda: _tfrecord_pipeline(remote_files),
            },
            args.passes,
        )
        fresh = _in_a_fresh_interpreter(
            os.path.join(local, "tfrecord"),
            args.url + "/tfrecord",
            args.records,
            args.passes,
        )
        best = timed.best
        mb_per_record = total_bytes / 1e6 / args.records
        _emit(
            benchmark="hdfs_input",
            records=args.records,
            mb=round(total_bytes / 1e6, 1),
            native_local_records_per_s=round(best["native_local"]),
            native_local_mb_per_s=round(best["native_local"] * mb_per_record, 1),
            hdfs_records_per_s=round(best["hdfs"]),
            hdfs_mb_per_s=round(best["hdfs"] * mb_per_record, 1),
            parquet_hdfs_records_per_s=round(best["parquet_hdfs"]),
            plugin_hdfs_records_per_s=fresh["plugin_hdfs_records_per_s"],
            plugin_hdfs_mb_per_s=round(
                fresh["plugin_hdfs_records_per_s"] * mb_per_record, 1
            ),
            plugin_native_local_records_per_s=fresh["native_local_records_per_s"],
            plugin_median_ratio=fresh["plugin_median_ratio"],
            plugin_hdfs_cpu_s=fresh["plugin_hdfs_cpu_s"],
            plugin_native_local_cpu_s=fresh["native_local_cpu_s"],
            plugin_ratio_after_generator=timed.ratio("plugin_hdfs"),
            plugin_median_ratio_after_generator=timed.median_ratio("plugin_hdfs"),
            plugin_hdfs_cpu_s_after_generator=timed.cpu_s("plugin_hdfs"),
            median_ratio=timed.median_ratio("hdfs"),
            native_local_cpu_s=timed.cpu_s("native_local"),
            hdfs_cpu_s=timed.cpu_s("hdfs"),
            load_average=round(os.getloadavg()[0], 2),
            ratio=timed.ratio("hdfs"),
            plugin_ratio=fresh["plugin_ratio"],
        )
    finally:
        shutil.rmtree(local, ignore_errors=True)
        if not args.keep:
            fs.delete(args.url, recursive=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
