"""``tfyarn status APP`` while the ResourceManager is down or restarting.

skein 0.8.2's driver answers "Unknown ApplicationId" for every failed
application report, also after retrying an unreachable ResourceManager for
``$TFYARN_YARN_TIMEOUT``: such a slow answer, with no ResourceManager accepting
a connection, is reported as unreachable, never as an unknown application.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _fake_yarn import APP_ID, FakeYarn, Report

import tfyarn
from tfyarn.cli import main
from tfyarn.client import connection, hadoop_conf, jobs, last_driver, yarn_answers

# What the driver says for any failed report (Driver.getReport).
UNKNOWN = f"Unknown ApplicationId '{APP_ID}'"
# The gate in these tests, and how long a "retrying" driver takes here.
GATE_S = 0.5
RETRIED_S = 0.7


def rm_conf(tmp_path: Path, port: int) -> Path:
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    (conf / "core-site.xml").write_text("<configuration></configuration>")
    (conf / "yarn-site.xml").write_text(
        "<configuration><property><name>yarn.resourcemanager.address</name>"
        f"<value>127.0.0.1:{port}</value></property></configuration>"
    )
    return conf


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A port that accepts connections, as a running ResourceManager's does."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock


@pytest.fixture
def free_port() -> int:
    """A port nothing listens on, as a killed ResourceManager's."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(autouse=True)
def _gate(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(yarn_answers, "_ANSWERED_WITHIN_S", GATE_S)
    monkeypatch.setattr(last_driver, "log_path", lambda: tmp_path / "none.log")
    monkeypatch.delenv(hadoop_conf.TIMEOUT_ENV, raising=False)


class _Retrying(FakeYarn):
    """A driver whose report fails after ``delay`` seconds, as skein's does."""

    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.asked = 0

    def application_report(self, app_id: str) -> Report:
        self.asked += 1
        time.sleep(self.delay)
        raise ValueError(UNKNOWN)


def test_status_while_the_rm_is_down_says_it_is_unreachable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free_port: int
) -> None:
    monkeypatch.setenv("HADOOP_CONF_DIR", str(rm_conf(tmp_path, free_port)))
    started = time.monotonic()
    with pytest.raises(connection.YarnUnreachableError) as err:
        tfyarn.status(APP_ID, client=_Retrying(RETRIED_S))
    text = str(err.value)
    assert f"could not reach the YARN ResourceManager at 127.0.0.1:{free_port}" in text
    assert "no ResourceManager accepts connections" in text
    assert "gave up after retrying for about 20 s" in text
    assert hadoop_conf.TIMEOUT_ENV in text and "no application" not in text
    assert err.value.__cause__ is None and err.value.__suppress_context__
    # The probe adds nothing like a retry of its own: a refused port answers at once.
    assert time.monotonic() - started < RETRIED_S + connection.PROBE_TIMEOUT_S


def test_a_slow_unknown_from_a_reachable_rm_is_still_an_unknown_application(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    monkeypatch.setenv("HADOOP_CONF_DIR", str(rm_conf(tmp_path, port)))
    with pytest.raises(
        connection.UnknownApplicationError, match=f"no application {APP_ID}"
    ):
        tfyarn.status(APP_ID, client=_Retrying(RETRIED_S))


class _TakenOver(FakeYarn):
    """A driver that gave up finding an active RM once; the one now active knows."""

    def __init__(self, *, known: bool, state: str = "ACCEPTED") -> None:
        super().__init__([Report(state=state)])
        self.known = known
        self.asked = 0

    def application_report(self, app_id: str) -> Report:
        self.asked += 1
        if self.asked == 1:
            time.sleep(RETRIED_S)  # the search for an active ResourceManager
            raise ValueError(UNKNOWN)
        if not self.known:
            raise ValueError(UNKNOWN)
        return super().application_report(app_id)


@pytest.mark.parametrize(
    ("command", "state"),
    [
        (lambda yarn: tfyarn.status(APP_ID, client=yarn).state, "ACCEPTED"),
        (lambda yarn: tfyarn.kill(APP_ID, client=yarn).state, "FINISHED"),
    ],
    ids=["status", "kill"],
)
def test_after_a_takeover_the_new_active_rm_is_asked_again(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    listener: socket.socket,
    command: Callable[[FakeYarn], str],
    state: str,
) -> None:
    # The driver's search ended just before the standby took over: its
    # "unknown" predates the takeover, and the new active RM knows the job.
    port = listener.getsockname()[1]
    monkeypatch.setenv("HADOOP_CONF_DIR", str(rm_conf(tmp_path, port)))
    yarn = _TakenOver(known=True, state=state)
    assert command(yarn) == state
    assert yarn.asked == 2


def test_an_id_the_new_active_rm_does_not_know_either_is_unknown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, listener: socket.socket
) -> None:
    monkeypatch.setenv(
        "HADOOP_CONF_DIR", str(rm_conf(tmp_path, listener.getsockname()[1]))
    )
    yarn = _TakenOver(known=False)
    with pytest.raises(
        connection.UnknownApplicationError, match=f"no application {APP_ID}"
    ):
        tfyarn.status(APP_ID, client=yarn)
    assert yarn.asked == 2  # asked again once, not until a bound


