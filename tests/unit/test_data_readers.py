"""tf.data readers over local files, through the same streaming code as HDFS."""

from __future__ import annotations

import pyarrow as pa
import pytest

tf = pytest.importorskip("tensorflow")

from tfyarn.data import (
    Shard,
    csv_dataset,
    parquet_dataset,
    tfrecord_dataset,
    write_parquet_shards,
    write_tfrecord_shards,
)


def _records(n: int) -> list[bytes]:
    return [f"record-{i:06d}".encode() * (1 + i % 5) for i in range(n)]


@pytest.fixture
def shards(tmp_path) -> tuple[str, list[bytes]]:
    recs = _records(1000)
    write_tfrecord_shards(str(tmp_path), recs, shards=5)
    return str(tmp_path / "part-*"), recs


@pytest.mark.parametrize("reader", ["python", "native"])
def test_tfrecord_all_records_once(shards, reader) -> None:
    pattern, recs = shards
    ds = tfrecord_dataset(pattern, shard=Shard(0, 1), reader=reader)
    got = [bytes(x.numpy()) for x in ds]
    assert sorted(got) == sorted(recs)


def test_tfrecord_batches_fixed_size(shards) -> None:
    pattern, _ = shards
    ds = tfrecord_dataset(pattern, shard=Shard(0, 1), batch_size=64, reader="python")
    sizes = [int(b.shape[0]) for b in ds]
    assert sizes[:-1] == [64] * (len(sizes) - 1) and sum(sizes) == 1000
    ds = tfrecord_dataset(
        pattern, shard=Shard(0, 1), batch_size=64, drop_remainder=True, reader="python"
    )
    assert ds.element_spec.shape.as_list() == [64]


def test_tfrecord_deterministic_order(shards) -> None:
    pattern, _ = shards
    a = [
        bytes(x.numpy())
        for x in tfrecord_dataset(pattern, shard=Shard(0, 1), reader="python")
    ]
    b = [
        bytes(x.numpy())
        for x in tfrecord_dataset(pattern, shard=Shard(0, 1), reader="python")
    ]
    assert a == b


def test_tfrecord_input_context_shards(shards) -> None:
    pattern, recs = shards
    seen: list[bytes] = []
    for i in range(2):
        ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i)
        seen += [
            bytes(x.numpy())
            for x in tfrecord_dataset(pattern, input_context=ctx, reader="python")
        ]
    assert sorted(seen) == sorted(recs)


def test_gzip_shards(tmp_path) -> None:
    recs = _records(300)
    write_tfrecord_shards(str(tmp_path), recs, shards=3, compression="GZIP")
    ds = tfrecord_dataset(
        str(tmp_path / "part-*.gz"), shard=Shard(0, 1), reader="python"
    )
    assert sorted(bytes(x.numpy()) for x in ds) == sorted(recs)


def test_corrupt_file_error_names_file(tmp_path) -> None:
    write_tfrecord_shards(str(tmp_path), _records(100), shards=2)
    bad = tmp_path / "part-00001-of-00002.tfrecord"
    data = bytearray(bad.read_bytes())
    data[40] ^= 0xFF
    bad.write_bytes(bytes(data))
    ds = tfrecord_dataset(str(tmp_path / "part-*"), shard=Shard(0, 1), reader="python")
    with pytest.raises(tf.errors.OpError, match=r"part-00001-of-00002\.tfrecord"):
        for _ in ds:
            pass


def test_auto_shard_off(shards) -> None:
    pattern, _ = shards
    ds = tfrecord_dataset(pattern, shard=Shard(0, 1), reader="python")
    assert (
        ds.options().experimental_distribute.auto_shard_policy
        == tf.data.experimental.AutoShardPolicy.OFF
    )


