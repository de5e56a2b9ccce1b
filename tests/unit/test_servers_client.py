"""``tfyarn servers`` and ``tfyarn.servers()`` without a cluster: what is
printed, the names a client program gets, the reachability check on a closed
port, and bad input refused before YARN is asked."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

import tfyarn
from tfyarn.cli import main
from tfyarn.client import reach, servers
from tfyarn.client.servers import ServerSet
from tfyarn.errors import SpecError


def a_set(**kwargs: Any) -> ServerSet:
    return ServerSet(
        app_id="application_1_0001",
        hosts={"ps": ["n1:2000"], "worker": ["n1:2001", "n2:2002"]},
        coordinator="gw:3000",
        tracking_url="http://rm:8088/proxy/application_1_0001/",
        **kwargs,
    )


def test_the_printed_lines_are_what_a_shell_takes() -> None:
    app, flags, tf_config, page = a_set().lines()
    assert app == "application_1_0001"
    assert flags == "--ps_hosts=n1:2000 --worker_hosts=n1:2001,n2:2002"
    assert tf_config.startswith("TF_CONFIG=")
    parsed = json.loads(tf_config.removeprefix("TF_CONFIG="))
    assert parsed == {
        "cluster": {
            "chief": ["gw:3000"],
            "ps": ["n1:2000"],
            "worker": ["n1:2001", "n2:2002"],
        },
        "task": {"type": "chief", "index": 0},
    }
    assert page.startswith("http://")


def test_targets_name_a_server_and_refuse_what_is_not_there() -> None:
    cluster = a_set()
    assert cluster.target("worker", 1) == "grpc://n2:2002"
    assert cluster.target("ps") == "grpc://n1:2000"
    with pytest.raises(SpecError, match="worker:2 is not in the server set"):
        cluster.target("worker", 2)
    with pytest.raises(SpecError, match="no 'chief' servers"):
        cluster.target("chief", 0)


def test_the_python_api_is_exported() -> None:
    assert tfyarn.servers is servers.servers
    assert tfyarn.ServerSet is ServerSet


def test_a_closed_port_is_named_with_what_to_do() -> None:
    with socket.socket() as open_one:
        open_one.bind(("127.0.0.1", 0))
        open_one.listen()
        good = f"127.0.0.1:{open_one.getsockname()[1]}"
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            bad = f"127.0.0.1:{closed.getsockname()[1]}"  # bound, never listening
            addresses = {"ps:0": good, "worker:1": bad}
            found = reach.probe(addresses, within=0.5, timeout=0.5)
            assert found.local_host == "127.0.0.1"
            assert list(found.failures) == ["worker:1"]
            assert "refused" in found.failures["worker:1"]
            with pytest.raises(reach.UnreachableServersError) as err:
                reach.check(addresses, within=0.2)
    text = str(err.value)
    assert f"worker:1 at {bad}" in text and "ps:0" not in text
    assert "1 of 2" in text and "allow TCP" in text


def test_all_reachable_gives_this_machines_address() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        assert reach.check({"worker:0": address}, within=1) == "127.0.0.1"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"num_chief": 1}, "num_chief: a server set has ps and worker servers only"),
        ({"num_evaluator": 1}, "num_evaluator"),
        ({"lease": 0}, "lease must be more than 0 seconds"),
    ],
)
def test_the_api_refuses_what_a_set_cannot_have(
    options: dict[str, Any], message: str
) -> None:
    with pytest.raises(SpecError, match=message):
        tfyarn.servers(num_ps=1, num_worker=1, **options)


def test_the_command_refuses_a_chief_and_a_zero_lease(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as usage:
        main(["servers", "--num_chief", "1"])
    assert usage.value.code == 2
    assert "unrecognized arguments: --num_chief" in capsys.readouterr().err
    assert main(["servers", "--lease", "0"]) == 1
    assert "--lease must be more than 0 seconds" in capsys.readouterr().err


def test_the_command_prints_one_fact_a_line_and_a_detached_set_says_how_to_end_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    asked: dict[str, Any] = {}

    def fake(**kwargs: Any) -> ServerSet:
        asked.update(kwargs)
        return a_set()

    monkeypatch.setattr(servers, "servers", fake)
    monkeypatch.setattr("tfyarn.client.connection.unreachable_rm_notice", lambda: None)
    assert (
        main(
            [
                "servers",
                "--num_ps",
                "1",
                "--num_worker",
                "2",
                "--worker_memory",
                "1g",
                "--detach",
            ]
        )
        == 0
    )
    out, err = capsys.readouterr()
    assert out.splitlines() == a_set().lines()
    assert "tfyarn kill application_1_0001" in err and "no lease" in err
    assert asked["detach"] is True and asked["num_ps"] == "1"  # typed by the config
    assert asked["num_worker"] == "2" and asked["worker_memory"] == "1g"


def test_without_detach_the_command_holds_the_set_until_ctrl_c_then_releases_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    held = a_set(lease=0.3)
    calls: list[str] = []

    def check() -> None:
        calls.append("check")
        if len(calls) == 2:
            raise servers.ServersRestartedError("ps:0 was lost")  # said, held on
        if len(calls) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(held, "check", check)
    monkeypatch.setattr(held, "release", lambda: calls.append("release"))
    monkeypatch.setattr(servers, "servers", lambda **_: held)
    monkeypatch.setattr("tfyarn.client.servers_cli.time.sleep", lambda _: None)
    monkeypatch.setattr("tfyarn.client.connection.unreachable_rm_notice", lambda: None)
    assert main(["servers", "--num_worker", "1", "--lease", "30"]) == 130
    assert calls == ["check", "check", "check", "release"]
    err = capsys.readouterr().err
    assert "Ctrl-C releases them" in err and "ps:0 was lost" in err
    assert "Releasing application_1_0001" in err


class _Reply:
    def __init__(self, restarts: int, why: str = "") -> None:
        self.cluster_restarts, self.last_restart = restarts, why


class _Renewer:
    def __init__(self, replies: list[_Reply]) -> None:
        self.replies = replies
        self.stopped = False

    def renew_once(self) -> _Reply:
        return self.replies.pop(0) if len(self.replies) > 1 else self.replies[0]

    def stop(self) -> None:
        self.stopped = True


def test_leaving_the_block_on_an_error_after_a_lost_ps_names_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    renewer = _Renewer([_Reply(0), _Reply(1, "ps:0 failed: killed by SIGKILL")])
    cluster = a_set(_renewer=renewer)
    killed: list[str] = []
    monkeypatch.setattr("tfyarn.client.jobs.kill", killed.append)
    monkeypatch.setattr(servers.time, "sleep", lambda _: None)
    # The coordinator's error comes from TensorFlow: the master's word is awaited.
    error = type("UnavailableError", (Exception,), {"__module__": "tensorflow.errors"})
    with pytest.raises(servers.ServersRestartedError) as raised, cluster:
        raise error("Socket closed")
    text = str(raised.value)
    assert "ps:0 failed" in text and "restore_or_initialize" in text
    assert isinstance(raised.value.__cause__, error)
    assert renewer.stopped and killed == ["application_1_0001"]


def test_leaving_the_block_releases_the_set_and_a_plain_error_passes_through(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    killed: list[str] = []
    monkeypatch.setattr("tfyarn.client.jobs.kill", killed.append)
    cluster = a_set(_renewer=_Renewer([_Reply(0)]))
    with pytest.raises(ValueError, match="mine"), cluster:
        raise ValueError("mine")
    cluster.release()  # twice: nothing more
    assert killed == ["application_1_0001"]
