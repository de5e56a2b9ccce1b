"""The secure local cluster's settings, rendered configuration, environment and
errors, without a KDC or a JVM (``tests/integration/secure`` runs the real one)."""

from __future__ import annotations

import argparse
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tfyarn.cluster import ClusterSettings, LocalCluster, _kdc
from tfyarn.cluster._render import write_config, write_wrappers
from tfyarn.cluster._secure import SecureCluster, namenode_web, secure_ports
from tfyarn.cluster._secure_conf import (
    SERVICES,
    auth_to_local,
    merge_properties,
    write_secure_config,
)
from tfyarn.cluster._settings import load_settings, save_settings
from tfyarn.cluster.cli import _requested_settings, _status_dict, add_commands
from tfyarn.contract import hadoop_conf
from tfyarn.errors import ClusterError

SECURE = ClusterSettings(secure=True, port_offset=500, token_lifetime_s=120)


def properties(path: Path) -> dict[str, str]:
    """What Hadoop reads from one written configuration file, which sets each
    property once (the file's form, which reading it cannot show)."""
    names = [p.findtext("name", "") for p in ET.parse(path).getroot().iter("property")]
    assert len(names) == len(set(names)), f"a property set twice in {path.name}"
    return dict(hadoop_conf.read_site(path))


@pytest.fixture
def secure_conf(tmp_path: Path) -> dict[str, dict[str, str]]:
    """The configuration a secure cluster with offset 500 would run with."""
    base = tmp_path / "cluster"
    lib = tmp_path / "lib"
    lib.mkdir()
    conf = write_config(SECURE, base_dir=base, lib_dir=lib)
    SecureCluster(base, SECURE, user="alice").write_config(conf)
    return {
        name: properties(conf / name)
        for name in (
            "core-site.xml",
            "hdfs-site.xml",
            "yarn-site.xml",
            "ssl-server.xml",
            "ssl-client.xml",
        )
    }


# -- settings ----------------------------------------------------------------


def test_secure_settings_are_checked_and_saved(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="add --secure"):
        ClusterSettings(token_lifetime_s=120)
    with pytest.raises(ClusterError, match="at least 20 s"):
        ClusterSettings(secure=True, token_lifetime_s=5)
    with pytest.raises(ClusterError, match="--nodes"):
        ClusterSettings(secure=True, nodes=2)
    save_settings(tmp_path, SECURE)
    assert load_settings(tmp_path) == SECURE


