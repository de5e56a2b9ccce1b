"""The local cluster's HA mode without a JVM: the rendered configuration
read back as a client reads it, the daemons and their order, which member a
command acts on, the failover's refusals, and the probes
(``tests/integration/ha/`` fails real daemons over under real jobs)."""

from __future__ import annotations

import http.server
import ipaddress
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _http_server import serving

from tfyarn.cli import main
from tfyarn.cluster import ClusterSettings, _failover, _ha, _netns, _probe, _restarts
from tfyarn.cluster._render import write_config
from tfyarn.cluster._settings import save_settings
from tfyarn.cluster._status import instances
from tfyarn.contract import hadoop_conf
from tfyarn.contract.hadoop_conf import HadoopConf
from tfyarn.errors import ClusterError

HA = ClusterSettings(ha=True, port_offset=900)


def site(conf: Path, name: str) -> dict[str, str]:
    return dict(hadoop_conf.read_site(conf / name))


def test_clients_read_the_name_service_and_both_resourcemanagers(
    tmp_path: Path,
) -> None:
    conf = write_config(HA, base_dir=tmp_path, lib_dir=tmp_path / "lib")
    read = HadoopConf(conf)
    assert read.default_fs == "hdfs://tfyarn"
    nodes = read.name_services["tfyarn"]
    assert [(n.id, n.address) for n in nodes] == [
        ("nn1", "127.0.0.1:8920"),
        ("nn2", "127.0.0.1:8921"),
    ]
    assert read.rm_addresses == ["127.0.0.1:8932", "127.0.0.1:9032"]
    hdfs = site(conf, "hdfs-site.xml")
    # No address of a single NameNode a client could pick instead.
    assert "dfs.namenode.rpc-address" not in hdfs
    assert hdfs["dfs.namenode.shared.edits.dir"] == "qjournal://127.0.0.1:9385/tfyarn"
    assert hdfs["dfs.ha.automatic-failover.enabled"] == "true"
    assert hdfs["dfs.ha.fencing.methods"] == "shell(/bin/true)"
    assert hdfs["dfs.namenode.name.dir.tfyarn.nn2"] == str(
        tmp_path / "data" / "namenode2"
    )
    assert hdfs["dfs.ha.zkfc.port.tfyarn.nn2"] == "8929"
    assert site(conf, "core-site.xml")["ha.zookeeper.quorum"] == "127.0.0.1:3081"
    yarn = site(conf, "yarn-site.xml")
    assert yarn["yarn.resourcemanager.ha.enabled"] == "true"
    assert yarn["yarn.resourcemanager.webapp.address.rm2"] == "127.0.0.1:9088"
    assert yarn["yarn.resourcemanager.store.class"].endswith(".ZKRMStateStore")
    assert yarn["hadoop.zk.address"] == "127.0.0.1:3081"
    assert yarn["yarn.resourcemanager.recovery.enabled"] == "true"
    zoo = (conf / "zoo.cfg").read_text()
    assert "clientPort=3081" in zoo and "admin.enableServer=false" in zoo
    assert f"dataDir={tmp_path / 'data' / 'zookeeper'}" in zoo


def test_a_plain_cluster_keeps_one_namenode_and_no_ha_keys(tmp_path: Path) -> None:
    conf = write_config(ClusterSettings(), base_dir=tmp_path, lib_dir=tmp_path / "l")
    read = HadoopConf(conf)
    assert read.default_fs == "hdfs://127.0.0.1:8020"
    assert read.name_services == {}
    assert read.rm_addresses == ["127.0.0.1:8032"]
    assert "ha.zookeeper.quorum" not in site(conf, "core-site.xml")
    assert not (conf / "zoo.cfg").exists()


def test_an_ha_multihost_cluster_puts_both_pairs_on_the_master(
    tmp_path: Path,
) -> None:
    settings = ClusterSettings(ha=True, nodes=2)
    lay = _netns.layout(tmp_path, 2, ipaddress.IPv4Network("10.231.4.0/24"))
    conf = write_config(
        settings,
        base_dir=tmp_path,
        lib_dir=tmp_path / "lib",
        conf=tmp_path / "nodes" / "node1" / "conf",
        master_address=lay.master_address,
        node_host=lay.hosts[0].host,
        node_address=lay.hosts[0].address,
    )
    nodes = HadoopConf(conf).name_services["tfyarn"]
    assert {n.address.split(":")[0] for n in nodes} == {lay.master_address}
    keys = [i.key for i in instances(settings, lay)]
    assert keys[:8] == [
        "zookeeper",
        "journalnode",
        "namenode",
        "namenode2",
        "zkfc",
        "zkfc2",
        "resourcemanager",
        "resourcemanager2",
    ]
    assert keys[8:] == [
        "datanode-node1",
        "nodemanager-node1",
        "datanode-node2",
        "nodemanager-node2",
    ]


