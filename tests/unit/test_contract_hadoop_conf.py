"""The one reader of the Hadoop configuration: which directory, and what it says."""

from __future__ import annotations

import doctest
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfyarn.contract import hadoop_conf, local_cluster
from tfyarn.contract.hadoop_conf import HadoopConf, HadoopConfError, NameNode
from tfyarn.errors import ClusterError

REALM = "EXAMPLE.TEST"


def site(path: Path, *props: tuple[str, str] | tuple[str, str, bool]) -> Path:
    """A site file with ``(name, value[, final])`` properties, in order."""
    body = "".join(
        f"<property><name>{p[0]}</name><value>{p[1]}</value>"
        + ("<final>true</final>" if len(p) > 2 and p[2] else "")
        + "</property>"
        for p in props
    )
    path.write_text(f'<?xml version="1.0"?>\n<configuration>{body}</configuration>')
    return path


@pytest.fixture
def conf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A secure HA cluster's client configuration, named by HADOOP_CONF_DIR."""
    directory = tmp_path / "conf"
    directory.mkdir()
    site(
        directory / "core-site.xml",
        ("fs.defaultFS", "hdfs://ns1"),
        ("hadoop.security.authentication", "Kerberos"),
    )
    site(
        directory / "hdfs-site.xml",
        ("dfs.nameservices", "ns1, archive"),
        ("dfs.ha.namenodes.ns1", "nn1,nn2"),
        ("dfs.namenode.rpc-address.ns1.nn1", "nn1.example:8020"),
        ("dfs.namenode.rpc-address.ns1.nn2", "nn2.example:8020"),
        ("dfs.namenode.rpc-address.archive", "old.example:9000"),
        ("dfs.namenode.kerberos.principal", "nn/_HOST@OTHER.TEST"),
    )
    site(
        directory / "yarn-site.xml",
        ("yarn.resourcemanager.ha.enabled", "true"),
        ("yarn.resourcemanager.ha.rm-ids", "rm1, rm2"),
        ("yarn.resourcemanager.address.rm1", "rm1.example:8032"),
        ("yarn.resourcemanager.hostname.rm2", "rm2.example"),
        ("yarn.resourcemanager.principal", f"rm/_HOST@{REALM}"),
    )
    monkeypatch.setenv("HADOOP_CONF_DIR", str(directory))
    return directory


def test_the_docstring_examples_hold() -> None:
    result = doctest.testmod(hadoop_conf)
    assert result.attempted >= 5 and result.failed == 0


def test_hadoop_conf_dir_is_the_configuration(conf: Path) -> None:
    assert hadoop_conf.conf_dir() == conf
    assert hadoop_conf.require_conf_dir() == conf
    assert hadoop_conf.current() == HadoopConf(conf)


def test_the_default_filesystem(conf: Path) -> None:
    assert HadoopConf(conf).default_fs == "hdfs://ns1"
    site(conf / "core-site.xml")
    assert HadoopConf(conf).default_fs is None


def test_a_name_service_with_two_namenodes(conf: Path) -> None:
    assert HadoopConf(conf).name_services == {
        "ns1": [
            NameNode("nn1", "nn1.example:8020"),
            NameNode("nn2", "nn2.example:8020"),
        ],
        "archive": [NameNode("", "old.example:9000")],
    }
    assert HadoopConf(conf.parent).name_services == {}  # no hdfs-site.xml


def test_resourcemanager_ha_ids(conf: Path) -> None:
    assert HadoopConf(conf).rm_addresses == ["rm1.example:8032", "rm2.example:8032"]


