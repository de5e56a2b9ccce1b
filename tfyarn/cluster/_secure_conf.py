"""The Hadoop configuration of a secure (Kerberos) local cluster.

Rendered on top of the ordinary one (``conf/hadoop/*.xml``): a property the
templates already set (``hadoop.security.authentication``, log aggregation)
gets its secure value, the others are added before ``</configuration>``, so
the templates' comments survive. Pure functions of their inputs: the unit
tests read what a secure cluster would run with, without a KDC.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from xml.sax.saxutils import escape

# The host name in every daemon's principal (``nn/localhost@REALM``): what
# 127.0.0.1 resolves back to, so a client that derives the server's principal
# from the address it dials agrees with the one the daemon logged in as.
HOST = "localhost"
# Principal service names -> what they are (one keytab each).
SERVICES = {
    "nn": "NameNode",
    "dn": "DataNode",
    "rm": "ResourceManager",
    "nm": "NodeManager",
    "jn": "JournalNode (HA)",
    "HTTP": "web servers (SPNEGO, WebHDFS)",
}


@dataclasses.dataclass(frozen=True, kw_only=True)
class SecureConf:
    """What the secure configuration is made of."""

    realm: str
    user: str  # the OS user every daemon runs as (and maps to)
    keytabs: Mapping[str, Path]  # service (``nn``, ...) -> its keytab
    keystore: Path
    store_password: str
    namenode_https: int
    datanode_https: int
    token_lifetime_s: int = 0
    journalnode: bool = False  # an HA cluster's JournalNode runs too

    def principal(self, service: str) -> str:
        return f"{service}/{HOST}@{self.realm}"


def auth_to_local(realm: str, user: str) -> str:
    """Rules that map each daemon's two-part principal to ``user``, then DEFAULT.

    ``[2:$1@$0]`` turns ``nn/localhost@R`` into ``nn@R`` before the match
    (Hadoop's documented ``[2:$1@$0](.*@R)`` example matches too much or, with
    ``$1/$2``, nothing: tried on Hadoop 3.4 against ``nn/localhost@R``).
    One-part ``user@R`` falls to DEFAULT.
    """
    realm_re = re.escape(realm)
    rules = [
        f"RULE:[2:$1@$0]({service}@{realm_re})s/.*/{user}/" for service in SERVICES
    ]
    return "\n".join([*rules, "DEFAULT"])


def site_properties(conf: SecureConf) -> dict[str, dict[str, str]]:
    """Secure properties by file (``core-site.xml``, ``hdfs-site.xml``, ...)."""
    keytab = {service: str(path) for service, path in conf.keytabs.items()}
    core = {
        "hadoop.security.authentication": "kerberos",
        "hadoop.security.authorization": "true",
        "hadoop.security.auth_to_local": auth_to_local(conf.realm, conf.user),
        # Web UIs and JMX stay readable without SPNEGO (health probes use JMX).
        "hadoop.http.authentication.type": "simple",
        "hadoop.http.authentication.simple.anonymous.allowed": "true",
    }
    hdfs = {
        "dfs.block.access.token.enable": "true",
        "dfs.namenode.kerberos.principal": conf.principal("nn"),
        "dfs.namenode.keytab.file": keytab["nn"],
        "dfs.namenode.kerberos.internal.spnego.principal": conf.principal("HTTP"),
        "dfs.datanode.kerberos.principal": conf.principal("dn"),
        "dfs.datanode.keytab.file": keytab["dn"],
        "dfs.web.authentication.kerberos.principal": conf.principal("HTTP"),
        "dfs.web.authentication.kerberos.keytab": keytab["HTTP"],
        # Unprivileged DataNode ports are allowed only with SASL on data
        # transfer and HTTPS_ONLY (DataNode.checkSecureConfig): the NameNode's
        # HTTP port closes, the probes use its HTTPS port.
        "dfs.data.transfer.protection": "authentication",
        "dfs.http.policy": "HTTPS_ONLY",
        "dfs.namenode.https-address": f"127.0.0.1:{conf.namenode_https}",
        "dfs.datanode.https.address": f"127.0.0.1:{conf.datanode_https}",
    }
    yarn = {
        "yarn.resourcemanager.principal": conf.principal("rm"),
        "yarn.resourcemanager.keytab": keytab["rm"],
        "yarn.nodemanager.principal": conf.principal("nm"),
        "yarn.nodemanager.keytab": keytab["nm"],
        # Allowed in secure mode; containers run as the NodeManager's user
        # (the LinuxContainerExecutor needs a setuid binary no registry has).
        "yarn.nodemanager.container-executor.class": (
            "org.apache.hadoop.yarn.server.nodemanager.DefaultContainerExecutor"
        ),
        # Without libhadoop.so a secure NodeManager crashes aggregating logs:
        # they stay in the NodeManager's log dirs (logs/containers).
        "yarn.log-aggregation-enable": "false",
        "yarn.nodemanager.log.retain-seconds": "604800",
    }
    if conf.journalnode:
        hdfs.update(journalnode_properties(conf))
    if conf.token_lifetime_s:
        max_ms = str(conf.token_lifetime_s * 1000)
        renew_ms = str(conf.token_lifetime_s * 500)
        for prefix, props in (
            ("dfs.namenode.delegation.token", hdfs),
            ("yarn.resourcemanager.delegation.token", yarn),
        ):
            props[f"{prefix}.renew-interval"] = renew_ms
            props[f"{prefix}.max-lifetime"] = max_ms
    return {
        "core-site.xml": core,
        "hdfs-site.xml": hdfs,
        "yarn-site.xml": yarn,
        "ssl-server.xml": {
            "ssl.server.keystore.location": str(conf.keystore),
            "ssl.server.keystore.type": "jks",
            "ssl.server.keystore.password": conf.store_password,
            "ssl.server.keystore.keypassword": conf.store_password,
            "ssl.server.truststore.location": str(conf.keystore),
            "ssl.server.truststore.type": "jks",
            "ssl.server.truststore.password": conf.store_password,
        },
        "ssl-client.xml": {
            "ssl.client.truststore.location": str(conf.keystore),
            "ssl.client.truststore.type": "jks",
            "ssl.client.truststore.password": conf.store_password,
        },
    }


def journalnode_properties(conf: SecureConf) -> dict[str, str]:
    """An HA cluster's secure keys beyond the NameNodes' own.

    The JournalNode logs in as ``jn/``; its web server, from which a NameNode
    fetches edits (HTTPS, SPNEGO), as ``HTTP/``, and it serves them only to
    the NameNodes' principal. Both NameNodes share one host, so one ``nn/``
    principal serves them, and each failover controller logs in as its
    NameNode (Hadoop's ZKFC reads the NameNode's keytab keys): nothing to add.
    ZooKeeper stays unauthenticated: the failover controllers' and the
    ResourceManagers' znodes are world-readable on the loopback ZooKeeper
    (production would add SASL and ACLs: ``ha.zookeeper.acl``,
    ``hadoop.zk.acl``).
    """
    return {
        "dfs.journalnode.kerberos.principal": conf.principal("jn"),
        "dfs.journalnode.keytab.file": str(conf.keytabs["jn"]),
        "dfs.journalnode.kerberos.internal.spnego.principal": conf.principal("HTTP"),
    }


def _property(name: str, value: str) -> str:
    return (
        f"  <property><name>{escape(name)}</name>"
        f"<value>{escape(value)}</value></property>\n"
    )


def merge_properties(
    text: str, props: Mapping[str, str], origin: str = "secure local cluster"
) -> str:
    """``text`` (a Hadoop XML file) with ``props`` set: replaced where present,
    appended before ``</configuration>`` where not."""
    added = []
    for name, value in props.items():
        pattern = re.compile(
            r"(<name>\s*" + re.escape(name) + r"\s*</name>\s*<value>)(.*?)(</value>)",
            re.DOTALL,
        )
        # A function, not a replacement string: values may hold backslashes.
        replacement = escape(value)
        text, count = pattern.subn(
            lambda m: m.group(1) + replacement + m.group(3),  # noqa: B023
            text,
            count=1,
        )
        if not count:
            added.append(_property(name, value))
    if added:
        text = text.replace(
            "</configuration>",
            f"  <!-- {origin}: tfyarn.cluster -->\n"
            + "".join(added)
            + "</configuration>",
        )
    return text


EMPTY = '<?xml version="1.0"?>\n<configuration>\n</configuration>\n'


def write_secure_config(conf_dir: Path, conf: SecureConf) -> None:
    """Apply the secure properties to the rendered files in ``conf_dir``."""
    for name, props in site_properties(conf).items():
        path = conf_dir / name
        # ssl-*.xml are ours alone (no template): written afresh every time.
        ours = name.startswith("ssl-") or not path.exists()
        text = EMPTY if ours else path.read_text()
        path.write_text(merge_properties(text, props))
        if name.startswith("ssl-"):
            path.chmod(0o600)  # they hold the keystore's password
