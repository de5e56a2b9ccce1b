"""TFRecord framing: tfyarn's parser and writer against TensorFlow's own."""

from __future__ import annotations

import os

import pytest

from tfyarn.data import _framing
from tfyarn.data.tfrecord import CorruptTFRecordError, read_record_batches
from tfyarn.data.writers import write_tfrecord


def _records(n: int, seed: int = 0) -> list[bytes]:
    import random

    rnd = random.Random(seed)
    return [rnd.randbytes(rnd.randint(0, 3000)) for _ in range(n)]


def _parse(data: bytes, chunk: int, batch: int = 7) -> list[bytes]:
    chunks = [data[i : i + chunk] for i in range(0, len(data), chunk)]
    out: list[bytes] = []
    for b in _framing.iter_record_batches(chunks, batch_size=batch):
        assert 0 < len(b) <= batch
        out.extend(b)
    return out


@pytest.mark.parametrize("chunk", [1, 5, 13, 4096, 1 << 20])
def test_parse_any_chunking(chunk: int) -> None:
    recs = _records(60)
    data = b"".join(_framing.frame(r) for r in recs)
    assert _parse(data, chunk) == recs


def test_masked_crc_matches_tensorflow_writer(tmp_path) -> None:
    tf = pytest.importorskip("tensorflow")
    recs = _records(50, seed=1)
    path = str(tmp_path / "tf.tfrecord")
    with tf.io.TFRecordWriter(path) as w:
        for r in recs:
            w.write(r)
    with open(path, "rb") as f:
        data = f.read()
    assert data == b"".join(_framing.frame(r) for r in recs)


@pytest.mark.parametrize("compression", ["", "GZIP", "ZLIB"])
def test_written_files_read_back_by_tensorflow_and_tfyarn(
    tmp_path, compression
) -> None:
    tf = pytest.importorskip("tensorflow")
    recs = _records(200, seed=2)
    path = str(tmp_path / "x.tfrecord")
    assert write_tfrecord(path, recs, compression=compression) == 200
    native = [bytes(x.numpy()) for x in tf.data.TFRecordDataset(path, compression)]
    assert native == recs
    ours = [r for b in read_record_batches(path, compression=compression) for r in b]
    assert ours == recs


def test_tensorflow_gzip_file_read_by_tfyarn(tmp_path) -> None:
    tf = pytest.importorskip("tensorflow")
    recs = _records(30, seed=3)
    path = str(tmp_path / "x.tfrecord.gz")
    with tf.io.TFRecordWriter(path, "GZIP") as w:
        for r in recs:
            w.write(r)
    # "auto" picks GZIP from the extension.
    assert [r for b in read_record_batches(path) for r in b] == recs


def _corrupt(path: str, offset: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ 0xFF]))


def test_corrupt_data_names_file(tmp_path) -> None:
    path = str(tmp_path / "bad.tfrecord")
    write_tfrecord(path, [b"a" * 100] * 10)
    _corrupt(path, 116 * 3 + 50)  # inside the 4th record's data
    with pytest.raises(CorruptTFRecordError, match=r"bad\.tfrecord.*data checksum"):
        list(read_record_batches(path))


def test_corrupt_length_names_file(tmp_path) -> None:
    path = str(tmp_path / "bad.tfrecord")
    write_tfrecord(path, [b"a" * 100] * 10)
    _corrupt(path, 116 * 2 + 1)  # the 3rd record's length field
    with pytest.raises(CorruptTFRecordError, match=r"bad\.tfrecord.*length checksum"):
        list(read_record_batches(path))


def test_truncated_file(tmp_path) -> None:
    path = str(tmp_path / "cut.tfrecord")
    write_tfrecord(path, [b"a" * 100] * 10)
    os.truncate(path, 116 * 10 - 7)
    with pytest.raises(CorruptTFRecordError, match=r"cut\.tfrecord.*truncated"):
        list(read_record_batches(path))


def test_wrong_compression_is_named(tmp_path) -> None:
    path = str(tmp_path / "plain.tfrecord")
    write_tfrecord(path, [b"abc"] * 3)
    with pytest.raises(CorruptTFRecordError, match=r"plain\.tfrecord"):
        list(read_record_batches(path, compression="GZIP"))


def test_no_verify_skips_crc(tmp_path) -> None:
    path = str(tmp_path / "bad.tfrecord")
    write_tfrecord(path, [b"a" * 100] * 2)
    _corrupt(path, 50)
    out = [r for b in read_record_batches(path, verify=False) for r in b]
    assert len(out) == 2 and out[0] != b"a" * 100


def test_bad_compression_name() -> None:
    with pytest.raises(ValueError, match="compression must be"):
        _framing.normalize_compression("bz2")
