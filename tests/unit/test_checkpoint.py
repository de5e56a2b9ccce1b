"""Checkpoints through tfyarn.checkpoint on a local 'remote' directory.

The same code drives HDFS (tests/integration/test_hdfs_checkpoint.py); here the
remote side is a local directory, so order and pruning can be checked cheaply.
Both routes run: TensorFlow on the directory itself (tfyarn's HDFS plugin
installed) and the mirror fallback (no plugin), chosen by mocking
``tfyarn.hdfs.available``.
"""

from __future__ import annotations

import os

import pytest

tf = pytest.importorskip("tensorflow")

from tfyarn import checkpoint as ckpt_mod
from tfyarn import hdfs
from tfyarn.data import _hdfs_route
from tfyarn.data import fs as _fs
from tfyarn.errors import HdfsError


def _route(monkeypatch: pytest.MonkeyPatch, plugin: bool) -> None:
    """Make tfyarn.hdfs.available() say ``plugin``; forget what was logged."""
    monkeypatch.setattr(hdfs, "available", lambda: plugin)
    monkeypatch.setattr(_hdfs_route, "_said", set())


@pytest.fixture(params=[True, False], ids=["plugin", "mirror"])
def plugin(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Each test using it runs on both routes; the value: the plugin is installed."""
    _route(monkeypatch, request.param)
    return bool(request.param)


@pytest.fixture
def mirror(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback without the plugin."""
    _route(monkeypatch, False)


def _ckpt(value: float) -> tuple:
    v = tf.Variable(value)
    step = tf.Variable(0, dtype=tf.int64)
    return tf.train.Checkpoint(v=v, step=step), v, step


def test_save_restore_in_new_container(tmp_path, plugin: bool) -> None:
    remote = str(tmp_path / "remote")
    ckpt, v, step = _ckpt(1.0)
    m = ckpt_mod.CheckpointManager(
        ckpt, remote, max_to_keep=2, local_dir=str(tmp_path / "a"), chief=True
    )
    assert m.mirrored is not plugin
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
    # With the plugin the working copy given is created but holds nothing.
    assert bool(os.listdir(tmp_path / "b")) is not plugin


def test_state_file_is_uploaded_after_data(tmp_path, monkeypatch, mirror) -> None:
    remote = str(tmp_path / "remote")
    ckpt, _, _ = _ckpt(1.0)
    m = ckpt_mod.CheckpointManager(
        ckpt, remote, local_dir=str(tmp_path / "a"), chief=True
    )
    fs = m._store._fs  # type: ignore[attr-defined]
    order: list[str] = []
    real_put = type(fs).put_file

    def spy(self, local, url):  # type: ignore[no-untyped-def]
        order.append(url.rsplit("/", 1)[-1])
        return real_put(self, local, url)

    monkeypatch.setattr(type(fs), "put_file", spy)
    m.save()
    assert order == ["ckpt-1.data-00000-of-00001", "ckpt-1.index", "checkpoint"]


def test_non_chief_does_not_write(tmp_path, plugin: bool) -> None:
    remote = str(tmp_path / "remote")
    os.makedirs(remote)
    ckpt, _, _ = _ckpt(1.0)
    m = ckpt_mod.CheckpointManager(
        ckpt, remote, local_dir=str(tmp_path / "a"), chief=False
    )
    assert m.save() is None
    assert os.listdir(remote) == []


def test_incomplete_checkpoint_is_reported(tmp_path, plugin: bool) -> None:
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


def test_keras_callback_saves_and_restores(tmp_path, plugin: bool) -> None:
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


# -- the choice of route ----------------------------------------------------------


def test_without_the_plugin_checkpoints_are_mirrored_and_it_is_logged_once(
    tmp_path, monkeypatch, caplog
) -> None:
    _route(monkeypatch, False)
    caplog.set_level("INFO", logger="tfyarn.checkpoint")
    for name in ("a", "b"):
        ckpt, _, _ = _ckpt(1.0)
        m = ckpt_mod.CheckpointManager(ckpt, str(tmp_path / name), chief=True)
        assert m.mirrored
        assert m.local_dir and os.path.isdir(m.local_dir)
    said = [m for r in caplog.records if (m := r.getMessage()).startswith("tfyarn.")]
    assert len(said) == 1, said
    assert "saved locally, then copied" in said[0] and "not installed" in said[0]


def test_with_the_plugin_tensorflow_writes_the_directory_itself(
    tmp_path, monkeypatch, caplog
) -> None:
    _route(monkeypatch, True)
    caplog.set_level("INFO", logger="tfyarn.checkpoint")
    ckpt, _, _ = _ckpt(1.0)
    m = ckpt_mod.CheckpointManager(ckpt, str(tmp_path / "remote"), chief=True)
    assert not m.mirrored and m.local_dir is None
    m.save()
    assert tf.train.latest_checkpoint(str(tmp_path / "remote")).endswith("ckpt-1")
    said = [m for r in caplog.records if (m := r.getMessage()).startswith("tfyarn.")]
    assert said == [
        "tfyarn.checkpoint: TensorFlow opens hdfs:// itself through tfyarn's HDFS plugin"
    ]


def test_remote_url_registers_the_plugin(monkeypatch) -> None:
    _route(monkeypatch, True)
    calls: list[int] = []
    monkeypatch.setattr(hdfs, "enable", lambda: calls.append(1))
    log = ckpt_mod.log
    assert _hdfs_route.use_plugin("hdfs://nn:8020/x", what="t", fallback="f", log=log)
    assert calls == [1]
    # Local paths need no registration (nor the local cluster's config).
    assert _hdfs_route.use_plugin("/tmp/x", what="t", fallback="f", log=log)
    assert calls == [1]


def test_plugin_refused_by_tensorflow_falls_back_with_a_warning(
    monkeypatch, caplog
) -> None:
    _route(monkeypatch, True)

    def refuse() -> None:
        raise HdfsError("TensorFlow refused the HDFS plugin /x.so: bad ABI")

    monkeypatch.setattr(hdfs, "enable", refuse)
    assert not _hdfs_route.use_plugin(
        "hdfs:///x", what="t", fallback="copied instead", log=ckpt_mod.log
    )
    warned = [r for r in caplog.records if r.levelname == "WARNING"]
    assert [r.getMessage() for r in warned] == [
        "t: copied instead: TensorFlow refused the HDFS plugin /x.so: bad ABI"
    ]


def test_unreadable_state_file_is_an_error_not_a_fresh_start(
    tmp_path, monkeypatch
) -> None:
    # tf.train.get_checkpoint_state takes it for "no checkpoint": a job would
    # start over and overwrite its checkpoints.
    _route(monkeypatch, True)
    remote = tmp_path / "remote"
    remote.mkdir()
    (remote / "checkpoint").write_text("model_checkpoint_path: {{ not text format")
    ckpt, _, _ = _ckpt(1.0)
    with pytest.raises(HdfsError, match=r"cannot read .*checkpoint"):
        ckpt_mod.CheckpointManager(ckpt, str(remote), chief=True)
