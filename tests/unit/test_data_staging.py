"""PS staging: a worker picks its own shard; the coordinator's dataset_fn reads
the worker's relative file list with native ops only.

With tfyarn's HDFS plugin the list names the files themselves; without it the
worker copies them first. The route is chosen by mocking ``tfyarn.hdfs.available``.
"""

from __future__ import annotations

import json
import os

import pytest

tf = pytest.importorskip("tensorflow")

from tfyarn import hdfs
from tfyarn.data import _hdfs_route, per_worker_dataset_fn, stage_shard
from tfyarn.data.staging import file_list, stage_dir
from tfyarn.data.writers import write_tfrecord_shards


@pytest.fixture(params=[True, False], ids=["plugin", "copies"])
def plugin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Each test using it runs on both routes; the value: the plugin is installed."""
    monkeypatch.setattr(hdfs, "available", lambda: request.param)
    monkeypatch.setattr(_hdfs_route, "_said", set())
    return bool(request.param)


def _graph(ds: object) -> bytes:
    return ds._as_serialized_graph().numpy()  # type: ignore[attr-defined]


def test_graph_check_can_fail(tmp_path) -> None:
    from tfyarn.data import Shard, tfrecord_dataset

    write_tfrecord_shards(str(tmp_path), [b"x"], shards=1)
    ds = tfrecord_dataset(str(tmp_path), shard=Shard(0, 1), reader="python")
    assert b"PyFunc" in _graph(ds)


CLUSTER = {"chief": ["h:1"], "ps": ["h:2"], "worker": ["h:3", "h:4"]}


def test_each_worker_stages_its_own_files(tmp_path, monkeypatch, plugin) -> None:
    src = tmp_path / "src"
    recs = [f"r{i}".encode() for i in range(40)]
    write_tfrecord_shards(str(src), recs, shards=4)
    seen: list[bytes] = []
    for index in range(2):
        workdir = tmp_path / f"container-{index}"
        workdir.mkdir()
        monkeypatch.chdir(workdir)
        monkeypatch.setenv(
            "TF_CONFIG",
            json.dumps(
                {"cluster": CLUSTER, "task": {"type": "worker", "index": index}}
            ),
        )
        local = stage_shard(str(src / "part-*"), "train")
        assert [os.path.basename(p) for p in local] == [
            f"part-{index:05d}-of-00004.tfrecord",
            f"part-{index + 2:05d}-of-00004.tfrecord",
        ]
        # The plugin reads the originals; without it the worker reads copies.
        copied = os.path.isdir(stage_dir("train"))
        assert copied is not plugin
        assert all(os.path.dirname(p) == str(src) for p in local) is plugin
        with open(file_list("train")) as f:
            assert f.read().split("\n") == local
        fn = per_worker_dataset_fn("train", batch_size=5, repeat=False)
        ds = fn()
        # Nothing Python-side in the graph: it must run on a remote worker.
        assert b"PyFunc" not in _graph(ds)
        seen += [bytes(r) for b in ds for r in b.numpy()]
    assert sorted(seen) == sorted(recs)


def test_stage_name_must_be_plain() -> None:
    with pytest.raises(ValueError, match="plain directory name"):
        stage_dir("../x")


def test_a_restaged_worker_reads_only_its_new_files(
    tmp_path, monkeypatch, plugin
) -> None:
    from tfyarn.data import Shard

    src = tmp_path / "src"
    write_tfrecord_shards(str(src), [f"r{i}".encode() for i in range(8)], shards=4)
    monkeypatch.chdir(tmp_path)
    assert len(stage_shard(str(src / "part-*"), "train", shard=Shard(0, 1))) == 4
    again = stage_shard(str(src / "part-00003-*"), "train", shard=Shard(0, 1))
    ds = per_worker_dataset_fn("train", batch_size=1, repeat=False)()
    seen = sorted(bytes(r) for b in ds for r in b.numpy())
    # Only the last file's records, though the first staging copied four files.
    assert len(again) == 1 and seen == [b"r6", b"r7"]
