"""Stop notices in the script (tfyarn.should_stop, termination_config) and the runtime's board."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

import tfyarn
from tfyarn import notice as script_notice
from tfyarn._proto import master_pb2 as pb
from tfyarn.contract import notice as contract
from tfyarn.runtime.notice import NoticeBoard, script_env


@pytest.fixture
def stop_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This process as a script of attempt 3, its notice file not there yet."""
    env = script_env(tmp_path, 3, 7.5)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(script_notice, "_heeded", set())
    return Path(env[contract.STOP_FILE])


def test_outside_a_job_nothing_is_ever_noticed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(contract.STOP_FILE, raising=False)
    monkeypatch.delenv(contract.STOP_GRACE, raising=False)
    assert tfyarn.should_stop() is False
    assert tfyarn.stop_notice() is None
    assert script_notice.stop_grace() == 0.0
    assert tfyarn.RESTART_CODE == 42


def test_the_first_check_tells_the_runtime_the_script_heeds_notices(
    stop_file: Path,
) -> None:
    board = NoticeBoard(stop_file)
    assert stop_file.name == "tfyarn-stop-notice.3"
    assert not board.heeded()
    assert tfyarn.should_stop() is False
    assert board.heeded()
    assert script_notice.stop_grace() == 7.5


def test_a_posted_notice_is_what_the_script_sees(stop_file: Path) -> None:
    board = NoticeBoard(stop_file)
    deadline = time.time() + 7.5
    board.post(
        pb.StopNotice(
            reason="scaled to 3 workers", grace_seconds=7.5, deadline=deadline
        )
    )
    assert board.active
    assert tfyarn.should_stop() is True
    notice = tfyarn.stop_notice()
    assert notice == contract.Notice("scaled to 3 workers", 7.5, deadline)
    # Once the script ended, the runtime waits for the master's Stop until
    # a little past the deadline.
    assert 7 < board.wait_for_stop() <= 7.5 + 15.0
    # A repeat (a stream opened again) changes nothing.
    board.post(pb.StopNotice(reason="other", grace_seconds=1, deadline=1))
    assert tfyarn.stop_notice() == notice


def test_a_new_attempt_starts_without_its_predecessors_notice(tmp_path: Path) -> None:
    old = NoticeBoard(contract.stop_file(tmp_path, 0))
    old.post(pb.StopNotice(reason="r", grace_seconds=1, deadline=time.time()))
    contract.heeded_marker(old.path).touch()
    new = NoticeBoard(contract.stop_file(tmp_path, 1))
    assert not new.path.exists() and not new.heeded()
    # A board for a path that was used before starts it clean.
    again = NoticeBoard(old.path)
    assert not again.path.exists() and not again.heeded()


def test_a_notice_that_is_not_one_reads_as_none(stop_file: Path) -> None:
    stop_file.write_text("{half")
    assert tfyarn.stop_notice() is None
    assert tfyarn.should_stop() is True  # the file's presence is the signal


class Exited(Exception):
    """What the test's stand-in for ``os._exit`` raises."""


def test_termination_config_watches_notices_and_exits_with_the_restart_code(
    stop_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import tensorflow as tf

    def exit_(code: int) -> None:
        raise Exited(code)

    monkeypatch.setattr(script_notice.os, "_exit", exit_)
    monkeypatch.setattr(script_notice.logging, "shutdown", lambda: None)
    config = tfyarn.termination_config(before_exit=lambda: print("saved_at=7"))
    assert isinstance(config, tf.distribute.experimental.TerminationConfig)
    assert config.termination_watcher_fn is script_notice.should_stop
    assert config.grace_period == 0.0
    assert contract.heeded_marker(stop_file).exists()  # heeds from the start
    with pytest.raises(Exited) as exited:
        config.exit_fn()
    assert exited.value.args == (contract.RESTART_CODE,)
    assert capsys.readouterr().out == "saved_at=7\n"  # said before the exit
    # Even a failing before_exit ends the process with the restart code.
    broken = tfyarn.termination_config(before_exit=lambda: 1 / 0)
    with pytest.raises(Exited) as exited:
        broken.exit_fn()
    assert exited.value.args == (contract.RESTART_CODE,)
