"""ResourceManager and NodeManager recovery in the local cluster, and the
``tfyarn cluster kill|restart`` commands, without a JVM: the rendered
configuration, the stores a fresh start empties, the containers ``stop`` ends,
and the refusals of bad input (``tests/integration/test_daemon_restarts.py``
restarts real daemons under real jobs)."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import time
from pathlib import Path

import pytest

from tfyarn.cli import main
from tfyarn.cluster import ClusterSettings, LocalCluster, _netns, _process, _restarts
from tfyarn.cluster._prepare import wipe_recovery_stores
from tfyarn.cluster._render import (
    nm_recovery_dir,
    recovery_stores,
    rm_state_store,
    write_config,
)
from tfyarn.cluster._secure import SecureCluster
from tfyarn.cluster._settings import save_settings
from tfyarn.contract import hadoop_conf
from tfyarn.errors import ClusterError

LEVELDB_STORE = (
    "org.apache.hadoop.yarn.server.resourcemanager.recovery.LeveldbRMStateStore"
)


def yarn_site(conf: Path) -> dict[str, str]:
    return dict(hadoop_conf.read_site(conf / "yarn-site.xml"))


def assert_recovers(yarn: dict[str, str], base: Path, node_dir: Path) -> None:
    assert yarn["yarn.resourcemanager.recovery.enabled"] == "true"
    assert yarn["yarn.resourcemanager.work-preserving-recovery.enabled"] == "true"
    assert yarn["yarn.resourcemanager.store.class"] == LEVELDB_STORE
    assert yarn["yarn.resourcemanager.leveldb-state-store.path"] == str(
        base / "data" / "rm-state"
    )
    assert yarn["yarn.nodemanager.recovery.enabled"] == "true"
    assert yarn["yarn.nodemanager.recovery.supervised"] == "true"
    assert yarn["yarn.nodemanager.recovery.dir"] == str(
        node_dir / "data" / "nm-recovery"
    )
    # A NodeManager on an ephemeral port cannot recover (its id is host:port).
    port = yarn["yarn.nodemanager.address"].rpartition(":")[2]
    assert port.isdigit() and int(port) > 0
    # It outwaits a restarting ResourceManager as long as Hadoop's default.
    assert yarn["yarn.nodemanager.resourcemanager.connect.max-wait.ms"] == "900000"


def test_the_one_node_cluster_recovers_both_daemons(tmp_path: Path) -> None:
    conf = write_config(
        ClusterSettings(port_offset=700), base_dir=tmp_path, lib_dir=tmp_path / "l"
    )
    yarn = yarn_site(conf)
    assert_recovers(yarn, tmp_path, tmp_path)
    assert yarn["yarn.nodemanager.address"] == "127.0.0.1:8741"


def test_each_host_recovers_its_nodemanager_from_its_own_dir(tmp_path: Path) -> None:
    settings = ClusterSettings(nodes=2)
    lay = _netns.layout(tmp_path, 2, ipaddress.IPv4Network("10.231.3.0/24"))
    for host in lay.hosts:
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
        assert_recovers(yarn_site(conf), tmp_path, node_dir)
        assert yarn_site(conf)["yarn.nodemanager.address"] == f"{host.host}:8041"


def test_the_secure_cluster_keeps_recovery_on(tmp_path: Path) -> None:
    settings = ClusterSettings(secure=True, port_offset=500)
    base = tmp_path / "cluster"
    conf = write_config(settings, base_dir=base, lib_dir=tmp_path / "lib")
    SecureCluster(base, settings, user="alice").write_config(conf)
    assert_recovers(yarn_site(conf), base, base)


def test_port_zero_for_the_nodemanager_is_refused() -> None:
    with pytest.raises(ClusterError, match="outside 1-65535"):
        ClusterSettings(ports={"nm": 0})


def test_a_fresh_start_empties_every_recovery_store_and_nothing_else(
    tmp_path: Path,
) -> None:
    stores = [
        rm_state_store(tmp_path),
        tmp_path / "data" / "zookeeper",  # an HA pair's state and locks
        nm_recovery_dir(tmp_path),
        nm_recovery_dir(tmp_path / "nodes" / "node1"),
        nm_recovery_dir(tmp_path / "nodes" / "node7"),  # a bigger earlier start
    ]
    kept = [
        tmp_path / "data" / "namenode",
        tmp_path / "data" / "journal",
        tmp_path / "nodes" / "node1" / "conf",
    ]
    for path in [*stores, *kept]:
        path.mkdir(parents=True)
        (path / "CURRENT").write_text("x")
    assert sorted(recovery_stores(tmp_path)) == sorted(stores)
    wipe_recovery_stores(tmp_path)
    assert not any(p.exists() for p in stores)
    assert all((p / "CURRENT").is_file() for p in kept)


def test_stop_finds_a_container_process_that_left_its_directory(
    tmp_path: Path,
) -> None:
    # A supervised NodeManager leaves its containers on stop. A container is a
    # session (setsid) led by the pid in its pid file; a process of it may
    # have left the container directory.
    work = tmp_path / "data" / "nm-local" / "usercache" / "u" / "c1"
    work.mkdir(parents=True)
    leader = subprocess.Popen(
        # The child's pause makes the race with its `cd /` certain, not rare.
        ["sh", "-c", "(sleep 0.3; cd / && exec sleep 301) & exec sleep 300"],
        cwd=work,
        start_new_session=True,
    )
    try:
        # Wait for the child to have left (its cwd is /): it is in the session
        # as soon as it is forked, before its `cd /` runs.
        deadline = time.monotonic() + 10
        while not (left := _left_the_directory(leader.pid)):
            assert time.monotonic() < deadline, "the container's child never left"
            time.sleep(0.05)
        [child] = left
        # Without the NodeManager's pid file only the directory tells.
        assert _process.strays(tmp_path) == [leader.pid]
        private = tmp_path / "data" / "nm-local" / "nmPrivate" / "app_1" / "c1"
        private.mkdir(parents=True)
        (private / "c1.pid").write_text(f"{leader.pid}\n")
        assert sorted(_process.strays(tmp_path)) == sorted([leader.pid, child])
        assert _process.container_dirs(tmp_path) == [private]
        _process.terminate([leader.pid, child], grace=5)
        assert _process.strays(tmp_path) == []
    finally:
        leader.kill()
        leader.wait()


def _left_the_directory(sid: int) -> list[int]:
    """The processes of session ``sid`` whose working directory is /."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and _process._session(int(entry.name)) == sid:
            try:
                if os.readlink(entry / "cwd") == "/":
                    found.append(int(entry.name))
            except OSError:
                continue  # exited meanwhile
    return found