def test_coordinators_start_first_and_members_know_their_id() -> None:
    found = instances(HA, None)
    assert [i.key for i in found][:2] == list(_ha.COORDINATORS)
    by_key = {i.key: i.daemon for i in found}
    assert by_key["namenode2"].args == ("-D", "dfs.ha.namenode.id=nn2")
    assert by_key["zkfc"].args == ("-D", "dfs.ha.namenode.id=nn1")
    assert by_key["resourcemanager2"].args == ("-D", "yarn.resourcemanager.ha.id=rm2")
    assert _ha.daemon_args(by_key["zookeeper"], Path("/c")) == ["/c/zoo.cfg"]
    assert by_key["namenode2"].ports == ["namenode2_rpc", "namenode2_http"]


def test_ha_refuses_what_it_does_not_support_yet() -> None:
    # With --secure it runs (tests/unit/test_cluster_secure_ha.py).
    with pytest.raises(ClusterError, match="--ha runs on the DefaultContainerExec"):
        ClusterSettings(ha=True, container_executor="/opt/ce")


def _states(monkeypatch: pytest.MonkeyPatch, active_ports: set[int]) -> None:
    monkeypatch.setattr(_probe, "is_active", lambda port, *a, **k: port in active_ports)


def test_a_pair_member_is_named_or_the_active_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ports = HA.resolved_ports()
    _states(monkeypatch, {ports["namenode2_http"], ports["rm_web"]})
    pick = _restarts.pick
    assert pick(tmp_path, HA, None, "namenode", None).key == "namenode2"
    assert pick(tmp_path, HA, None, "namenode", "nn1").key == "namenode"
    assert pick(tmp_path, HA, None, "resourcemanager", None).key == "resourcemanager"
    assert pick(tmp_path, HA, None, "resourcemanager", "rm2").key == "resourcemanager2"
    with pytest.raises(ClusterError, match=r"unknown NameNode 'nn3'.*nn1 and nn2"):
        pick(tmp_path, HA, None, "namenode", "nn3")
    _states(monkeypatch, set())
    with pytest.raises(ClusterError, match=r"no ResourceManager .* is active"):
        pick(tmp_path, HA, None, "resourcemanager", None)
    plain = ClusterSettings()
    assert pick(tmp_path, plain, None, "namenode", None).key == "namenode"
    with pytest.raises(ClusterError, match=r"one NameNode.*drop 'nn2'.*--ha"):
        pick(tmp_path, plain, None, "namenode", "nn2")


def test_failover_is_refused_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    up = dict.fromkeys(["namenode", "namenode2", "resourcemanager"], 1)
    with pytest.raises(ClusterError, match=r"one NameNode.*--ha"):
        _failover.check(tmp_path, ClusterSettings(), "namenode", up, "127.0.0.1")
    with pytest.raises(ClusterError, match="unknown pair 'datanode'"):
        _failover.check(tmp_path, HA, "datanode", up, "127.0.0.1")
    with pytest.raises(ClusterError, match=r"rm2 .* is not running.*restart"):
        _failover.check(tmp_path, HA, "resourcemanager", up, "127.0.0.1")
    _states(monkeypatch, set())
    with pytest.raises(ClusterError, match=r"nn1 standby, nn2 standby.*exactly one"):
        _failover.check(tmp_path, HA, "namenode", up, "127.0.0.1")
    _states(monkeypatch, {HA.resolved_ports()["namenode_http"]})
    pair = _failover.check(tmp_path, HA, "namenode", up, "127.0.0.1")
    assert (pair.active.id, pair.other.id) == ("nn1", "nn2")


