"""Jobs and failures on the multi-host local cluster (see conftest.py).

Everything here shares the one package-scoped two-host cluster; jobs are small
(50-step examples) and sized (four 1 GiB tasks, 3 GiB hosts) so they spread.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import subprocess
import time
from pathlib import Path

import pytest
from helpers import EXAMPLES, run_cli

from tfyarn.cluster import ClusterSettings, LocalCluster, _netns, default_base_dir

from .conftest import DATA, PYTHON

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs]

# "worker:1 RUNNING (node1.tfy-d20b45.test:57559, container_...)" from submit.
TASK_LINE = re.compile(r"^\S+ (\w+:\d+) RUNNING \(([^:\s]+):(\d+), container_")


def _hosts_of_tasks(output: str) -> dict[str, str]:
    found = {}
    for line in output.splitlines():
        match = TASK_LINE.match(line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def _check_spread(cluster: LocalCluster, output: str, tasks: set[str]) -> None:
    layout = cluster.layout()
    assert layout is not None
    by_host = {h.host: h.address for h in layout.hosts}
    hosts = _hosts_of_tasks(output)
    assert set(hosts) == tasks, output[-3000:]
    for task, host in hosts.items():
        # Each task's ClusterSpec entry is its own host, which every namespace
        # and the root one resolve to that host's address.
        assert host in by_host, f"{task} on {host}, not a host of {by_host}"
        assert socket.gethostbyname(host) == by_host[host]
    assert len(set(hosts.values())) >= 2, f"tasks did not spread: {hosts}"


@pytest.fixture(scope="module")
def example_data(local_cluster: LocalCluster) -> str:
    done = run_cli("data", "count", f"{DATA}/train-*", timeout=120)
    if done.returncode != 0:
        made = run_cli("data", "make-example", DATA, timeout=300)
        assert made.returncode == 0, made.stderr[-3000:]
    return DATA


def test_status_lists_every_host(local_cluster: LocalCluster) -> None:
    done = run_cli(
        "cluster", "status", "--json", "--base-dir", str(local_cluster.base_dir)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    nodes = json.loads(done.stdout)["nodes"]
    assert [n["name"] for n in nodes] == ["node1", "node2", "node3"]
    for n in nodes:
        assert n["state"] == "RUNNING"
        assert n["netns"] in _netns.existing_netns()
        assert socket.gethostbyname(n["host"]) == n["address"]
        assert n["memory_mb"] == 3072
    listed = subprocess.run(
        ["yarn", "node", "-list"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    for n in nodes:
        assert n["host"] in listed.stdout, listed.stdout + listed.stderr


def test_containers_do_not_see_the_client_venv(local_cluster: LocalCluster) -> None:
    nm = local_cluster.pids()["nodemanager-node1"]
    environ = Path(f"/proc/{nm}/environ").read_bytes().split(b"\0")
    path = next(e[5:].decode() for e in environ if e.startswith(b"PATH="))
    assert str(Path(PYTHON).parent) not in path.split(":")


@pytest.mark.slow
def test_ps_job_spreads_over_hosts(
    local_cluster: LocalCluster, example_data: str
) -> None:
    done = run_cli(
        "submit",
        "--python",
        PYTHON,
        "--num_chief",
        "1",
        "--num_ps",
        "1",
        "--num_worker",
        "2",
        "--chief_memory",
        "1 GiB",
        "--ps_memory",
        "1 GiB",
        "--worker_memory",
        "1 GiB",
        str(EXAMPLES / "ps_coordinator.py"),
        "--data",
        example_data,
        "--steps",
        "50",
        "--checkpoint_dir",
        f"hdfs:///tmp/tfyarn/multihost/ps-{time.time_ns()}",
        timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "final status: SUCCEEDED" in out
    _check_spread(local_cluster, out, {"chief:0", "ps:0", "worker:0", "worker:1"})


@pytest.mark.slow
def test_allreduce_job_spreads_over_hosts(
    local_cluster: LocalCluster, example_data: str
) -> None:
    done = run_cli(
        "submit",
        "--python",
        PYTHON,
        "--num_worker",
        "2",
        "--worker_memory",
        "2 GiB",
        str(EXAMPLES / "mwms_keras.py"),
        "--data",
        example_data,
        "--steps",
        "50",
        "--checkpoint_dir",
        f"hdfs:///tmp/tfyarn/multihost/mwms-{time.time_ns()}",
        timeout=600,
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-4000:]
    assert "final status: SUCCEEDED" in out
    _check_spread(local_cluster, out, {"worker:0", "worker:1"})


def _rm_state(cluster: LocalCluster, name: str) -> str:
    host = next(h for h in cluster.status().hosts if h.name == name)
    return host.state


def _wait_state(cluster: LocalCluster, name: str, state: str, timeout: float) -> float:
    began = time.monotonic()
    while _rm_state(cluster, name) != state:
        assert time.monotonic() - began < timeout, (
            f"{name} not {state} after {timeout} s: {_rm_state(cluster, name)}"
        )
        time.sleep(1)
    return time.monotonic() - began


def _reachable(address: str, port: int) -> bool:
    try:
        with socket.create_connection((address, port), timeout=2):
            return True
    except OSError:
        return False


def test_partition_and_heal(local_cluster: LocalCluster) -> None:
    host = local_cluster.layout().host("node2")  # type: ignore[union-attr]
    nm_web = local_cluster.settings().resolved_ports()["nm_web"]
    nm_pid = local_cluster.pids()["nodemanager-node2"]
    assert _reachable(host.address, nm_web)
    done = run_cli(
        "cluster",
        "node",
        "partition",
        "node2",
        "--base-dir",
        str(local_cluster.base_dir),
    )
    assert done.returncode == 0, done.stderr
    try:
        assert not _reachable(host.address, nm_web)
        status = json.loads(
            run_cli(
                "cluster", "status", "--json", "--base-dir", str(local_cluster.base_dir)
            ).stdout
        )
        node2 = next(n for n in status["nodes"] if n["name"] == "node2")
        assert node2["partitioned"] is True
        assert node2["nodemanager_pid"] == nm_pid  # processes keep running
        _wait_state(local_cluster, "node2", "LOST", 60)
    finally:
        healed = run_cli(
            "cluster",
            "node",
            "heal",
            "node2",
            "--base-dir",
            str(local_cluster.base_dir),
        )
    assert healed.returncode == 0, healed.stderr
    assert _reachable(host.address, nm_web)
    assert local_cluster.pids()["nodemanager-node2"] == nm_pid
    # The NodeManager that kept running re-registers once it is heard again.
    _wait_state(local_cluster, "node2", "RUNNING", 60)


def test_node_stop_and_start(local_cluster: LocalCluster) -> None:
    base = str(local_cluster.base_dir)
    done = run_cli("cluster", "node", "stop", "node1", "--base-dir", base)
    assert done.returncode == 0, done.stderr
    assert local_cluster.pids()["nodemanager-node1"] is None
    assert local_cluster.pids()["datanode-node1"] is None
    assert _netns.netns_pids(local_cluster.layout().host("node1").netns) == []  # type: ignore[union-attr]
    _wait_state(local_cluster, "node1", "LOST", 60)
    listed = subprocess.run(
        ["yarn", "node", "-list", "-all"],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert re.search(r"node1\.\S+\s+LOST", listed.stdout), listed.stdout
    done = run_cli("cluster", "node", "start", "node1", "--base-dir", base, timeout=200)
    assert done.returncode == 0, done.stderr
    assert _rm_state(local_cluster, "node1") == "RUNNING"


def test_second_cluster_beside_and_cleanup(
    local_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second multi-host cluster (and the default single-node one, if it
    runs) beside this one: no shared name, subnet or port; its stop leaves no
    namespace, link or /etc/hosts line behind."""
    other = LocalCluster(Path("/var/tmp/tfyarn-tests/multihost-b"))
    began = time.monotonic()
    other.start(ClusterSettings(nodes=1, memory_mb=1024, vcores=2, port_offset=500))
    try:
        started_in = time.monotonic() - began
        a, b = local_cluster.layout(), other.layout()
        assert a is not None and b is not None
        assert a.bridge != b.bridge and a.cluster_id != b.cluster_id
        assert not ipaddress.ip_network(a.subnet).overlaps(
            ipaddress.ip_network(b.subnet)
        )
        assert not {h.netns for h in a.hosts} & {h.netns for h in b.hosts}
        assert other.status().hosts[0].state == "RUNNING"
        assert local_cluster.is_running()
        # The default cluster (others' one, when it runs): this session points
        # TFYARN_CLUSTER_HOME at the multi-host cluster, so look past it.
        monkeypatch.delenv("TFYARN_CLUSTER_HOME")
        default = LocalCluster(default_base_dir())
        if default.is_running():
            assert default.settings().nodes == 0
            assert default.master_address() == "127.0.0.1"
        print(f"second cluster started in {started_in:.1f} s")
    finally:
        other.stop()
    assert not {h.netns for h in b.hosts} & _netns.existing_netns()
    assert not any(
        _netns.link_exists(x) for x in [b.bridge, *(h.link for h in b.hosts)]
    )
    assert str(other.base_dir) not in _netns.HOSTS_FILE.read_text()
    assert other.layout() is None
    assert local_cluster.is_running()


def test_half_failed_start_removes_what_it_made(
    local_cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tfyarn.cluster import _process
    from tfyarn.errors import ClusterError

    other = LocalCluster(Path("/var/tmp/tfyarn-tests/multihost-c"))
    cid = _netns.cluster_id(other.base_dir)

    def taken(*args: object, **kwargs: object) -> None:
        # After the hosts are made (the master's ports are checked on the bridge).
        assert any(ns.startswith(f"tfy-{cid}-") for ns in _netns.existing_netns())
        raise ClusterError("port taken (made up by the test)")

    monkeypatch.setattr(_process, "check_ports_free", taken)
    with pytest.raises(ClusterError, match="made up by the test"):
        other.start(ClusterSettings(nodes=2, memory_mb=1024, port_offset=600))
    assert not [ns for ns in _netns.existing_netns() if cid in ns]
    assert not list(Path("/sys/class/net").glob(f"tfy{cid}*"))
    assert str(other.base_dir) not in _netns.HOSTS_FILE.read_text()
    assert other.layout() is None