# -- kill and restart: which daemon, and bad input ---------------------------------


def test_pick_names_the_daemon_on_the_one_node_cluster(tmp_path: Path) -> None:
    settings = ClusterSettings()
    rm = _restarts.pick(tmp_path, settings, None, "resourcemanager", None)
    nm = _restarts.pick(tmp_path, settings, None, "nodemanager", None)
    assert (rm.key, nm.key) == ("resourcemanager", "nodemanager")
    assert _restarts.pick(tmp_path, settings, None, "nodemanager", "local") == nm
    with pytest.raises(ClusterError, match="one NodeManager, on loopback"):
        _restarts.pick(tmp_path, settings, None, "nodemanager", "node1")
    with pytest.raises(ClusterError, match=r"one ResourceManager.*drop 'node1'"):
        _restarts.pick(tmp_path, settings, None, "resourcemanager", "node1")


def test_pick_on_a_multihost_cluster_wants_the_node(tmp_path: Path) -> None:
    settings = ClusterSettings(nodes=3)
    lay = _netns.layout(tmp_path, 3, ipaddress.IPv4Network("10.231.4.0/24"))
    with pytest.raises(ClusterError) as info:
        _restarts.pick(tmp_path, settings, lay, "nodemanager", None)
    assert "node1, node2, node3" in str(info.value)
    inst = _restarts.pick(tmp_path, settings, lay, "nodemanager", "node2")
    assert inst.key == "nodemanager-node2" and inst.host == lay.hosts[1]
    assert _restarts.title(inst) == f"NodeManager on {lay.hosts[1].host}"
    with pytest.raises(ClusterError, match=r"no host 'node9'.*node1, node2, node3"):
        _restarts.pick(tmp_path, settings, lay, "nodemanager", "node9")
    with pytest.raises(ClusterError, match="unknown daemon 'datanode'"):
        _restarts.pick(tmp_path, settings, lay, "datanode", None)
    assert _restarts.pick(tmp_path, settings, lay, "namenode", None).key == "namenode"