def test_cli_flags_reach_the_settings(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    argv = ["cluster", "start", "--secure", "--token_lifetime", "90"]
    args = parser.parse_args([*argv, "--base_dir", str(tmp_path)])
    settings = _requested_settings(args, LocalCluster(tmp_path))
    assert settings.secure and settings.token_lifetime_s == 90
    # Not given again: the previous start's choice is kept.
    save_settings(tmp_path, settings)
    args = parser.parse_args(["cluster", "start", "--base-dir", str(tmp_path)])
    assert _requested_settings(args, LocalCluster(tmp_path)).secure
    args = parser.parse_args(["cluster", "start", "--no_secure"])
    insecure = _requested_settings(args, LocalCluster(tmp_path))
    assert not insecure.secure and insecure.token_lifetime_s == 0


def test_secure_ports_follow_the_offset() -> None:
    assert secure_ports(SECURE) == {
        "kdc": 10588,
        "namenode_https": 10371,
        "datanode_https": 10365,
    }
    assert namenode_web(SECURE) == (10371, True)
    assert namenode_web(ClusterSettings(port_offset=500)) == (10370, False)


# -- rendered configuration ------------------------------------------------------


def test_daemons_run_kerberos_with_authorization(
    secure_conf: dict[str, dict[str, str]],
) -> None:
    core = secure_conf["core-site.xml"]
    # Replaced in place, not appended after the template's "simple".
    assert core["hadoop.security.authentication"] == "kerberos"
    assert core["hadoop.security.authorization"] == "true"
    hdfs, yarn = secure_conf["hdfs-site.xml"], secure_conf["yarn-site.xml"]
    assert hdfs["dfs.namenode.kerberos.principal"] == "nn/localhost@TFYARN10588.TEST"
    assert hdfs["dfs.datanode.kerberos.principal"] == "dn/localhost@TFYARN10588.TEST"
    assert yarn["yarn.resourcemanager.principal"] == "rm/localhost@TFYARN10588.TEST"
    assert yarn["yarn.nodemanager.principal"] == "nm/localhost@TFYARN10588.TEST"
    for key in (
        "dfs.namenode.keytab.file",
        "dfs.datanode.keytab.file",
        "dfs.web.authentication.kerberos.keytab",
    ):
        assert hdfs[key].endswith(".keytab") and "/kerberos/keytabs/" in hdfs[key]
    assert yarn["yarn.resourcemanager.keytab"].endswith("/keytabs/rm.keytab")


def test_datanode_uses_sasl_and_https_only_with_a_keystore(
    secure_conf: dict[str, dict[str, str]],
) -> None:
    hdfs = secure_conf["hdfs-site.xml"]
    assert hdfs["dfs.block.access.token.enable"] == "true"
    assert hdfs["dfs.data.transfer.protection"] == "authentication"
    assert hdfs["dfs.http.policy"] == "HTTPS_ONLY"
    assert hdfs["dfs.namenode.https-address"] == "127.0.0.1:10371"
    assert hdfs["dfs.datanode.https.address"] == "127.0.0.1:10365"
    server, client = secure_conf["ssl-server.xml"], secure_conf["ssl-client.xml"]
    assert server["ssl.server.keystore.location"].endswith("/kerberos/keystore.jks")
    assert server["ssl.server.keystore.password"]
    assert (
        client["ssl.client.truststore.location"]
        == (server["ssl.server.keystore.location"])
    )


def test_yarn_uses_the_default_executor_without_log_aggregation(
    secure_conf: dict[str, dict[str, str]],
) -> None:
    yarn = secure_conf["yarn-site.xml"]
    assert yarn["yarn.nodemanager.container-executor.class"].endswith(
        ".DefaultContainerExecutor"
    )
    assert yarn["yarn.log-aggregation-enable"] == "false"


def test_token_lifetime_sets_hdfs_and_yarn_tokens(
    secure_conf: dict[str, dict[str, str]],
) -> None:
    hdfs, yarn = secure_conf["hdfs-site.xml"], secure_conf["yarn-site.xml"]
    for props, prefix in (
        (hdfs, "dfs.namenode.delegation.token"),
        (yarn, "yarn.resourcemanager.delegation.token"),
    ):
        assert props[f"{prefix}.max-lifetime"] == "120000"
        assert props[f"{prefix}.renew-interval"] == "60000"


def test_no_token_lifetime_keeps_hadoops_defaults(tmp_path: Path) -> None:
    settings = ClusterSettings(secure=True)
    conf = write_config(settings, base_dir=tmp_path, lib_dir=tmp_path)
    SecureCluster(tmp_path, settings, user="alice").write_config(conf)
    assert not any("delegation.token" in k for k in properties(conf / "hdfs-site.xml"))


def _map(rules: str, principal: str) -> str | None:
    """What one of ``rules`` maps a two-part principal to (Hadoop's semantics
    for ``RULE:[2:$1@$0](regex)s/.*/user/``), None when none matches."""
    service, rest = principal.split("/", 1)
    realm = rest.split("@", 1)[1]
    for rule in rules.splitlines():
        m = re.fullmatch(r"RULE:\[2:\$1@\$0\]\((.*)\)s/\.\*/(.*)/", rule)
        if m and re.fullmatch(m.group(1), f"{service}@{realm}"):
            return m.group(2)
    return None


def test_auth_to_local_maps_every_daemon_to_the_user_and_ends_with_default() -> None:
    rules = auth_to_local("TFYARN10588.TEST", "alice")
    for service in SERVICES:
        assert _map(rules, f"{service}/localhost@TFYARN10588.TEST") == "alice"
    assert _map(rules, "nn/localhost@OTHER.TEST") is None
    assert _map(rules, "nnx/localhost@TFYARN10588.TEST") is None
    assert rules.splitlines()[-1] == "DEFAULT"


def test_merge_replaces_in_place_appends_and_escapes() -> None:
    text = (
        "<configuration>\n  <!-- keep me -->\n"
        "  <property><name>a</name><value>1</value></property>\n</configuration>\n"
    )
    merged = merge_properties(text, {"a": "2", "b": r"x&y\1"})
    assert "<!-- keep me -->" in merged
    root = ET.fromstring(merged)
    values = {p.findtext("name"): p.findtext("value") for p in root.iter("property")}
    assert values == {"a": "2", "b": r"x&y\1"}


def test_ssl_files_are_private(tmp_path: Path) -> None:
    SecureCluster(tmp_path, SECURE).write_config(tmp_path)
    for name in ("ssl-server.xml", "ssl-client.xml"):
        assert (tmp_path / name).stat().st_mode & 0o077 == 0
    write_secure_config(tmp_path, SecureCluster(tmp_path, SECURE).conf())
    properties(tmp_path / "ssl-server.xml")  # rewritten, still valid


# -- environment, status, errors -------------------------------------------------


FAKE_JAVA = """#!/bin/sh
echo 'openjdk version "17.0.2" 2022-01-18' >&2
"""


def test_env_points_kinit_java_and_skein_at_the_realm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    (java_home / "bin" / "java").write_text(FAKE_JAVA)
    (java_home / "bin" / "java").chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(java_home))
    base = tmp_path / "cluster"
    base.mkdir()
    save_settings(base, SECURE)
    write_wrappers(
        base_dir=base, java_home=java_home, lib_dir=tmp_path, module_flags=()
    )
    env = LocalCluster(base).env_vars()
    krb5 = base / "kerberos" / "krb5.conf"
    assert env["KRB5_CONFIG"] == str(krb5)
    assert env["KRB5CCNAME"] == f"FILE:{base / 'kerberos' / 'ccache'}"
    assert f"-Djava.security.krb5.conf={krb5}" in env["SKEIN_DRIVER_JAVA_OPTIONS"]
    save_settings(base, ClusterSettings(port_offset=500))
    insecure = LocalCluster(base).env_vars()
    assert "KRB5_CONFIG" not in insecure
    assert "krb5" not in insecure["SKEIN_DRIVER_JAVA_OPTIONS"]


