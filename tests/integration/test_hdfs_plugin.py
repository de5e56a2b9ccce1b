"""TensorFlow's own file APIs on hdfs:// through tfyarn's plugin, on the real local HDFS.

TensorFlow (tf.io.gfile, TFRecordDataset, TFRecordWriter, checkpoints) talks
to the plugin (tfyarn/hdfs_plugin, Rust) through its C filesystem API; no
tfyarn.data code is in the path.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlparse

import pytest
from _hdfs import hdfs_dir

import tfyarn
from tfyarn.data import resolve

pytestmark = pytest.mark.hdfs

tf = pytest.importorskip("tensorflow")


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    tfyarn.enable_hdfs()
    yield from hdfs_dir()


def _run_tf(code: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    """``code`` in a fresh interpreter with the plugin enabled."""
    prelude = "import sys, time, tfyarn, tensorflow as tf\ntfyarn.enable_hdfs()\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_tfrecords_write_read_and_glob_many(base: str) -> None:
    root = base + "/records"
    tf.io.gfile.makedirs(root)
    # 300 shards; only every 30th holds records (an empty file is a valid
    # TFRecord file), which keeps the writing cheap.
    for shard in range(300):
        with tf.io.TFRecordWriter(f"{root}/part-{shard:05d}.tfrecord") as w:
            for i in range(5 if shard % 30 == 0 else 0):
                w.write(f"{shard}-{i}".encode())
    with tf.io.gfile.GFile(root + "/README", "w") as f:
        f.write("not a shard")
    files = tf.io.gfile.glob(root + "/part-*.tfrecord")
    assert files == [f"{root}/part-{i:05d}.tfrecord" for i in range(300)]
    assert tf.io.gfile.glob(root + "/part-0001?.tfrecord") == files[10:20]
    assert len(tf.io.gfile.listdir(root)) == 301
    ds = tf.data.TFRecordDataset(
        tf.data.Dataset.list_files(root + "/part-*", shuffle=False)
    )
    got = sorted(r.decode() for r in ds.as_numpy_iterator())
    assert got == sorted(f"{s}-{i}" for s in range(0, 300, 30) for i in range(5))


def test_large_file_sequential_and_seeks(base: str, tmp_path) -> None:
    # 40 MiB over three 16 MiB blocks (the local cluster's dfs.blocksize).
    data = os.urandom(40 << 20)
    url = base + "/large.bin"
    with tf.io.gfile.GFile(url, "wb") as f:
        for i in range(0, len(data), 3 << 20):  # odd-sized appends
            f.write(data[i : i + (3 << 20)])
    assert tf.io.gfile.stat(url).length == len(data)
    with tf.io.gfile.GFile(url, "rb") as f:
        assert f.read() == data
    with tf.io.gfile.GFile(url, "rb") as f:
        for offset, n in [
            (len(data) - 10, 10),
            (0, 1),
            ((16 << 20) - 7, 100),  # across a block boundary
            (5, 1 << 20),
            (33 << 20, 5 << 20),
            ((16 << 20) - 7 + 100, 4096),  # a short forward skip
            (len(data) - 5, 100),  # past the end: the rest
        ]:
            f.seek(offset)
            assert f.read(n) == data[offset : offset + n], (offset, n)


def test_rename_over_existing_and_dirs(base: str) -> None:
    d = base + "/ops"
    tf.io.gfile.makedirs(d + "/sub/deeper")
    assert tf.io.gfile.isdir(d + "/sub")
    tf.io.gfile.mkdir(d + "/sub")  # exists: TF's gfile, like on local disk, is fine
    for name, text in [("a", "new"), ("b", "old")]:
        with tf.io.gfile.GFile(f"{d}/{name}", "w") as f:
            f.write(text)
    with pytest.raises(tf.errors.AlreadyExistsError):
        tf.io.gfile.rename(d + "/a", d + "/b", overwrite=False)
    tf.io.gfile.rename(d + "/a", d + "/b", overwrite=True)
    assert not tf.io.gfile.exists(d + "/a")
    with tf.io.gfile.GFile(d + "/b") as f:
        assert f.read() == "new"
    with tf.io.gfile.GFile(d + "/b", "a") as f:  # appendable file
        f.write("+more")
    with tf.io.gfile.GFile(d + "/b") as f:
        assert f.read() == "new+more"
    assert sorted(tf.io.gfile.listdir(d)) == ["b", "sub"]
    with pytest.raises(tf.errors.FailedPreconditionError):
        tf.io.gfile.remove(d + "/sub")  # a directory
    with pytest.raises(tf.errors.FailedPreconditionError):
        tf.io.gfile.rmtree(d + "/b")  # a file
    tf.io.gfile.remove(d + "/b")
    tf.io.gfile.rmtree(d + "/sub")
    assert tf.io.gfile.listdir(d) == []


def test_missing_paths_name_the_path(base: str) -> None:
    missing = base + "/nothing/here.tfrecord"
    with pytest.raises(tf.errors.NotFoundError, match=missing):
        tf.io.gfile.stat(missing)
    # The parent is missing.
    with (
        pytest.raises(tf.errors.NotFoundError, match="nothing"),
        tf.io.gfile.GFile(missing, "w") as f,
    ):
        f.write("x")
    with pytest.raises(tf.errors.NotFoundError, match=missing):
        list(tf.data.TFRecordDataset(missing))
    assert tf.io.gfile.glob(base + "/nothing/*") == []
    assert not tf.io.gfile.exists(missing)


@pytest.fixture(scope="module")
def stranger(base: str) -> Iterator[dict[str, Any]]:
    """One fresh interpreter (TF's import is most of the time) as an
    unprivileged user, with a 3 s deadline: lists a mode-700 directory of
    another user, and stats a path on a NameNode that accepts connections and
    never answers. Yields what each raised."""
    secret = base + "/secret"
    tf.io.gfile.makedirs(secret)
    with tf.io.gfile.GFile(secret + "/x", "w") as f:
        f.write("x")
    fs = resolve(base)
    # We are the HDFS superuser (we started the NameNode): hand the directory
    # to someone else, then read it as a third, unprivileged user.
    fs.set_owner(secret, "tfyarn-owner", "tfyarn-owner")
    fs.set_permission(secret, 0o700)
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        port = silent.getsockname()[1]
        proc = _run_tf(
            f"""
            import json
            out = {{}}
            for key, call in [
                ("denied", lambda: tf.io.gfile.listdir({secret!r})),
                ("silent", lambda: tf.io.gfile.stat("hdfs://127.0.0.1:{port}/x")),
            ]:
                start = time.monotonic()
                try:
                    call()
                    out[key] = None
                except tf.errors.OpError as e:
                    out[key] = [type(e).__name__, e.message, time.monotonic() - start]
            print(json.dumps(out))
            """,
            HADOOP_USER_NAME="tfyarn-stranger",
            TFYARN_HDFS_TIMEOUT="3",
        )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    yield {**json.loads(proc.stdout.strip().splitlines()[-1]), "secret": secret}


def test_permission_denied_is_a_clear_tf_error(stranger: dict[str, Any]) -> None:
    kind, message, _ = stranger["denied"]
    assert kind == "PermissionDeniedError", message
    assert stranger["secret"] in message
    assert "tfyarn-stranger" in message
    assert "AccessControlException" in message


def test_missing_namenode_fails_within_bounded_time() -> None:
    tfyarn.enable_hdfs()
    start = time.monotonic()
    with pytest.raises(tf.errors.UnavailableError, match=r"hdfs://127\.0\.0\.1:1/x"):
        tf.io.gfile.exists("hdfs://127.0.0.1:1/x")
    assert time.monotonic() - start < 15


def test_silent_namenode_hits_the_deadline(stranger: dict[str, Any]) -> None:
    """A NameNode that accepts connections and never answers."""
    kind, message, seconds = stranger["silent"]
    assert kind == "DeadlineExceededError", message
    assert "did not answer within 3 s" in message
    assert seconds < 10


def test_killed_writer_leaves_no_complete_looking_checkpoint(base: str) -> None:
    """TensorFlow writes checkpoints under temporary names and renames them
    when complete: a writer killed mid-save leaves the previous checkpoint the
    latest one, restorable, and the next save to the same path works."""
    ckpt = base + "/killed"
    code = f"""
        v = tf.Variable(tf.zeros([6 << 20]))  # 24 MiB per save
        manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), {ckpt!r}, 5)
        step = 0
        while True:
            step += 1
            v.assign(tf.fill([6 << 20], float(step)))
            manager.save(checkpoint_number=step)
            print("saved", step, flush=True)
    """
    prelude = "import sys, time, tfyarn, tensorflow as tf\ntfyarn.enable_hdfs()\n"
    proc = subprocess.Popen(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("saved 2"):
                break
        time.sleep(0.8)  # into the third save
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    latest = tf.train.latest_checkpoint(ckpt)
    assert latest is not None
    saved = int(latest.rsplit("-", 1)[1])
    assert saved >= 2
    v = tf.Variable(tf.zeros([6 << 20]))
    tf.train.Checkpoint(v=v).restore(latest).assert_consumed()
    assert float(v[0]) == float(v[-1]) == float(saved)
    # The dead writer's half-written file is still under its lease; saving
    # that same checkpoint again must not hang or fail.
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(v=v), ckpt, 5)
    start = time.monotonic()
    manager.save(checkpoint_number=saved + 1)
    assert time.monotonic() - start < 60
    assert tf.train.latest_checkpoint(ckpt).endswith(f"ckpt-{saved + 1}")


def test_viewfs_mount_table(base: str, tmp_path, monkeypatch) -> None:
    """viewfs:// through a mount table in HADOOP_CONF_DIR, as hdfs-native reads it."""
    from xml.etree import ElementTree

    from tfyarn.data.fs.locate import default_fs

    target = base + "/viewfs-target"
    tf.io.gfile.makedirs(target)
    with tf.io.gfile.GFile(target + "/hello.txt", "w") as f:
        f.write("through the mount table")
    conf = tmp_path / "conf"
    conf.mkdir()
    src = os.environ["HADOOP_CONF_DIR"]
    for name in ("core-site.xml", "hdfs-site.xml"):
        shutil.copy(os.path.join(src, name), conf / name)
    nn = default_fs()
    assert nn is not None
    tree = ElementTree.parse(conf / "core-site.xml")
    table = "fs.viewfs.mounttable.tfyarntest."
    # hdfs-native (so the plugin and tfyarn.data) needs a fallback link.
    for key, value in [
        ("link./data", nn.rstrip("/") + urlparse(target).path),
        ("linkFallback", nn),
    ]:
        prop = ElementTree.SubElement(tree.getroot(), "property")
        ElementTree.SubElement(prop, "name").text = table + key
        ElementTree.SubElement(prop, "value").text = value
    tree.write(conf / "core-site.xml")
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    assert tf.io.gfile.listdir("viewfs://tfyarntest/data") == ["hello.txt"]
    with tf.io.gfile.GFile("viewfs://tfyarntest/data/hello.txt") as f:
        assert f.read() == "through the mount table"
