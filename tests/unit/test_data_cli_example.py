"""`tfyarn data ...` commands and the example data set's learnable structure."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

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
    d = f"file://{tmp_path}/digits"
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
    assert main(["data", "count", f"file://{tmp_path}/none-*"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: no files match") and "Traceback" not in err
    absent, x = str(tmp_path / "absent"), f"file://{tmp_path}/x"
    assert main(["data", "put", absent, x]) == 1
    assert "does not exist" in capsys.readouterr().err
    assert main(["data", "ls", "hdfs://127.0.0.1:1/x"]) == 1
    assert "cannot reach hdfs://127.0.0.1:1" in capsys.readouterr().err


def test_data_commands_print_no_tensorflow_startup_lines(tmp_path) -> None:
    # A fresh process: TensorFlow's C++ start-up lines appear once per process.
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    done = subprocess.run(
        [sys.executable, "-m", "tfyarn.cli", "data", "make-example",
         f"file://{tmp_path}/d", "--shards", "1", "--train", "20", "--test", "10"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "train: 1 shard(s)" in done.stdout
    assert "cpu_feature_guard" not in done.stderr + done.stdout
    assert "absl::InitializeLog" not in done.stderr + done.stdout


def _files(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_make_example_refuses_an_existing_set_and_force_replaces_it_whole(
    tmp_path, capsys
) -> None:
    d = f"file://{tmp_path}/digits"
    small = ["--train", "40", "--test", "20"]
    assert main(["data", "make-example", d, "--shards", "2", *small]) == 0
    before = _files(tmp_path / "digits")
    assert main(["data", "make-example", d, "--shards", "3", *small]) == 1
    err = capsys.readouterr().err
    assert "already exists; add --force" in err and "Traceback" not in err
    assert _files(tmp_path / "digits") == before  # untouched
    assert main(["data", "make-example", d, "--shards", "3", *small, "--force"]) == 0
    after = _files(tmp_path / "digits")
    assert len(after) == 6 and all("-of-00003" in name for name in after)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]
    capsys.readouterr()
    assert main(["data", "count", d + "/train-*"]) == 0
    assert "40  total" in capsys.readouterr().out


def test_put_refuses_to_overwrite_unless_forced(tmp_path, capsys) -> None:
    src = tmp_path / "a.txt"
    src.write_text("new")
    (tmp_path / "dst").mkdir()
    (tmp_path / "dst" / "a.txt").write_text("old")
    dst = f"file://{tmp_path}/dst"
    assert main(["data", "put", str(src), dst]) == 1  # into the directory: exists
    assert "dst/a.txt already exists; add --force" in capsys.readouterr().err
    assert (tmp_path / "dst" / "a.txt").read_text() == "old"
    assert main(["data", "put", str(src), dst, "--force"]) == 0
    assert (tmp_path / "dst" / "a.txt").read_text() == "new"


def test_put_of_a_directory_replaces_it_whole_never_merges(tmp_path, capsys) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    (tree / "one").write_text("1")
    (tree / "sub" / "two").write_text("2")
    dst = f"file://{tmp_path}/remote"
    assert main(["data", "put", str(tree), dst]) == 0
    assert _files(tmp_path / "remote") == ["one", "sub"]
    (tree / "one").unlink()
    (tree / "three").write_text("3")
    assert main(["data", "put", str(tree), dst]) == 1
    assert "remote already exists" in capsys.readouterr().err
    assert main(["data", "put", str(tree), dst, "--force"]) == 0
    # The stale file is gone with the old set.
    assert _files(tmp_path / "remote") == ["sub", "three"]


def test_a_failed_tree_write_leaves_nothing(tmp_path) -> None:
    from tfyarn.data import writers

    def fail_half_way(tmp: str) -> None:
        (tmp_path / tmp.rsplit("/", 1)[1] / "part-0").write_text("half")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        writers.replace_tree(f"file://{tmp_path}/set", fail_half_way)
    assert list(tmp_path.iterdir()) == []


def test_count_of_a_file_that_is_not_tfrecord_says_so(tmp_path, capsys) -> None:
    (tmp_path / "data.csv").write_text("a,b\n1,2\n" * 50)
    assert main(["data", "count", f"file://{tmp_path}/data.csv"]) == 1
    err = capsys.readouterr().err
    assert "is not a TFRecord file" in err and "Rewrite" not in err


def test_bare_paths_mean_the_default_filesystem(tmp_path, monkeypatch) -> None:
    from tfyarn.data import fs as _fs

    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "core-site.xml").write_text(
        "<configuration><property><name>fs.defaultFS</name>"
        "<value>hdfs://nn.example:8020</value></property></configuration>"
    )
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    monkeypatch.setenv("HADOOP_USER_NAME", "ana")
    assert _fs.qualify("/data/x") == "hdfs://nn.example:8020/data/x"
    assert _fs.qualify("data/x") == "hdfs://nn.example:8020/user/ana/data/x"
    assert _fs.qualify("file:///data/x") == "file:///data/x"
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path / "empty"))
    with pytest.raises(_fs.HdfsError, match="bare path"):
        _fs.qualify("/data/x")


def test_ls_of_an_empty_directory_lists_nothing_but_an_empty_glob_is_an_error(
    tmp_path, capsys
) -> None:
    (tmp_path / "empty").mkdir()
    assert main(["data", "ls", f"file://{tmp_path}/empty"]) == 0
    assert capsys.readouterr() == ("", "")
    assert main(["data", "ls", f"file://{tmp_path}/empty/*.tfrecord"]) == 1
    assert "nothing matches" in capsys.readouterr().err
