"""`tfyarn data ...` commands and the example data set's learnable structure."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from tfyarn.cli import main
from tfyarn.data.example import digits


def test_digits_deterministic_and_learnable() -> None:
    x, y = digits(3000, seed=0)
    x2, y2 = digits(3000, seed=0)
    assert np.array_equal(x, x2) and np.array_equal(y, y2)
    assert x.shape == (3000, 64) and x.dtype == np.float32
    assert set(np.bincount(y)) == {300}
    # A least-squares linear classifier must do far better than chance (10%)...
    xt, yt = digits(1000, seed=1)
    a = np.c_[x, np.ones(len(x))]
    w, *_ = np.linalg.lstsq(a, np.eye(10)[y], rcond=None)
    acc = float(np.mean(np.argmax(np.c_[xt, np.ones(len(xt))] @ w, 1) == yt))
    assert acc > 0.8, acc
    # ...but not be trivially perfect, so accuracy checks mean something.
    assert acc < 0.995, acc


def test_make_example_ls_count(tmp_path, capsys) -> None:
    d = str(tmp_path / "digits")
    assert (
        main(
            [
                "data",
                "make-example",
                d,
                "--shards",
                "3",
                "--train",
                "90",
                "--test",
                "30",
                "--format",
                "both",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "train: 3 shard(s)" in out and "train-parquet: 3 shard(s)" in out
    assert main(["data", "ls", d + "/train-*"]) == 0
    assert capsys.readouterr().out.count("train-0000") == 3
    assert main(["data", "count", d + "/train-*"]) == 0
    assert "90  total" in capsys.readouterr().out


def test_errors_are_clean(tmp_path, capsys) -> None:
    assert main(["data", "count", str(tmp_path / "none-*")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: no files match") and "Traceback" not in err
    assert main(["data", "put", str(tmp_path / "absent"), str(tmp_path / "x")]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main(["data", "ls", "hdfs://127.0.0.1:1/x"]) == 1
    assert "cannot reach hdfs://127.0.0.1:1" in capsys.readouterr().err


def test_data_commands_print_no_tensorflow_startup_lines(tmp_path) -> None:
    # A fresh process: TensorFlow's C++ start-up lines appear once per process.
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run(
        [sys.executable, "-m", "tfyarn.cli", "data", "make-example",
         str(tmp_path / "d"), "--shards", "1", "--train", "20", "--test", "10"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "train: 1 shard(s)" in done.stdout
    assert "cpu_feature_guard" not in done.stderr + done.stdout
    assert "absl::InitializeLog" not in done.stderr + done.stdout