@pytest.mark.parametrize("action", ["kill", "restart"])
def test_cli_parses_both_commands(action: str) -> None:
    import argparse

    from tfyarn.cluster.cli import add_commands

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    args = parser.parse_args(["cluster", action, "nodemanager", "node2"])
    assert (args.daemon, args.name) == ("nodemanager", "node2")
    args = parser.parse_args(["cluster", action, "resourcemanager"])
    assert (args.daemon, args.name) == ("resourcemanager", None)
    if action == "restart":
        assert args.timeout == _restarts.RESTART_WAIT_S
        assert parser.parse_args(["cluster", action, "nodemanager"]).timeout == 180


@pytest.mark.parametrize("action", ["kill", "restart"])
@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["datanode"], "unknown daemon 'datanode'"),
        (["resourcemanager"], "is not running; start it with `tfyarn cluster start`"),
        (["nodemanager", "node1"], "is not running"),
    ],
)
def test_cli_refuses_bad_input_with_exit_1_and_no_traceback(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    action: str,
    argv: list[str],
    said: str,
) -> None:
    code = main(["cluster", action, *argv, "--base-dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 1
    assert err.startswith("Error: ") and said in err
    assert "Traceback" not in err


def test_unknown_node_of_a_running_cluster_is_refused_naming_the_nodes(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    lay = _netns.layout(tmp_path, 2, ipaddress.IPv4Network("10.231.6.0/24"))
    save_settings(tmp_path, ClusterSettings(nodes=2))
    _netns.save_layout(tmp_path, lay)
    # One daemon up is a running cluster; none of this test's is real.
    monkeypatch.setattr(
        LocalCluster, "pids", lambda self: {"namenode": 1, "resourcemanager": None}
    )
    argv = ["cluster", "restart", "nodemanager"]
    where = ["--base-dir", str(tmp_path)]
    assert main([*argv, *where]) == 1
    assert "name one" in capsys.readouterr().err
    assert main([*argv, "node5", *where]) == 1
    assert "no host 'node5'" in capsys.readouterr().err
    # A NodeManager cannot register with a ResourceManager that is down.
    assert main([*argv, "node2", *where]) == 1
    assert "restart resourcemanager` first" in capsys.readouterr().err


def test_kill_of_a_daemon_already_down_says_how_to_start_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    save_settings(tmp_path, ClusterSettings())
    monkeypatch.setattr(
        LocalCluster, "pids", lambda self: {"namenode": 1, "resourcemanager": None}
    )
    argv = ["cluster", "kill", "resourcemanager", "--base-dir", str(tmp_path)]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "ResourceManager" in err and "not running" in err
    assert "`tfyarn cluster restart resourcemanager`" in err


def test_outcome_says_what_was_done_and_how_long_it_took() -> None:
    done = _restarts.Outcome("ResourceManager", 41, 42, 12.34)
    assert done.summary("restart") == (
        "Restarted the ResourceManager: killed pid 41 (SIGKILL), started pid 42; "
        "it is back and its NodeManagers re-registered (12.3 s)."
    )
    nm = _restarts.Outcome("NodeManager", None, 7, 3.0)
    assert "it was not running" in nm.summary("restart")
    assert "lists it RUNNING" in nm.summary("restart")
    killed = _restarts.Outcome("NodeManager on node2.x", 9, None, 0.3).summary("kill")
    assert killed.startswith("Killed the NodeManager on node2.x (pid 9, SIGKILL)")
    assert killed.endswith("(0.3 s).")


def test_a_client_is_pointed_at_a_cluster_with_a_daemon_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the ResourceManager killed, `tfyarn status` must reach the cluster's
    # configuration to say the ResourceManager is unreachable.
    from tfyarn.cluster import use_local_cluster

    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    env = {"HADOOP_CONF_DIR": str(tmp_path / "conf")}
    monkeypatch.setattr(LocalCluster, "env_vars", lambda self: env)
    pids: dict[str, int | None] = {"namenode": None, "resourcemanager": None}
    monkeypatch.setattr(LocalCluster, "pids", lambda self: pids)
    assert use_local_cluster(tmp_path) is None  # stopped: nothing to point at
    pids["namenode"] = 1
    assert use_local_cluster(tmp_path) == env
    assert os.environ["HADOOP_CONF_DIR"] == str(tmp_path / "conf")
