"""The master's TensorBoard (am/tensorboard.py): the mirror, the process, the page
link, and the --tensorboard option from the command line to the master's spec."""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from am import status_page
from am import tensorboard as tb
from tfyarn import cli
from tfyarn.client import cli as submit_cli
from tfyarn.client import config
from tfyarn.data import fs
from tfyarn.errors import HdfsError
from tfyarn.spec import JobSpec


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path, Path]:
    src, dest, staging = tmp_path / "src", tmp_path / "dest", tmp_path / "staging"
    src.mkdir()
    return src, dest, staging


def test_mirror_copies_new_and_grown_files_whole_and_skips_temporaries(
    dirs: tuple[Path, Path, Path],
) -> None:
    src, dest, staging = dirs
    (src / "train").mkdir()
    (src / "train" / "events.out.tfevents.1").write_bytes(b"abc")
    (src / "events.out.tfevents.2").write_bytes(b"x" * 10)
    (src / "._tmp.events.out.tfevents.1.ab12").write_bytes(b"partial")
    mirror = tb.Mirror(str(src), str(dest), str(staging))

    assert mirror.sync() == 2
    assert (dest / "train" / "events.out.tfevents.1").read_bytes() == b"abc"
    assert (dest / "events.out.tfevents.2").read_bytes() == b"x" * 10
    assert not list(dest.glob("._tmp*"))
    assert mirror.sync() == 0  # nothing changed

    (src / "train" / "events.out.tfevents.1").write_bytes(b"abcdef")  # grown
    (src / "eval").mkdir()
    (src / "eval" / "events.out.tfevents.3").write_bytes(b"new")
    assert mirror.sync() == 2
    assert (dest / "train" / "events.out.tfevents.1").read_bytes() == b"abcdef"
    assert (dest / "eval" / "events.out.tfevents.3").read_bytes() == b"new"
    assert not list(staging.iterdir())


def test_mirror_of_a_dir_not_written_yet_copies_nothing(
    dirs: tuple[Path, Path, Path],
) -> None:
    src, dest, staging = dirs
    mirror = tb.Mirror(str(src / "later"), str(dest), str(staging))
    assert mirror.sync() == 0
    (src / "later").mkdir()
    (src / "later" / "events.out.tfevents.1").write_bytes(b"e")
    assert mirror.sync() == 1


class FailingRead(fs.LocalFileSystem):
    """Reads one chunk, then fails: a connection lost mid-copy."""

    def read_chunks(self, url: str, chunk_size: int = fs.READ_CHUNK) -> Iterator[bytes]:
        yield b"half"
        raise HdfsError(f"lost the DataNode reading {url}")


def test_a_failed_copy_leaves_the_old_file_whole_and_no_temporary(
    dirs: tuple[Path, Path, Path],
) -> None:
    src, dest, staging = dirs
    (src / "events.out.tfevents.1").write_bytes(b"old")
    mirror = tb.Mirror(str(src), str(dest), str(staging))
    mirror.sync()
    (src / "events.out.tfevents.1").write_bytes(b"old and new")
    mirror._fs = FailingRead()
    with pytest.raises(HdfsError):
        mirror.sync()
    assert (dest / "events.out.tfevents.1").read_bytes() == b"old"
    assert not list(staging.iterdir())
    mirror._fs = fs.LocalFileSystem()
    assert mirror.sync() == 1  # retried on the next round
    assert (dest / "events.out.tfevents.1").read_bytes() == b"old and new"


def test_tensorboard_serves_the_scalars_of_its_logdir_and_stops(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    # A real event file with one scalar, written without TensorFlow.
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    writer = EventFileWriter(str(logs / "run1"))
    summary = summary_pb2.Summary(
        value=[summary_pb2.Summary.Value(tag="loss", simple_value=0.25)]
    )
    writer.add_event(event_pb2.Event(step=7, wall_time=1.0, summary=summary))
    writer.close()

    board = tb.TensorBoard(str(logs), workdir=str(tmp_path))
    board.start()
    try:
        port = board.wait_ready(timeout=60)
        assert port, board.problem
        assert board.state() == (True, f"logs from {logs}")
        url = f"http://127.0.0.1:{port}/data/plugin/scalars/scalars?run=run1&tag=loss"
        with urllib.request.urlopen(url, timeout=30) as response:
            points = json.loads(response.read())
        assert [(step, value) for _, step, value in points] == [(7, 0.25)]
    finally:
        board.stop()
    assert board.process is not None and board.process.poll() is not None
    assert board.state()[0] is False


def test_a_tensorboard_that_cannot_start_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tb, "_LAUNCH", "import sys; sys.exit('no tensorboard here')")
    board = tb.TensorBoard(str(tmp_path), workdir=str(tmp_path))
    board.start()
    assert board.wait_ready(timeout=60) is None
    assert "exited with code 1" in board.problem
    assert "no tensorboard here" in board.problem
    assert board.state() == (False, board.problem)


def test_a_remote_logdir_is_mirrored_into_the_workdir(tmp_path: Path) -> None:
    board = tb.TensorBoard("hdfs:///tmp/job/logs", workdir=str(tmp_path))
    assert board.local_dir == str(tmp_path / "tensorboard-logs")
    assert board._mirror is not None
    assert board._mirror.source == "hdfs:///tmp/job/logs"


def test_the_page_links_tensorboard_or_says_why_not() -> None:
    snap = {"phase": "RUNNING", "tasks": []}
    assert "tensorboard" not in status_page.render(snap).lower()
    page = status_page.render(snap, tensorboard=(True, "logs from hdfs:///x"))
    assert "<a href='../tensorboard/'>TensorBoard</a>" in page
    page = status_page.render(snap, tensorboard=(False, "TensorBoard <exited>"))
    assert "../tensorboard/" not in page and "TensorBoard &lt;exited&gt;" in page


@pytest.fixture
def no_user_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path


def submitted(*argv: str) -> JobSpec:
    ns = cli.build_parser().parse_args(["submit", *argv, "train.py"])
    return config.to_spec("train.py", [], config.load(None, submit_cli._options(ns)))


def test_the_tensorboard_option_reaches_the_masters_spec(
    no_user_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert submitted().tensorboard == "" == JobSpec(script="t.py").tensorboard
    spec = submitted("--tensorboard", "hdfs:///user/me/run1/logs")
    assert spec.tensorboard == "hdfs:///user/me/run1/logs"
    assert JobSpec.from_env(spec.to_env()).tensorboard == spec.tensorboard
    # A local dir is read on the master's node: made absolute here.
    monkeypatch.chdir(no_user_file)
    assert submitted("--tensorboard", "logs").tensorboard == str(no_user_file / "logs")
    assert JobSpec(script="t.py", tensorboard="file:///a/b").tensorboard == "/a/b"
    assert os.path.isabs(JobSpec(script="t.py", tensorboard="x").tensorboard)