def test_distribute_datasets_from_function(shards) -> None:
    pattern, recs = shards
    strategy = tf.distribute.MirroredStrategy(["/cpu:0"])

    def dataset_fn(ctx):  # type: ignore[no-untyped-def]
        return tfrecord_dataset(
            pattern,
            input_context=ctx,
            batch_size=ctx.get_per_replica_batch_size(50),
            reader="python",
        )

    dist = strategy.distribute_datasets_from_function(dataset_fn)
    n = sum(int(strategy.experimental_local_results(b)[0].shape[0]) for b in dist)
    assert n == len(recs)


def test_parquet(tmp_path) -> None:
    n = 1234
    flat = pa.array([float(i % 7) for i in range(n * 4)], type=pa.float32())
    table = pa.table(
        {
            "x": pa.FixedSizeListArray.from_arrays(flat, 4),
            "y": pa.array(range(n), type=pa.int64()),
            "name": pa.array([f"n{i}" for i in range(n)]),
        }
    )
    write_parquet_shards(str(tmp_path), table, shards=3, row_group_size=100)
    ds = parquet_dataset(str(tmp_path / "part-*"), shard=Shard(0, 1), batch_size=100)
    assert ds.element_spec["x"].shape.as_list() == [None, 4]
    ys, names = [], []
    for batch in ds:
        ys += batch["y"].numpy().tolist()
        names += [s.decode() for s in batch["name"].numpy()]
        assert batch["x"].dtype == tf.float32
    assert sorted(ys) == list(range(n))
    assert sorted(names) == sorted(f"n{i}" for i in range(n))
    only_y = parquet_dataset(str(tmp_path), columns=["y"], shard=Shard(1, 3))
    assert list(only_y.element_spec) == ["y"]
    assert len([1 for _ in only_y]) == 411


def test_parquet_unknown_column(tmp_path) -> None:
    write_parquet_shards(str(tmp_path), {"a": [1, 2]}, shards=1)
    with pytest.raises(TypeError, match=r"\['b'\] are not in the data"):
        parquet_dataset(str(tmp_path), columns=["b"], shard=Shard(0, 1))


def test_csv(tmp_path) -> None:
    for s in range(3):
        rows = "\n".join(f"{i},{i * 0.5},w{i}" for i in range(s * 100, s * 100 + 100))
        (tmp_path / f"part-{s}.csv").write_text("a,b,c\n" + rows + "\n")
    ds = csv_dataset(str(tmp_path / "*.csv"), shard=Shard(0, 1), batch_size=32)
    a, b = [], []
    for batch in ds:
        a += batch["a"].numpy().tolist()
        b += batch["b"].numpy().tolist()
    assert sorted(a) == list(range(300))
    assert sorted(b) == [i * 0.5 for i in range(300)]
    assert ds.element_spec["c"].dtype == tf.string


def test_the_pipeline_options_are_one_object_for_every_reader(tmp_path) -> None:
    from tfyarn.data import PipelineOptions

    write_tfrecord_shards(str(tmp_path / "tfr"), _records(100), shards=2)
    write_parquet_shards(
        str(tmp_path / "pq"), pa.table({"x": list(range(100))}), shards=2
    )
    (tmp_path / "c.csv").write_text("x\n" + "".join(f"{i}\n" for i in range(100)))
    opts = PipelineOptions(shard=Shard(0, 1), batch_size=30, drop_remainder=True)
    readers = [
        tfrecord_dataset(str(tmp_path / "tfr" / "part-*"), options=opts),
        parquet_dataset(str(tmp_path / "pq"), options=opts),
        csv_dataset(str(tmp_path / "c.csv"), options=opts),
    ]
    for ds in readers:
        sizes = [len(b["x"] if isinstance(b, dict) else b) for b in ds]
        assert sizes == [30, 30, 30]
    # A keyword overrides the object's field.
    ds = tfrecord_dataset(str(tmp_path / "tfr" / "part-*"), options=opts, batch_size=50)
    assert [len(b) for b in ds] == [50, 50]
    with pytest.raises(TypeError, match=r"unknown reader option.*batchsize"):
        csv_dataset(str(tmp_path / "c.csv"), batchsize=10)