def test_status_json_has_a_kerberos_object_only_when_secure(tmp_path: Path) -> None:
    save_settings(tmp_path, SECURE)
    data = _status_dict(LocalCluster(tmp_path).status())
    assert data["state"] == "stopped"
    kerberos = data["kerberos"]
    assert kerberos["realm"] == "TFYARN10588.TEST"
    assert kerberos["kdc"] == "127.0.0.1:10588"
    assert kerberos["kdc_pid"] is None
    assert kerberos["user_principal"].endswith("@TFYARN10588.TEST")
    assert kerberos["user_keytab"].startswith(str(tmp_path / "kerberos" / "keytabs"))
    assert data["web_uis"]["NameNode"] == "https://127.0.0.1:10371"
    save_settings(tmp_path, ClusterSettings())
    assert _status_dict(LocalCluster(tmp_path).status())["kerberos"] is None


def test_missing_kdc_packages_say_how_to_install_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_kdc, "missing_tools", lambda: ["krb5kdc", "kadmin.local"])
    with pytest.raises(ClusterError) as info:
        SecureCluster(tmp_path, SECURE).start(tmp_path, print)
    message = str(info.value)
    assert "krb5kdc, kadmin.local" in message
    assert "apt-get install -y krb5-kdc krb5-admin-server krb5-user" in message
    assert "tests/system-packages.sh" in message
    assert not (tmp_path / "kerberos").exists()  # nothing made before the check
