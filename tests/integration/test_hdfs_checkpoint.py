"""Checkpoints and TensorBoard logs on the real local HDFS."""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator

import pytest
from _hdfs import ROUTES, choose_route, hdfs_dir

from tfyarn.checkpoint import CheckpointManager
from tfyarn.data import resolve
from tfyarn.tensorboard import LogSync

pytestmark = pytest.mark.hdfs

tf = pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    yield from hdfs_dir()


@ROUTES
def test_checkpoint_survives_container_loss(
    base: str, tmp_path, monkeypatch, plugin: bool
) -> None:
    choose_route(monkeypatch, plugin)
    remote = base + ("/ckpt" if plugin else "/ckpt-fallback")
    v = tf.Variable(0.0)
    step = tf.Variable(0, dtype=tf.int64)
    local = tmp_path / "container-a"
    m = CheckpointManager(
        tf.train.Checkpoint(v=v, step=step),
        remote,
        max_to_keep=2,
        local_dir=str(local),
        chief=True,
    )
    assert m.mirrored is not plugin
    for i in range(1, 4):
        v.assign(i * 1.5)
        step.assign(i)
        m.save()
    shutil.rmtree(local)  # the container that wrote it is gone
    names = sorted(i.url.rsplit("/", 1)[-1] for i in resolve(remote).ls(remote))
    assert names == [
        "checkpoint",
        "ckpt-2.data-00000-of-00001",
        "ckpt-2.index",
        "ckpt-3.data-00000-of-00001",
        "ckpt-3.index",
    ]
    v2 = tf.Variable(0.0)
    step2 = tf.Variable(0, dtype=tf.int64)
    reader = CheckpointManager(
        tf.train.Checkpoint(v=v2, step=step2),
        remote,
        max_to_keep=2,
        local_dir=str(tmp_path / "container-b"),
        chief=False,
    )
    assert reader.restore() == remote + "/ckpt-3"
    assert float(v2.numpy()) == 4.5 and int(step2.numpy()) == 3


def test_tensorboard_logs_visible_during_training(base: str, tmp_path) -> None:
    remote = base + "/logs"
    fs = resolve(remote)
    with LogSync(remote, local_dir=str(tmp_path / "tb"), interval=0.5) as sync:
        writer = tf.summary.create_file_writer(sync.local_dir + "/train")
        with writer.as_default():
            tf.summary.write("loss", 1.0, step=1)
        writer.flush()
        deadline = time.monotonic() + 20
        seen = []
        while time.monotonic() < deadline and not seen:
            seen = fs.glob(remote + "/train/events.out.tfevents.*")
            time.sleep(0.2)
        assert seen and seen[0].size > 0  # live, before the end
        with writer.as_default():
            for s in range(2, 50):
                tf.summary.write("loss", 1.0 / s, step=s)
        writer.close()
    final = fs.glob(remote + "/train/events.out.tfevents.*")
    local = list((tmp_path / "tb" / "train").iterdir())
    assert final[0].size == local[0].stat().st_size  # final flush is complete
