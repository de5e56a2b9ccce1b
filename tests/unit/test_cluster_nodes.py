"""Multi-host local cluster, the pure parts: names, addresses, /etc/hosts block,
per-host configuration, daemon instances, the CLI. No root, no ``ip`` needed."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from tfyarn.cluster import ClusterSettings, LocalCluster, _netns
from tfyarn.cluster._render import write_config
from tfyarn.cluster.local import instances
from tfyarn.contract import hadoop_conf
from tfyarn.errors import ClusterError


def properties(path: Path) -> dict[str, str]:
    """What Hadoop reads from one rendered configuration file."""
    return dict(hadoop_conf.read_site(path))


def test_names_fit_linux_limits_and_differ_between_clusters() -> None:
    net = ipaddress.IPv4Network("10.231.5.0/24")
    a = _netns.layout(Path("/var/a"), 3, net)
    b = _netns.layout(Path("/var/b"), 3, net)
    assert a.cluster_id != b.cluster_id
    for lay in (a, b):
        links = [lay.bridge, *(h.link for h in lay.hosts), *(h.peer for h in lay.hosts)]
        assert all(len(name) <= 15 for name in links)  # IFNAMSIZ - 1
    assert not {h.netns for h in a.hosts} & {h.netns for h in b.hosts}
    assert not {h.host for h in a.hosts} & {h.host for h in b.hosts}
    assert len(_netns.layout(Path("/x"), 200, net).hosts[-1].link) <= 15


def test_addresses_master_first_then_one_per_host() -> None:
    lay = _netns.layout(Path("/var/a"), 3, ipaddress.IPv4Network("10.231.7.0/24"))
    assert lay.master_address == "10.231.7.1"
    assert [h.address for h in lay.hosts] == ["10.231.7.2", "10.231.7.3", "10.231.7.4"]
    assert [h.name for h in lay.hosts] == ["node1", "node2", "node3"]
    assert lay.host("node2") is lay.hosts[1]
    assert lay.host(lay.hosts[2].host) is lay.hosts[2]
    with pytest.raises(ClusterError, match="node1, node2, node3"):
        lay.host("node9")
    assert _netns.Layout.from_dict(lay.to_dict()) == lay


def test_subnet_comes_from_the_pool_and_skips_networks_in_use() -> None:
    cid = _netns.cluster_id(Path("/var/a"))
    first = _netns.pick_subnet(cid, [])
    assert first.subnet_of(_netns.POOL) and first.prefixlen == 24
    # A /16 route on the machine covering our pick: the next free /24 is taken.
    second = _netns.pick_subnet(cid, [first, ipaddress.IPv4Network("192.0.2.0/24")])
    assert second != first and second.subnet_of(_netns.POOL)
    with pytest.raises(ClusterError, match="in use"):
        _netns.pick_subnet(cid, [_netns.POOL])


@pytest.mark.parametrize("nodes", [0, 201])
def test_layout_refuses_impossible_sizes(nodes: int) -> None:
    with pytest.raises(ClusterError, match="nodes must be"):
        _netns.layout(Path("/a"), nodes, ipaddress.IPv4Network("10.231.0.0/24"))


def test_hosts_block_added_replaced_and_removed_leaving_the_rest(
    tmp_path: Path,
) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n10.0.0.9 other # keep")
    net = ipaddress.IPv4Network("10.231.9.0/24")
    a = _netns.layout(Path("/var/a"), 2, net)
    b = _netns.layout(Path("/var/b"), 1, ipaddress.IPv4Network("10.231.10.0/24"))
    _netns.add_hosts(Path("/var/a"), a, hosts)
    _netns.add_hosts(Path("/var/a"), a, hosts)  # again: still one block
    _netns.add_hosts(Path("/var/b"), b, hosts)
    text = hosts.read_text()
    assert text.count("BEGIN tfyarn local cluster /var/a") == 1
    assert f"10.231.9.2\t{a.hosts[0].host}" in text
    assert f"10.231.9.1\t{a.master_host}" in text
    assert _netns.remove_hosts(Path("/var/a"), hosts)
    text = hosts.read_text()
    assert "/var/a" not in text and b.hosts[0].host in text
    assert text.startswith("127.0.0.1 localhost\n10.0.0.9 other # keep\n")
    assert _netns.remove_hosts(Path("/var/b"), hosts)
    assert not _netns.remove_hosts(Path("/var/b"), hosts)
    assert hosts.read_text() == "127.0.0.1 localhost\n10.0.0.9 other # keep\n"


def test_without_root_start_names_the_cause_before_making_anything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("os.geteuid", lambda: 1000)
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(ClusterError) as info:
        _netns.check_can_make_hosts()
    message = str(info.value)
    assert "root" in message and "iproute2" in message and "omit --nodes" in message


def test_single_node_config_stays_on_loopback(tmp_path: Path) -> None:
    conf = write_config(ClusterSettings(), base_dir=tmp_path, lib_dir=tmp_path / "lib")
    yarn = properties(conf / "yarn-site.xml")
    hdfs = properties(conf / "hdfs-site.xml")
    assert yarn["yarn.resourcemanager.address"] == "127.0.0.1:8032"
    assert yarn["yarn.nodemanager.address"] == "127.0.0.1:8041"
    assert yarn["yarn.nodemanager.local-dirs"] == f"{tmp_path}/data/nm-local"
    assert yarn["yarn.nm.liveness-monitor.expiry-interval-ms"] == "600000"
    assert hdfs["dfs.datanode.address"] == "127.0.0.1:9866"
    assert hdfs["dfs.datanode.data.dir"] == f"{tmp_path}/data/datanode"
    assert properties(conf / "core-site.xml")["fs.defaultFS"] == "hdfs://127.0.0.1:8020"


def test_host_config_names_the_host_and_the_master_on_the_bridge(
    tmp_path: Path,
) -> None:
    settings = ClusterSettings(nodes=2, port_offset=300)
    lay = _netns.layout(tmp_path, 2, ipaddress.IPv4Network("10.231.3.0/24"))
    host = lay.hosts[1]
    node_dir = tmp_path / "nodes" / host.name
    conf = write_config(
        settings,
        base_dir=tmp_path,
        lib_dir=tmp_path / "lib",
        conf=node_dir / "conf",
        master_address=lay.master_address,
        node_host=host.host,
        node_address=host.address,
        node_dir=node_dir,
    )
    yarn = properties(conf / "yarn-site.xml")
    hdfs = properties(conf / "hdfs-site.xml")
    assert yarn["yarn.resourcemanager.resource-tracker.address"] == "10.231.3.1:8331"
    assert yarn["yarn.nodemanager.hostname"] == host.host
    assert yarn["yarn.nodemanager.address"] == f"{host.host}:8341"
    assert yarn["yarn.nodemanager.local-dirs"] == f"{node_dir}/data/nm-local"
    assert yarn["yarn.nodemanager.log-dirs"] == f"{node_dir}/logs/containers"
    assert yarn["yarn.nm.liveness-monitor.expiry-interval-ms"] == "20000"
    assert hdfs["dfs.namenode.rpc-address"] == "10.231.3.1:8320"
    assert hdfs["dfs.datanode.address"] == f"{host.address}:10166"
    assert hdfs["dfs.datanode.hostname"] == host.host
    assert hdfs["dfs.datanode.data.dir"] == f"{node_dir}/data/datanode"
    core = properties(conf / "core-site.xml")
    assert core["fs.defaultFS"] == "hdfs://10.231.3.1:8320"
    assert "127.0.0.1" not in "".join(
        (conf / n).read_text() for n in ("yarn-site.xml", "hdfs-site.xml")
    )


def test_instances_one_master_pair_then_two_daemons_per_host() -> None:
    assert [i.key for i in instances(ClusterSettings(), None)] == [
        "namenode",
        "datanode",
        "resourcemanager",
        "nodemanager",
    ]
    lay = _netns.layout(Path("/a"), 2, ipaddress.IPv4Network("10.231.1.0/24"))
    keys = [i.key for i in instances(ClusterSettings(nodes=2), lay)]
    assert keys == [
        "namenode",
        "resourcemanager",
        "datanode-node1",
        "nodemanager-node1",
        "datanode-node2",
        "nodemanager-node2",
    ]


def test_nodes_setting_is_checked_and_described() -> None:
    with pytest.raises(ClusterError, match="nodes must be 0"):
        ClusterSettings(nodes=-1)
    assert ClusterSettings().multihost is False
    assert ClusterSettings(nodes=3).multihost is True
    assert ClusterSettings.from_dict(ClusterSettings(nodes=3).to_dict()).nodes == 3


def test_node_commands_on_a_loopback_cluster_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="--nodes N"):
        LocalCluster(tmp_path).node_stop("node1")


def test_status_of_a_stopped_cluster_lists_the_loopback_node(tmp_path: Path) -> None:
    from tfyarn.cluster.cli import _status_dict

    data = _status_dict(LocalCluster(tmp_path).status())
    assert data["state"] == "stopped"
    assert [(n["name"], n["host"], n["address"]) for n in data["nodes"]] == [
        ("local", "127.0.0.1", "127.0.0.1")
    ]


def test_cli_parses_nodes_and_node_actions() -> None:
    import argparse

    from tfyarn.cluster.cli import add_commands

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    args = parser.parse_args(["cluster", "start", "--nodes", "3"])
    assert args.nodes == 3
    args = parser.parse_args(["cluster", "node", "partition", "node2"])
    assert (args.action, args.name) == ("partition", "node2")
    with pytest.raises(SystemExit):
        parser.parse_args(["cluster", "node", "explode", "node2"])
