"""tfyarn.data against the real local HDFS: readers, writers, CLI, errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from _hdfs import ROUTES, choose_route, hdfs_dir

from tfyarn.cli import main
from tfyarn.data import (
    CorruptTFRecordError,
    Shard,
    ShardError,
    csv_dataset,
    list_files,
    parquet_dataset,
    put,
    resolve,
    shard_files,
    stage_shard,
    tfrecord_dataset,
    write_parquet_shards,
    write_tfrecord_shards,
)
from tfyarn.data.example import digits, parse_digits
from tfyarn.data.tfrecord import read_record_batches
from tfyarn.errors import HdfsError

pytestmark = pytest.mark.hdfs

tf = pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    yield from hdfs_dir()


def _records(n: int) -> list[bytes]:
    return [f"rec-{i:06d}|".encode() * (1 + i % 9) for i in range(n)]


def test_tfrecord_roundtrip_and_sharding(base: str) -> None:
    recs = _records(2000)
    urls = write_tfrecord_shards(base + "/tfr", recs, shards=6)
    assert all(u.startswith("hdfs:///tmp/tfyarn-test/") for u in urls)
    assert list_files(base + "/tfr/part-*") == urls
    seen: list[bytes] = []
    for i in range(4):
        files = shard_files(base + "/tfr/part-*", shard=Shard(i, 4))
        ds = tfrecord_dataset(files, shard=Shard(0, 1), batch_size=100)
        seen += [bytes(r) for b in ds for r in b.numpy()]
    assert sorted(seen) == sorted(recs)  # every record exactly once
    with pytest.raises(ShardError, match="6 file"):
        shard_files(base + "/tfr/part-*", shard=Shard(0, 7))


def test_gzip_on_hdfs(base: str) -> None:
    recs = _records(500)
    write_tfrecord_shards(base + "/gz", recs, shards=2, compression="GZIP")
    ds = tfrecord_dataset(base + "/gz/part-*.gz", shard=Shard(0, 1))
    assert sorted(bytes(x.numpy()) for x in ds) == sorted(recs)


def test_parquet_and_csv_on_hdfs(base: str, tmp_path) -> None:
    from tfyarn.data.example import to_table

    x, y = digits(1000, seed=5)
    write_parquet_shards(base + "/pq", to_table(x, y), shards=4)
    ds = parquet_dataset(base + "/pq", shard=Shard(1, 2), batch_size=64)
    got = [b["label"].numpy() for b in ds]
    assert sum(len(g) for g in got) == 500
    local = tmp_path / "csv"
    local.mkdir()
    for s in range(2):
        rows = "\n".join(f"{i},{i * 2}" for i in range(s * 50, s * 50 + 50))
        (local / f"p{s}.csv").write_text("a,b\n" + rows + "\n")
    put(str(local), base + "/csv")
    total = sum(
        int(b["b"].numpy().sum())
        for b in csv_dataset(base + "/csv/*.csv", shard=Shard(0, 1), batch_size=10)
    )
    assert total == sum(i * 2 for i in range(100))


def test_make_example_cli_and_learn(base: str, capsys) -> None:
    d = base + "/digits"
    assert (
        main(
            [
                "data",
                "make-example",
                d,
                "--shards",
                "4",
                "--train",
                "2000",
                "--test",
                "500",
            ]
        )
        == 0
    )
    assert main(["data", "count", d + "/train-*"]) == 0
    assert "2000  total" in capsys.readouterr().out
    train = tfrecord_dataset(d + "/train-*", shard=Shard(0, 1), batch_size=64)
    train = train.map(parse_digits).cache().shuffle(64, seed=0).repeat(10)
    test = tfrecord_dataset(d + "/test-*", shard=Shard(0, 1), batch_size=500)
    w = tf.Variable(tf.zeros([64, 10]))
    b = tf.Variable(tf.zeros([10]))
    opt = tf.optimizers.SGD(0.5)
    for xb, yb in train:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(yb, xb @ w + b)
            )
        opt.apply_gradients(zip(tape.gradient(loss, [w, b]), [w, b], strict=True))
    xt, yt = parse_digits(next(iter(test)))
    acc = float(tf.reduce_mean(tf.cast(tf.argmax(xt @ w + b, 1) == yt, tf.float32)))
    assert acc > 0.85, acc


@ROUTES
def test_stage_shard_for_ps_workers(
    base: str, tmp_path, monkeypatch, plugin: bool
) -> None:
    choose_route(monkeypatch, plugin)
    write_tfrecord_shards(base + "/stage", _records(90), shards=3)
    monkeypatch.chdir(tmp_path)
    import json

    cluster = {"chief": ["h:1"], "ps": ["h:2"], "worker": ["h:3", "h:4"]}
    monkeypatch.setenv(
        "TF_CONFIG",
        json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 1}}),
    )
    local = stage_shard(base + "/stage/part-*", "train")
    if plugin:  # TensorFlow reads HDFS itself: nothing copied
        assert [u.rsplit("/", 1)[-1] for u in local] == ["part-00001-of-00003.tfrecord"]
        assert local[0].startswith("hdfs://")
        assert not os.path.exists("tfyarn_data/train")
    else:
        assert local == [
            os.path.join("tfyarn_data", "train", "part-00001-of-00003.tfrecord")
        ]
    assert len(list(tf.data.TFRecordDataset(local))) == 30


def test_pattern_matching_nothing(base: str) -> None:
    with pytest.raises(
        HdfsError, match=r"no files match hdfs:///tmp/tfyarn-test/.*/nope-\*"
    ):
        tfrecord_dataset(base + "/nope-*")
    with pytest.raises(HdfsError, match="does not exist"):
        list_files(base + "/absent.tfrecord")


def test_missing_namenode_is_quick() -> None:
    start = time.monotonic()
    with pytest.raises(HdfsError, match=r"cannot reach hdfs://127\.0\.0\.1:1"):
        tfrecord_dataset("hdfs://127.0.0.1:1/x/part-*")
    assert time.monotonic() - start < 15


def test_corrupt_tfrecord_names_file(base: str, tmp_path) -> None:
    local = tmp_path / "bad.tfrecord"
    from tfyarn.data.writers import write_tfrecord

    write_tfrecord(str(local), _records(50))
    data = bytearray(local.read_bytes())
    data[len(data) // 2] ^= 0x55
    local.write_bytes(bytes(data))
    put(str(local), base + "/corrupt/part-00000.tfrecord")
    url = base + "/corrupt/part-00000.tfrecord"
    with pytest.raises(CorruptTFRecordError, match="corrupt TFRecord file " + url):
        list(read_record_batches(url))
    ds = tfrecord_dataset(base + "/corrupt/part-*", shard=Shard(0, 1))
    with pytest.raises(tf.errors.OpError, match=url):
        for _ in ds:
            pass


def test_permission_denied(base: str) -> None:
    fs = resolve(base)
    secret = base + "/secret"
    fs.mkdirs(secret)
    write_tfrecord_shards(secret, _records(3), shards=1)
    # We are the HDFS superuser (we started the NameNode): hand the directory
    # to someone else, then read it as a third, unprivileged user.
    fs.set_owner(secret, "tfyarn-owner", "tfyarn-owner")
    fs.set_permission(secret, 0o700)
    code = (
        "import sys\n"
        "from tfyarn.data import list_files\n"
        "from tfyarn.errors import HdfsError\n"
        "try:\n"
        f"    list_files({secret + '/part-*'!r})\n"
        "except HdfsError as e:\n"
        "    print(e); sys.exit(3)\n"
    )
    env = dict(os.environ, HADOOP_USER_NAME="tfyarn-stranger")
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert time.monotonic() - start < 30
    assert proc.returncode == 3, (
        "a non-superuser read a mode-700 directory of another user: is "
        "dfs.permissions.enabled false on the local cluster (conf/hadoop/"
        f"hdfs-site.xml)? output: {proc.stdout}{proc.stderr}"
    )
    assert "permission denied" in proc.stdout
    assert "tfyarn-stranger" in proc.stdout
