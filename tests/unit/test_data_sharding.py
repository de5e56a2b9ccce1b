"""File sharding: by InputContext or TF_CONFIG, complete and disjoint."""

from __future__ import annotations

import json

import pytest

from tfyarn.data.sharding import (
    Shard,
    ShardError,
    current_shard,
    list_files,
    shard_files,
    shard_from_tf_config,
)
from tfyarn.errors import HdfsError


def _tf_config(cluster: dict, role: str, index: int) -> str:
    return json.dumps({"cluster": cluster, "task": {"type": role, "index": index}})


MWMS = {"chief": ["h:1"], "worker": ["h:2", "h:3"]}
PS = {"chief": ["h:1"], "ps": ["h:4"], "worker": ["h:2", "h:3"]}


def test_mwms_chief_then_workers() -> None:
    assert shard_from_tf_config(_tf_config(MWMS, "chief", 0)) == Shard(0, 3)
    assert shard_from_tf_config(_tf_config(MWMS, "worker", 0)) == Shard(1, 3)
    assert shard_from_tf_config(_tf_config(MWMS, "worker", 1)) == Shard(2, 3)


def test_workers_only_cluster() -> None:
    cluster = {"worker": ["h:1", "h:2"]}
    assert shard_from_tf_config(_tf_config(cluster, "worker", 1)) == Shard(1, 2)


def test_ps_cluster_only_workers_read() -> None:
    assert shard_from_tf_config(_tf_config(PS, "worker", 1)) == Shard(1, 2)
    with pytest.raises(ShardError, match="only workers read"):
        shard_from_tf_config(_tf_config(PS, "chief", 0))
    with pytest.raises(ShardError, match="ps:0"):
        shard_from_tf_config(_tf_config(PS, "ps", 0))


def test_evaluator_and_no_cluster_read_everything(monkeypatch) -> None:
    assert shard_from_tf_config(_tf_config(PS, "evaluator", 0)) == Shard(0, 1)
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert current_shard() == Shard(0, 1)


def test_bad_tf_config() -> None:
    with pytest.raises(ShardError, match="TF_CONFIG"):
        shard_from_tf_config("{not json")


def test_input_context_wins(monkeypatch) -> None:
    class Ctx:
        input_pipeline_id = 2
        num_input_pipelines = 5

    monkeypatch.setenv("TF_CONFIG", _tf_config(MWMS, "worker", 0))
    assert current_shard(Ctx()) == Shard(2, 5)


def _make(tmp_path, n: int) -> list[str]:
    names = [f"part-{i:05d}.tfrecord" for i in range(n)]
    # Create in shuffled order: listing order must not matter.
    for name in reversed(names):
        (tmp_path / name).write_bytes(b"")
    (tmp_path / "_SUCCESS").write_bytes(b"")
    (tmp_path / "._tmp.part-x").write_bytes(b"")
    return [str(tmp_path / n) for n in names]


@pytest.mark.parametrize("files,pipelines", [(7, 3), (8, 8), (10, 1), (5, 2)])
def test_shards_are_disjoint_and_complete(tmp_path, files, pipelines) -> None:
    expected = _make(tmp_path, files)
    shards = [
        shard_files(str(tmp_path / "part-*"), shard=Shard(i, pipelines))
        for i in range(pipelines)
    ]
    flat = [f for s in shards for f in s]
    assert sorted(flat) == expected  # none skipped
    assert len(set(flat)) == len(flat)  # none twice
    assert all(s for s in shards)
    # Stable: the same call gives the same answer.
    assert shard_files(str(tmp_path / "part-*"), shard=Shard(0, pipelines)) == shards[0]


def test_directory_lists_visible_files(tmp_path) -> None:
    expected = _make(tmp_path, 3)
    assert list_files(str(tmp_path)) == expected


def test_fewer_files_than_pipelines(tmp_path) -> None:
    _make(tmp_path, 2)
    with pytest.raises(ShardError, match=r"2 file\(s\) match .* 3 input pipelines"):
        shard_files(str(tmp_path / "part-*"), shard=Shard(0, 3))


def test_pattern_matching_nothing(tmp_path) -> None:
    with pytest.raises(HdfsError, match=r"no files match .*nothing-\*"):
        list_files(str(tmp_path / "nothing-*"))


def test_missing_path(tmp_path) -> None:
    with pytest.raises(HdfsError, match="does not exist"):
        list_files(str(tmp_path / "absent.tfrecord"))


def test_bad_shard() -> None:
    with pytest.raises(ShardError):
        Shard(3, 3)
