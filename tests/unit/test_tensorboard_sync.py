"""TensorBoard log mirroring (local 'remote' directory; HDFS in integration)."""

from __future__ import annotations

import os
import time

from tfyarn.tensorboard import LogSync


def test_sync_copies_new_and_grown_files(tmp_path) -> None:
    remote = tmp_path / "remote"
    sync = LogSync(str(remote), local_dir=str(tmp_path / "local"), start=False)
    os.makedirs(os.path.join(sync.local_dir, "train"))
    event = os.path.join(sync.local_dir, "train", "events.out.tfevents.1")
    with open(event, "wb") as f:
        f.write(b"one")
    assert sync.sync() == 1
    assert (remote / "train" / "events.out.tfevents.1").read_bytes() == b"one"
    assert sync.sync() == 0  # unchanged: nothing copied
    with open(event, "ab") as f:
        f.write(b"two")
    assert sync.sync() == 1
    assert (remote / "train" / "events.out.tfevents.1").read_bytes() == b"onetwo"


def test_background_thread_and_final_flush(tmp_path) -> None:
    remote = tmp_path / "remote"
    with LogSync(str(remote), local_dir=str(tmp_path / "l"), interval=0.2) as sync:
        with open(os.path.join(sync.local_dir, "a"), "wb") as f:
            f.write(b"live")
        deadline = time.monotonic() + 10
        while not (remote / "a").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (remote / "a").read_bytes() == b"live"  # seen while "training"
        with open(os.path.join(sync.local_dir, "b"), "wb") as f:
            f.write(b"last")
    assert (remote / "b").read_bytes() == b"last"  # the final flush


def test_keras_callback_without_tensorboard_package(tmp_path, monkeypatch) -> None:
    import importlib.util

    import pytest

    from tfyarn.errors import TfyarnError
    from tfyarn.tensorboard import keras_callback

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "tensorboard" else real(name, *a),
    )
    with pytest.raises(TfyarnError, match="pip install tensorboard"):
        keras_callback(str(tmp_path / "remote"))


def test_logs_are_mirrored_with_the_plugin_installed_too(tmp_path, monkeypatch) -> None:
    # An event file written straight to HDFS reads as empty until it is closed
    # (see tfyarn.tensorboard), so LogSync copies whole files either way.
    from tfyarn import hdfs

    monkeypatch.setattr(hdfs, "available", lambda: True)
    remote = tmp_path / "remote"
    with LogSync(str(remote), interval=60) as sync:
        assert os.path.realpath(sync.local_dir) != os.path.realpath(remote)
        with open(os.path.join(sync.local_dir, "a"), "wb") as f:
            f.write(b"x")
    assert (remote / "a").read_bytes() == b"x"


def test_master_mirror_takes_a_file_still_being_written_again(
    tmp_path, monkeypatch
) -> None:
    # hdfs-native reads an open HDFS file only as far as its completed blocks,
    # though its listed size includes what the writer flushed since.
    from am.tensorboard import Mirror

    src, dest = tmp_path / "src", tmp_path / "dest"
    src.mkdir()
    event = src / "events.out.tfevents.1"
    event.write_bytes(b"abc")
    mirror = Mirror(str(src), str(dest), str(tmp_path / "staging"))
    real = type(mirror._fs).read_chunks
    visible = {"n": 3}

    def read_chunks(self, url, *args):  # type: ignore[no-untyped-def]
        data = b"".join(real(self, url, *args))
        return iter([data[: visible["n"]]])

    monkeypatch.setattr(type(mirror._fs), "read_chunks", read_chunks)
    assert mirror.sync() == 1
    event.write_bytes(b"abcdef")  # flushed, but not readable yet
    visible["n"] = 0
    assert mirror.sync() == 0
    assert (dest / event.name).read_bytes() == b"abc"  # never shrinks
    visible["n"] = 6  # closed: all of it reads
    assert mirror.sync() == 1
    assert (dest / event.name).read_bytes() == b"abcdef"
    assert mirror.sync() == 0
