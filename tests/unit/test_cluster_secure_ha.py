"""A secure HA local cluster (``--ha --secure``): its settings, ports,
rendered configuration and the probes of its HTTPS_ONLY NameNodes, without a
KDC or a JVM (``tests/integration/ha_secure`` runs the real one)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tfyarn.cluster import ClusterSettings, LocalCluster, _ha, _probe, _restarts
from tfyarn.cluster._failover import Pair, wait_active
from tfyarn.cluster._render import write_config
from tfyarn.cluster._secure import SecureCluster, bound_ports, secure_ports
from tfyarn.cluster._settings import save_settings
from tfyarn.cluster._status import instances
from tfyarn.contract import hadoop_conf
from tfyarn.errors import ClusterError

SECURE_HA = ClusterSettings(ha=True, secure=True, port_offset=1500)
REALM = "TFYARN11588.TEST"


def properties(path: Path) -> dict[str, str]:
    names = [p.findtext("name", "") for p in ET.parse(path).getroot().iter("property")]
    assert len(names) == len(set(names)), f"a property set twice in {path.name}"
    return dict(hadoop_conf.read_site(path))


def rendered(tmp_path: Path, settings: ClusterSettings) -> dict[str, dict[str, str]]:
    base = tmp_path / "cluster"
    (tmp_path / "lib").mkdir(exist_ok=True)
    conf = write_config(settings, base_dir=base, lib_dir=tmp_path / "lib")
    SecureCluster(base, settings, user="alice").write_config(conf)
    return {
        name: properties(conf / name)
        for name in ("core-site.xml", "hdfs-site.xml", "yarn-site.xml")
    }


# -- settings and ports ------------------------------------------------------------


def test_ha_goes_with_secure_but_not_with_the_container_executor() -> None:
    assert SECURE_HA.ha and SECURE_HA.secure
    with pytest.raises(ClusterError, match="--container_executor"):
        ClusterSettings(ha=True, container_executor="/opt/hadoop/bin/ce")


def test_nn2_and_the_journalnode_get_https_ports_of_their_own() -> None:
    ports = secure_ports(SECURE_HA)
    assert ports["namenode_https"] == 9871 + 1500
    assert ports["namenode2_https"] == 9872 + 1500
    assert ports["journalnode_https"] == 8481 + 1500
    # A secure cluster without HA binds neither.
    plain = secure_ports(ClusterSettings(secure=True, port_offset=1500))
    assert "namenode2_https" not in plain and "journalnode_https" not in plain


def test_daemons_are_checked_on_the_ports_they_bind() -> None:
    bound = bound_ports(SECURE_HA)
    https = secure_ports(SECURE_HA)
    # HTTPS_ONLY: HDFS's web servers listen on their HTTPS ports only.
    assert bound["namenode_http"] == https["namenode_https"]
    assert bound["namenode2_http"] == https["namenode2_https"]
    assert bound["journalnode_http"] == https["journalnode_https"]
    assert bound["datanode_http"] == https["datanode_https"]
    assert bound["namenode2_rpc"] == SECURE_HA.resolved_ports()["namenode2_rpc"]
    # nn1's HTTPS port is nn2's HTTP port number: as bound, no two daemons
    # share a port (a restarted nn2 must not find nn1 on its port).
    used = [
        bound[name] for inst in instances(SECURE_HA, None) for name in inst.daemon.ports
    ]
    assert len(used) == len(set(used)), sorted(used)
    assert https["kdc"] not in used
    insecure = ClusterSettings(ha=True, port_offset=1500)
    assert bound_ports(insecure) == insecure.resolved_ports()


# -- rendered configuration ------------------------------------------------------


def test_each_namenode_and_the_journalnode_serve_https(tmp_path: Path) -> None:
    hdfs = rendered(tmp_path, SECURE_HA)["hdfs-site.xml"]
    https = secure_ports(SECURE_HA)
    assert hdfs["dfs.http.policy"] == "HTTPS_ONLY"
    assert hdfs["dfs.namenode.https-address.tfyarn.nn1"] == (
        f"127.0.0.1:{https['namenode_https']}"
    )
    assert hdfs["dfs.namenode.https-address.tfyarn.nn2"] == (
        f"127.0.0.1:{https['namenode2_https']}"
    )
    assert hdfs["dfs.journalnode.https-address"] == (
        f"127.0.0.1:{https['journalnode_https']}"
    )


def test_every_ha_daemon_has_a_principal_and_a_keytab(tmp_path: Path) -> None:
    site = rendered(tmp_path, SECURE_HA)
    core, hdfs, yarn = (
        site["core-site.xml"],
        site["hdfs-site.xml"],
        site["yarn-site.xml"],
    )
    assert core["fs.defaultFS"] == "hdfs://tfyarn"
    assert core["hadoop.security.authentication"] == "kerberos"
    # One nn/ principal serves both NameNodes (one host) and, through the
    # NameNode's keys, both failover controllers.
    assert hdfs["dfs.namenode.kerberos.principal"] == f"nn/localhost@{REALM}"
    assert hdfs["dfs.namenode.keytab.file"].endswith("/kerberos/keytabs/nn.keytab")
    assert hdfs["dfs.ha.automatic-failover.enabled"] == "true"
    assert hdfs["dfs.journalnode.kerberos.principal"] == f"jn/localhost@{REALM}"
    assert hdfs["dfs.journalnode.keytab.file"].endswith("/kerberos/keytabs/jn.keytab")
    assert hdfs["dfs.journalnode.kerberos.internal.spnego.principal"] == (
        f"HTTP/localhost@{REALM}"
    )
    assert hdfs["dfs.namenode.shared.edits.dir"].startswith("qjournal://127.0.0.1:")
    # Both ResourceManagers log in as rm/.
    assert yarn["yarn.resourcemanager.ha.enabled"] == "true"
    assert yarn["yarn.resourcemanager.principal"] == f"rm/localhost@{REALM}"
    assert yarn["yarn.resourcemanager.keytab"].endswith("/kerberos/keytabs/rm.keytab")


def test_a_secure_cluster_without_ha_has_no_journalnode_keys(tmp_path: Path) -> None:
    hdfs = rendered(tmp_path, ClusterSettings(secure=True, port_offset=500))[
        "hdfs-site.xml"
    ]
    assert not [key for key in hdfs if "journalnode" in key]
    assert not [key for key in hdfs if key.startswith("dfs.namenode.https-address.")]


def test_an_insecure_ha_cluster_has_no_https_addresses(tmp_path: Path) -> None:
    settings = ClusterSettings(ha=True, port_offset=1500)
    conf = write_config(settings, base_dir=tmp_path, lib_dir=tmp_path)
    hdfs = properties(conf / "hdfs-site.xml")
    assert not [key for key in hdfs if "https" in key]


# -- probes of HTTPS_ONLY NameNodes -----------------------------------------------


@pytest.fixture
def probed(monkeypatch: pytest.MonkeyPatch) -> dict[int, tuple[bool | None, bool]]:
    """``_probe.is_active`` answered from a table: port -> (answer, https it
    wants); a probe with the wrong scheme gets no answer, as from a real
    HTTPS_ONLY port."""
    table: dict[int, tuple[bool | None, bool]] = {}

    def is_active(
        port: int, host: str = "127.0.0.1", *, https: bool = False, timeout: float = 5
    ) -> bool | None:
        answer, wants_https = table.get(port, (None, False))
        return answer if https == wants_https else None

    monkeypatch.setattr(_probe, "is_active", is_active)
    return table


def test_the_active_namenode_is_found_over_https(
    probed: dict[int, tuple[bool | None, bool]],
) -> None:
    https = secure_ports(SECURE_HA)
    probed[https["namenode_https"]] = (False, True)
    probed[https["namenode2_https"]] = (True, True)
    webs = _ha.namenode_webs(SECURE_HA)
    assert [(m.id, port, m.https) for m, port in webs] == [
        ("nn1", https["namenode_https"], True),
        ("nn2", https["namenode2_https"], True),
    ]
    assert _ha.active_namenode_web(SECURE_HA, "127.0.0.1") == (
        https["namenode2_https"],
        True,
    )
    assert _ha.states(webs, "127.0.0.1") == {"nn1": "standby", "nn2": "active"}
    # The ResourceManagers' web servers stay HTTP.
    rm1_web = SECURE_HA.resolved_ports()["rm_web"]
    probed[rm1_web] = (True, False)
    assert _ha.active_rm_web(SECURE_HA, "127.0.0.1") == rm1_web


def test_without_ha_the_secure_namenode_is_still_https(
    probed: dict[int, tuple[bool | None, bool]],
) -> None:
    secure = ClusterSettings(secure=True, port_offset=500)
    assert _ha.active_namenode_web(secure, "127.0.0.1") == (10371, True)
    insecure = ClusterSettings(ha=True, port_offset=900)
    probed[9871 + 900] = (True, False)
    assert _ha.active_namenode_web(insecure, "127.0.0.1") == (9871 + 900, False)


def test_a_restart_and_a_failover_wait_on_the_https_ports(
    probed: dict[int, tuple[bool | None, bool]], monkeypatch: pytest.MonkeyPatch
) -> None:
    https = secure_ports(SECURE_HA)
    probed[https["namenode_https"]] = (True, True)
    probed[https["namenode2_https"]] = (False, True)
    webs = _ha.namenode_webs(SECURE_HA)
    pair = Pair("NameNode", webs[1][0], webs[0][0], tuple(webs))
    wait_active(pair.other, pair, "127.0.0.1", timeout=1)  # nn1: at once
    with pytest.raises(ClusterError, match="nn2 was not active"):
        wait_active(pair.active, pair, "127.0.0.1", timeout=0.3)

    ready = _probe.HdfsHealth("", 1, 1 << 30, 1 << 30)
    asked = []

    def hdfs_health(
        port: int, host: str = "127.0.0.1", *, https: bool = False
    ) -> _probe.HdfsHealth | None:
        asked.append((port, https))
        return ready if https else None

    monkeypatch.setattr(_probe, "hdfs_health", hdfs_health)
    nn2 = next(i for i in instances(SECURE_HA, None) if i.key == "namenode2")
    # nn2 restarted as the standby: back once it answers and nn1 serves HDFS.
    assert _restarts._namenode_missing(SECURE_HA, nn2, "127.0.0.1") is None
    assert asked == [(https["namenode_https"], True)]
    probed.pop(https["namenode2_https"])
    assert _restarts._namenode_missing(SECURE_HA, nn2, "127.0.0.1") == (
        "its web endpoint did not answer"
    )


def test_web_uis_name_the_namenodes_https(
    tmp_path: Path, probed: dict[int, tuple[bool | None, bool]]
) -> None:
    save_settings(tmp_path, SECURE_HA)
    https = secure_ports(SECURE_HA)
    uis = LocalCluster(tmp_path).web_uis()
    assert uis["NameNode nn1"] == f"https://127.0.0.1:{https['namenode_https']}"
    assert uis["NameNode nn2"] == f"https://127.0.0.1:{https['namenode2_https']}"
    assert uis["DataNode"] == f"https://127.0.0.1:{https['datanode_https']}"
    assert uis["ResourceManager rm2"].startswith("http://")


def test_status_lists_the_ports_the_daemons_listen_on(
    tmp_path: Path, probed: dict[int, tuple[bool | None, bool]]
) -> None:
    save_settings(tmp_path, SECURE_HA)
    https = secure_ports(SECURE_HA)
    daemons = {d.name: d.ports for d in LocalCluster(tmp_path).status().daemons}
    assert daemons["namenode2"]["namenode2_http"] == https["namenode2_https"]
    assert daemons["journalnode"]["journalnode_http"] == https["journalnode_https"]
