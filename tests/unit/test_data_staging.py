"""PS staging: a worker copies its own shard; the coordinator's dataset_fn
reads the relative directory with native ops only."""

from __future__ import annotations

import json
import os

import pytest

tf = pytest.importorskip("tensorflow")

from tfyarn.data import per_worker_dataset_fn, stage_shard
from tfyarn.data.staging import stage_dir
from tfyarn.data.writers import write_tfrecord_shards


def _graph(ds: object) -> bytes:
    return ds._as_serialized_graph().numpy()  # type: ignore[attr-defined]


def test_graph_check_can_fail(tmp_path) -> None:
    from tfyarn.data import Shard, tfrecord_dataset

    write_tfrecord_shards(str(tmp_path), [b"x"], shards=1)
    ds = tfrecord_dataset(str(tmp_path), shard=Shard(0, 1), reader="python")
    assert b"PyFunc" in _graph(ds)


CLUSTER = {"chief": ["h:1"], "ps": ["h:2"], "worker": ["h:3", "h:4"]}


def test_each_worker_stages_its_own_files(tmp_path, monkeypatch) -> None:
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
        fn = per_worker_dataset_fn("train", batch_size=5, repeat=False)
        ds = fn()
        # Nothing Python-side in the graph: it must run on a remote worker.
        assert b"PyFunc" not in _graph(ds)
        seen += [bytes(r) for b in ds for r in b.numpy()]
    assert sorted(seen) == sorted(recs)


def test_stage_name_must_be_plain() -> None:
    with pytest.raises(ValueError, match="plain directory name"):
        stage_dir("../x")