def test_a_quick_unknown_came_from_an_rm_that_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free_port: int
) -> None:
    # An answer within the gate was the ResourceManager's: no probe, however
    # the port looks by the time of the error.
    monkeypatch.setenv("HADOOP_CONF_DIR", str(rm_conf(tmp_path, free_port)))
    yarn = _Retrying(0)
    with pytest.raises(connection.UnknownApplicationError):
        tfyarn.status(APP_ID, client=yarn)
    assert yarn.asked == 1  # a mistyped id is not asked again


def test_every_rm_of_an_ha_pair_is_probed(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    listener: socket.socket,
    free_port: int,
) -> None:
    conf = rm_conf(tmp_path, free_port)
    port = listener.getsockname()[1]
    (conf / "yarn-site.xml").write_text(
        "<configuration>"
        + "".join(
            f"<property><name>{k}</name><value>{v}</value></property>"
            for k, v in {
                "yarn.resourcemanager.ha.enabled": "true",
                "yarn.resourcemanager.ha.rm-ids": "rm1,rm2",
                "yarn.resourcemanager.address.rm1": f"127.0.0.1:{free_port}",
                "yarn.resourcemanager.address.rm2": f"127.0.0.1:{port}",
            }.items()
        )
        + "</configuration>"
    )
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    assert connection.rm_accepts_connections()
    listener.close()
    assert not connection.rm_accepts_connections()


def test_without_a_configuration_the_probe_contradicts_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    assert connection.rm_accepts_connections()
    with (
        pytest.raises(connection.UnknownApplicationError),
        connection.yarn_errors(APP_ID),
    ):
        time.sleep(RETRIED_S)
        raise ValueError(UNKNOWN)


@pytest.fixture
def yarn_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``yarn`` command on PATH, as a client machine has (never run here)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "yarn").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "yarn").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")


@pytest.mark.usefixtures("yarn_on_path")
@pytest.mark.parametrize("accepting", [False, True], ids=["down", "up"])
def test_a_command_says_first_that_no_rm_accepts_connections(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    listener: socket.socket,
    free_port: int,
    accepting: bool,
) -> None:
    # The call that follows searches for the bound: said before, not after.
    port = listener.getsockname()[1] if accepting else free_port
    monkeypatch.setenv("HADOOP_CONF_DIR", str(rm_conf(tmp_path, port)))
    said_first: list[str] = []

    def status(app_id: str, **_: object) -> None:
        said_first.append(capsys.readouterr().err)
        raise connection.unreachable("Connection refused")

    monkeypatch.setattr(jobs, "status", status)
    assert main(["status", APP_ID]) == 1
    err = capsys.readouterr().err
    if accepting:
        assert said_first == [""]
    else:
        assert said_first[0] == (
            f"tfyarn: no ResourceManager accepts connections at 127.0.0.1:{port} "
            "(restarting, or one taking over?); trying for up to 20 s "
            "(TFYARN_YARN_TIMEOUT) ...\n"
        )
    assert err.startswith("Error: could not reach the YARN ResourceManager")


def test_without_a_yarn_command_nothing_is_promised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free_port: int
) -> None:
    # The call fails at once for want of `yarn`: no "trying for up to 20 s".
    monkeypatch.setenv("HADOOP_CONF_DIR", str(rm_conf(tmp_path, free_port)))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert connection.unreachable_rm_notice() is None
