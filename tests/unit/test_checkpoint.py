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
from tfyarn.errors import HdfsError


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


def _tf1_saves(local: str, remote: str, values: list[float]) -> None:
    """A TF1 Saver (absolute paths in its state file) saving, each save uploaded."""
    v1 = tf.compat.v1
    with tf.Graph().as_default():
        v = v1.get_variable("v", initializer=0.0)
        step = v1.train.get_or_create_global_step()
        saver = v1.train.Saver(max_to_keep=2)
        listener = ckpt_mod.saver_listener(remote, local)
        with v1.Session() as sess:
            sess.run(v1.global_variables_initializer())
            for i, value in enumerate(values, start=1):
                sess.run([v.assign(value), step.assign(i * 10)])
                saver.save(sess, os.path.join(local, "model.ckpt"), global_step=step)
                listener.after_save(sess, i * 10)


def test_tf1_directory_upload_and_download(tmp_path) -> None:
    local, remote = str(tmp_path / "a"), str(tmp_path / "remote")
    assert ckpt_mod.download_latest(remote, str(tmp_path / "none")) is None
    _tf1_saves(local, remote, [1.0, 2.0, 3.0])
    # max_to_keep=2 pruned model.ckpt-10 remotely too; .meta travels along.
    assert sorted(os.listdir(remote)) == [
        "checkpoint",
        *[
            f"model.ckpt-{n}.{ext}"
            for n in (20, 30)
            for ext in ("data-00000-of-00001", "index", "meta")
        ],
    ]
    with open(os.path.join(remote, "checkpoint")) as f:
        state = f.read()
    assert str(tmp_path) not in state  # relative: restores in any container
    # A new container: download, then TF's own latest_checkpoint finds it.
    fresh = str(tmp_path / "b")
    prefix = ckpt_mod.download_latest(remote, fresh)
    assert prefix == os.path.join(fresh, "model.ckpt-30")
    assert tf.train.latest_checkpoint(fresh) == prefix
    assert tf.train.load_variable(prefix, "v") == 3.0
    assert tf.train.load_variable(prefix, "global_step") == 30
    # The new container continues; its saves replace the old ones remotely.
    _tf1_saves(fresh, remote, [4.0])
    assert "model.ckpt-20.index" not in os.listdir(remote)


def test_tf1_download_refuses_incomplete_checkpoint(tmp_path) -> None:
    local, remote = str(tmp_path / "a"), str(tmp_path / "remote")
    _tf1_saves(local, remote, [1.0])
    os.remove(os.path.join(remote, "model.ckpt-10.index"))
    with pytest.raises(HdfsError, match="incomplete"):
        ckpt_mod.download_latest(remote, str(tmp_path / "b"))