def test_resourcemanager_addresses(tmp_path: Path) -> None:
    yarn = tmp_path / "yarn-site.xml"
    assert HadoopConf(tmp_path).rm_addresses == ["0.0.0.0:8032"]  # Hadoop's default
    site(yarn, ("yarn.resourcemanager.address", "rm:9000"))
    assert HadoopConf(tmp_path).rm_addresses == ["rm:9000"]
    site(yarn, ("yarn.resourcemanager.hostname", "rm.example"))
    assert HadoopConf(tmp_path).rm_addresses == ["rm.example:8032"]
    site(
        yarn,
        ("yarn.resourcemanager.ha.enabled", "true"),
        ("yarn.resourcemanager.ha.rm-ids", "a,b"),
        ("yarn.resourcemanager.hostname.a", "h1"),
        ("yarn.resourcemanager.address.b", "h2:1"),
    )
    assert HadoopConf(tmp_path).rm_addresses == ["h1:8032", "h2:1"]
    # Ids without HA enabled: the one ResourceManager.
    site(
        yarn,
        ("yarn.resourcemanager.ha.rm-ids", "a,b"),
        ("yarn.resourcemanager.address", "single:8032"),
    )
    assert HadoopConf(tmp_path).rm_addresses == ["single:8032"]


def test_secure_and_its_realm(conf: Path, tmp_path: Path) -> None:
    secure = HadoopConf(conf)
    assert secure.is_secure  # "Kerberos": Hadoop compares without case
    assert secure.realm == REALM  # the ResourceManager's before the NameNode's
    site(conf / "yarn-site.xml")
    assert secure.realm == "OTHER.TEST"  # the files are read as they are now
    assert not HadoopConf(tmp_path).is_secure  # no core-site.xml: simple
    assert HadoopConf(tmp_path).realm is None
    site(tmp_path / "core-site.xml", ("hadoop.security.authentication", "simple"))
    assert not HadoopConf(tmp_path).is_secure


def test_a_final_property_is_not_overridden(tmp_path: Path) -> None:
    core = site(
        tmp_path / "core-site.xml",
        ("fs.defaultFS", "hdfs://first:8020"),
        ("fs.defaultFS", "hdfs://second:8020"),
        ("hadoop.security.authentication", "kerberos", True),
        ("hadoop.security.authentication", "simple"),
    )
    props = hadoop_conf.read_site(core)
    assert props["fs.defaultFS"] == "hdfs://second:8020"  # the last one wins
    assert props["hadoop.security.authentication"] == "kerberos"  # unless final


