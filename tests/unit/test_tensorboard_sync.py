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
