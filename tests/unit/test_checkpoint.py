"""Checkpoints through tfyarn.checkpoint on a local 'remote' directory.

The same code drives HDFS (tests/integration/test_hdfs_checkpoint.py); here the
remote side is a local directory, so order and pruning can be checked cheaply.
"""

from __future__ import annotations

import os

import pytest

tf = pytest.importorskip("tensorflow")

from tfyarn import checkpoint as ckpt_mod
from tfyarn.data import fs as _fs


def _ckpt(value: float) -> tuple:
    v = tf.Variable(value)
    step = tf.Variable(0, dtype=tf.int64)
    return tf.train.Checkpoint(v=v, step=step), v, step


def test_save_restore_in_new_container(tmp_path) -> None:
    remote = str(tmp_path / "remote")
    ckpt, v, step = _ckpt(1.0)
    m = ckpt_mod.CheckpointManager(
        ckpt, remote, max_to_keep=2, local_dir=str(tmp_path / "a"), chief=True
    )
    assert m.restore_or_initialize() is None
    for i in range(4):
        v.assign(float(i))
        step.assign(i * 10)
        m.save()
    names = sorted(os.listdir(remote))
    # max_to_keep=2: ckpt-3 and ckpt-4 remain, plus the state file; no temp files.
    assert names == [
        "checkpoint",
        "ckpt-3.data-00000-of-00001",
        "ckpt-3.index",
        "ckpt-4.data-00000-of-00001",
        "ckpt-4.index",
    ]
    # A "new container": fresh local dir, fresh variables.
    ckpt2, v2, step2 = _ckpt(-1.0)
    m2 = ckpt_mod.CheckpointManager(
        ckpt2, remote, max_to_keep=2, local_dir=str(tmp_path / "b"), chief=True
    )
    assert m2.restore() == _fs.join(remote, "ckpt-4")
    assert float(v2.numpy()) == 3.0 and int(step2.numpy()) == 30
    # Numbering continues and pruning covers checkpoints the first writer made.
    m2.save()
    assert m2.checkpoints == [_fs.join(remote, "ckpt-4"), _fs.join(remote, "ckpt-5")]
    assert not os.path.exists(os.path.join(remote, "ckpt-3.index"))


def test_state_file_is_written_after_data(tmp_path, monkeypatch) -> None:
    remote = str(tmp_path / "remote")
    ckpt, _, _ = _ckpt(1.0)
    m = ckpt_mod.CheckpointManager(
        ckpt, remote, local_dir=str(tmp_path / "a"), chief=True
    )
    order: list[str] = []
    real_put = type(m._fs).put_file

    def spy(self, local, url):  # type: ignore[no-untyped-def]
        order.append(url.rsplit("/", 1)[-1])
        return real_put(self, local, url)

    monkeypatch.setattr(type(m._fs), "put_file", spy)
    m.save()
    assert order == ["ckpt-1.data-00000-of-00001", "ckpt-1.index", "checkpoint"]


def test_non_chief_does_not_write(tmp_path) -> None:
    remote = str(tmp_path / "remote")
    os.makedirs(remote)
    ckpt, _, _ = _ckpt(1.0)
    m = ckpt_mod.CheckpointManager(
        ckpt, remote, local_dir=str(tmp_path / "a"), chief=False
    )
    assert m.save() is None
    assert os.listdir(remote) == []


def test_incomplete_checkpoint_is_reported(tmp_path) -> None:
    remote = str(tmp_path / "remote")
    ckpt, _, _ = _ckpt(1.0)
    m = ckpt_mod.CheckpointManager(
        ckpt, remote, local_dir=str(tmp_path / "a"), chief=True
    )
    m.save()
    os.unlink(os.path.join(remote, "ckpt-1.data-00000-of-00001"))
    ckpt2, _, _ = _ckpt(0.0)
    m2 = ckpt_mod.CheckpointManager(
        ckpt2, remote, local_dir=str(tmp_path / "b"), chief=True
    )
    with pytest.raises(ckpt_mod.HdfsError, match="incomplete"):
        m2.restore()


@pytest.mark.parametrize(
    "cluster,task,chief",
    [
        ({"chief": ["a"], "worker": ["b"]}, ("chief", 0), True),
        ({"chief": ["a"], "worker": ["b"]}, ("worker", 0), False),
        ({"worker": ["a", "b"]}, ("worker", 0), True),
        ({"worker": ["a", "b"]}, ("worker", 1), False),
        ({"chief": ["a"], "ps": ["p"], "worker": ["b"]}, ("evaluator", 0), False),
    ],
)
def test_is_chief(cluster, task, chief) -> None:
    import json

    raw = json.dumps({"cluster": cluster, "task": {"type": task[0], "index": task[1]}})
    assert ckpt_mod.is_chief(raw) is chief


def test_keras_callback_saves_and_restores(tmp_path) -> None:
    import numpy as np

    keras = tf.keras
    remote = str(tmp_path / "remote")
    x = np.random.default_rng(0).normal(size=(64, 3)).astype("float32")
    y = x.sum(axis=1, keepdims=True)

    def model() -> object:
        m = keras.Sequential([keras.Input(shape=(3,)), keras.layers.Dense(1)])
        m.compile(optimizer="sgd", loss="mse")
        return m

    first = model()
    first.fit(
        x,
        y,
        epochs=2,
        verbose=0,
        callbacks=[ckpt_mod.checkpoint_callback(remote, chief=True)],
    )
    assert sorted(os.listdir(remote))[:3] == [
        "checkpoint",
        "ckpt-1.data-00000-of-00001",
        "ckpt-1.index",
    ]
    second = model()
    cb = ckpt_mod.checkpoint_callback(remote, chief=True)
    # epochs=0 runs on_train_begin (restore) without training.
    second.fit(x, y, epochs=0, verbose=0, callbacks=[cb])
    for a, b in zip(first.get_weights(), second.get_weights(), strict=True):
        np.testing.assert_allclose(a, b)