def test_each_file_is_parsed_once_per_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    core = site(tmp_path / "core-site.xml", ("fs.defaultFS", "hdfs://a:1"))
    an_hour_ago = time.time_ns() - 3600 * 10**9
    os.utime(core, ns=(an_hour_ago, an_hour_ago))  # settled
    parsed: list[str] = []
    parse = hadoop_conf._parse

    def counting(name: str, origin: str) -> dict[str, str]:
        parsed.append(name)
        return parse(name, origin)

    monkeypatch.setattr(hadoop_conf, "_parse", counting)
    first = hadoop_conf.read_site(core)
    assert hadoop_conf.read_site(core) is first
    assert HadoopConf(tmp_path).default_fs == "hdfs://a:1"
    assert parsed == [str(core)]
    site(core, ("fs.defaultFS", "hdfs://changed:2"))
    os.utime(core, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert HadoopConf(tmp_path).default_fs == "hdfs://changed:2"
    assert len(parsed) == 2
    with pytest.raises(TypeError):
        first["fs.defaultFS"] = "x"  # type: ignore[index]  # shared: read-only


def test_a_file_rewritten_within_one_tick_of_its_clock_is_read_again(
    tmp_path: Path,
) -> None:
    # A coarse file clock gives the rewrite the same modification time, and it
    # has the same size and inode: only its freshness tells it may have changed.
    core = site(tmp_path / "core-site.xml", ("fs.defaultFS", "hdfs://a:1"))
    tick = os.stat(core).st_mtime_ns
    assert HadoopConf(tmp_path).default_fs == "hdfs://a:1"
    site(core, ("fs.defaultFS", "hdfs://b:1"))
    os.utime(core, ns=(tick, tick))
    assert HadoopConf(tmp_path).default_fs == "hdfs://b:1"


def test_a_missing_directory_reads_as_empty_but_is_refused_when_required(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    missing = tmp_path / "nope"
    assert HadoopConf(missing).default_fs is None
    monkeypatch.setenv("HADOOP_CONF_DIR", str(missing))
    with pytest.raises(HadoopConfError) as err:
        hadoop_conf.require_conf_dir()
    text = str(err.value)
    assert f"HADOOP_CONF_DIR={missing} does not exist" in text
    assert "point HADOOP_CONF_DIR at the directory holding" in text
    assert isinstance(err.value, ClusterError)  # the client's callers catch these


def test_no_configuration_at_all_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.setenv("TFYARN_CLUSTER_HOME", str(tmp_path / "no-cluster"))
    assert hadoop_conf.conf_dir() is None and hadoop_conf.current() is None
    with pytest.raises(HadoopConfError) as err:
        hadoop_conf.require_conf_dir()
    text = str(err.value)
    assert "HADOOP_CONF_DIR is not set" in text
    assert "Set HADOOP_CONF_DIR to the directory" in text
    assert "tfyarn cluster start" in text


def test_malformed_xml_names_the_file(conf: Path) -> None:
    broken = conf / "hdfs-site.xml"
    broken.write_text("<configuration><property><name>dfs.nameservices</name>")
    with pytest.raises(HadoopConfError) as err:
        _ = HadoopConf(conf).name_services
    text = str(err.value)
    assert f"{broken} (from HADOOP_CONF_DIR) cannot be read" in text
    assert "fix or replace the file" in text
    assert "\n" not in text


def test_check_conf_dir_wants_the_client_files(tmp_path: Path) -> None:
    with pytest.raises(HadoopConfError, match="it is empty"):
        hadoop_conf.check_conf_dir(tmp_path)
    site(tmp_path / "core-site.xml")
    with pytest.raises(HadoopConfError, match=re.escape("it has no yarn-site.xml")):
        hadoop_conf.check_conf_dir(tmp_path)
    assert hadoop_conf.check_conf_dir(tmp_path, ("core-site.xml",)) == tmp_path


# -- the local cluster's configuration, while its NameNode runs -----------------

NAMENODE = "org.apache.hadoop.hdfs.server.namenode.NameNode"


def _fake_daemon(home: Path, *args: str) -> subprocess.Popen[bytes]:
    """A process whose command line looks like the local cluster's NameNode."""
    code = "import time; time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code, *args])
    cmdline = Path(f"/proc/{proc.pid}/cmdline")
    deadline = time.monotonic() + 10
    while args[0].encode() not in cmdline.read_bytes():  # until it has exec'd
        assert time.monotonic() < deadline, "the fake daemon did not start"
        time.sleep(0.01)
    (home / "run").mkdir(parents=True, exist_ok=True)
    (home / "run" / "namenode.pid").write_text(f"{proc.pid}\n")
    return proc


def test_the_running_local_cluster_is_the_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "cluster"
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.setenv("TFYARN_CLUSTER_HOME", str(home))
    assert local_cluster.default_home() == home.resolve()
    assert hadoop_conf.conf_dir() is None  # never started
    proc = _fake_daemon(home, f"-Dtfyarn.cluster.home={home.resolve()}", NAMENODE)
    try:
        assert hadoop_conf.conf_dir() == home.resolve() / "conf"
        # HADOOP_CONF_DIR wins over it.
        monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
        assert hadoop_conf.conf_dir() == tmp_path
    finally:
        proc.kill()
        proc.wait()
    monkeypatch.delenv("HADOOP_CONF_DIR")
    assert hadoop_conf.conf_dir() is None  # the pid file outlived its NameNode


def test_a_reused_pid_is_not_the_local_namenode(tmp_path: Path) -> None:
    home = tmp_path / "cluster"
    other = _fake_daemon(home, "-Dtfyarn.cluster.home=/elsewhere", NAMENODE)
    try:
        assert hadoop_conf.local_cluster_conf_dir(home) is None
    finally:
        other.kill()
        other.wait()
    (home / "run" / "namenode.pid").write_text("not a pid\n")
    assert hadoop_conf.local_cluster_conf_dir(home) is None
