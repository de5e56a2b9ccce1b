"""`tfyarn data` never overwrites, mixes or half-writes a data set on real HDFS."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from _hdfs import hdfs_dir

from tfyarn.cli import main
from tfyarn.data import fs as _fs

pytestmark = pytest.mark.hdfs

SMALL = ["--train", "40", "--test", "20"]


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    yield from hdfs_dir()


def _names(url: str) -> list[str]:
    return sorted(i.url.rsplit("/", 1)[1] for i in _fs.resolve(url).ls(url))


def test_a_bare_path_is_hdfs_and_a_rewrite_replaces_the_set_whole(
    base: str, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = base[len("hdfs://") :] + "/digits"  # /tmp/tfyarn-test/<id>/digits
    assert main(["data", "make-example", bare, "--shards", "2", *SMALL]) == 0
    out = capsys.readouterr().out
    default = _fs.default_fs()
    assert default and default.startswith("hdfs://")
    assert f"{default}{bare}/train-00000-of-00002.tfrecord" in out
    assert main(["data", "make-example", bare, "--shards", "3", *SMALL]) == 1
    assert "already exists; add --force" in capsys.readouterr().err
    assert len(_names(base + "/digits")) == 4
    assert main(["data", "make-example", bare, "--shards", "3", *SMALL, "--force"]) == 0
    names = _names(base + "/digits")
    assert len(names) == 6 and all("-of-00003" in n for n in names), names
    assert not [n for n in _names(base) if n.startswith(".")]  # no temp left
    capsys.readouterr()
    assert main(["data", "count", bare + "/train-*"]) == 0
    assert "40  total" in capsys.readouterr().out


def test_a_write_over_quota_names_the_quota_and_leaves_nothing(
    base: str, tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    limited = base + "/limited"
    _fs.resolve(limited).mkdirs(limited)
    path = limited[len("hdfs://") :]
    subprocess.run(
        ["hdfs", "dfsadmin", "-setSpaceQuota", "1k", path],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    src = tmp_path / "data.bin"
    src.write_bytes(b"x" * 4096)
    assert main(["data", "put", str(src), limited + "/data.bin"]) == 1
    err = capsys.readouterr().err
    assert "HDFS space quota is used up" in err, err
    assert "Traceback" not in err
    assert _names(limited) == []  # neither the file nor its temporary