def test_failover_on_a_plain_cluster_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    save_settings(tmp_path, ClusterSettings())
    code = main(["cluster", "failover", "namenode", "--base-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "has one NameNode: nothing to fail over to" in err, err


def test_a_restarted_namenode_waits_for_its_controller(tmp_path: Path) -> None:
    namenode2 = next(i for i in instances(HA, None) if i.key == "namenode2")
    log = tmp_path / "logs" / "zkfc2.log"
    log.parent.mkdir()
    line = "{} INFO org.apache.hadoop.ha.ZKFailoverController: Local service NameNode at localhost/127.0.0.1:8921 entered state: {}\n"
    log.write_text(
        line.format("2026-11-26 09:44:01,100", "SERVICE_HEALTHY")
        + line.format("2026-11-26 09:44:04,322", "SERVICE_NOT_RESPONDING")
    )
    since = time.mktime(time.strptime("2026-11-26 09:44:03", "%Y-%m-%d %H:%M:%S"))
    missing = _ha.controller_missing(tmp_path, namenode2, since)
    assert missing and "SERVICE_NOT_RESPONDING" in missing
    with log.open("a") as out:
        out.write(line.format("2026-11-26 09:44:06,492", "SERVICE_HEALTHY"))
    assert _ha.controller_missing(tmp_path, namenode2, since) is None
    # A healthy line from before the restart does not count.
    log.write_text(line.format("2026-11-26 09:44:01,100", "SERVICE_HEALTHY"))
    assert _ha.controller_missing(tmp_path, namenode2, since)


@pytest.fixture
def is_active_server() -> Iterator[tuple[int, list[int]]]:
    """A web server answering /isActive with the status in ``codes[0]``."""
    codes = [200]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(codes[0] if self.path == "/isActive" else 404)
            self.end_headers()
            self.wfile.write(b"I am Active!" if codes[0] == 200 else b"no")

        def log_message(self, *args: object) -> None:
            pass

    with serving(Handler) as port:
        yield port, codes


def test_is_active_reads_hadoops_answer(
    is_active_server: tuple[int, list[int]],
) -> None:
    port, codes = is_active_server
    assert _probe.is_active(port) is True
    codes[0] = 405
    assert _probe.is_active(port) is False
    codes[0] = 500
    assert _probe.is_active(port) is None
    with _closed_port() as closed:
        assert _probe.is_active(closed, timeout=1) is None


@pytest.fixture
def hadoop_3_1_server() -> Iterator[tuple[int, dict[str, Any]]]:
    """A Hadoop 3.1 daemon's web server: no /isActive (404), its HA state in
    the NameNode's JMX or the ResourceManager's cluster info (``answers``)."""
    answers: dict[str, Any] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            body = answers.get(path)
            self.send_response(404 if body is None else 200)
            self.end_headers()
            if body is not None:
                self.wfile.write(json.dumps(body).encode())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], answers
    finally:
        server.shutdown()


def test_is_active_without_the_servlet_asks_jmx_or_cluster_info(
    hadoop_3_1_server: tuple[int, dict[str, Any]],
) -> None:
    port, answers = hadoop_3_1_server
    assert _probe.is_active(port) is None  # nothing says anything
    bean = {"name": "Hadoop:service=NameNode,name=NameNodeStatus", "State": "standby"}
    answers["/jmx"] = {"beans": [bean]}
    assert _probe.is_active(port) is False
    bean["State"] = "active"
    assert _probe.is_active(port) is True
    # A ResourceManager: its JMX has no NameNode bean.
    answers["/jmx"] = {"beans": []}
    answers["/ws/v1/cluster/info"] = {"clusterInfo": {"haState": "STANDBY"}}
    assert _probe.is_active(port) is False
    answers["/ws/v1/cluster/info"] = {"clusterInfo": {"haState": "ACTIVE"}}
    assert _probe.is_active(port) is True


def _closed_port() -> _ClosedPort:
    return _ClosedPort()


class _ClosedPort:
    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))  # bound, never listening
        return int(self.sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def test_outcomes_say_what_happened() -> None:
    done = _failover.Outcome("ResourceManager", "rm1", "rm2", 4242, 8.04)
    assert done.summary() == (
        "Failed the ResourceManagers over: rm2 is active; rm1 was stopped and runs "
        "again as the standby (pid 4242) (8.0 s)."
    )
    graceful = _failover.Outcome("NameNode", "nn2", "nn1", None, 0.94)
    assert graceful.summary() == (
        "Failed the NameNodes over: nn1 is active; nn2 is the standby (0.9 s)."
    )
    restart = _restarts.Outcome("NameNode nn1", 10, 11, 2.25)
    assert restart.summary("restart").endswith(
        "it is back and HDFS is served by an active NameNode (2.2 s)."
    )


def test_failover_before_any_start_says_to_start_an_ha_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["cluster", "failover", "namenode", "--base-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert "no local cluster has been set up" in err and "--ha" in err, err
    assert "has one NameNode" not in err
