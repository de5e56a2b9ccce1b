"""A secure local cluster's Kerberos side: its KDC, principals, keytabs,
keystore and the user's ticket (``tfyarn cluster start --secure``).

Everything lives under ``<base_dir>/kerberos``; the realm is the cluster's
own (named after its KDC port, so two secure clusters never mistake each
other's tickets). The user gets a keytab and a ticket in the cluster's own
cache (``KRB5CCNAME`` from ``tfyarn cluster env``): the default cache in /tmp
is left alone.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import secrets
import subprocess
from collections.abc import Callable
from pathlib import Path

from tfyarn.cluster import _kdc, _secure_conf
from tfyarn.cluster._kdc import Kdc
from tfyarn.cluster._settings import ClusterSettings
from tfyarn.errors import ClusterError

# name -> (default port, what it is); shifted by --port-offset like PORTS. Kept
# apart from PORTS: an insecure cluster neither binds nor checks them.
SECURE_PORTS: dict[str, tuple[int, str]] = {
    "kdc": (10088, "Kerberos KDC (TCP)"),
    "namenode_https": (9871, "NameNode web UI (HTTPS)"),
    "datanode_https": (9865, "DataNode web UI (HTTPS)"),
}
# Bound only by a secure HA cluster (``ha``): the HTTPS_ONLY web servers of the
# second NameNode (nn1 keeps ``namenode_https``) and of the JournalNode, from
# which the NameNodes fetch edits.
SECURE_HA_PORTS: dict[str, tuple[int, str]] = {
    "namenode2_https": (9872, "NameNode nn2 web UI (HTTPS)"),
    "journalnode_https": (8481, "JournalNode web UI (HTTPS)"),
}
# HTTPS_ONLY closes HDFS's HTTP web ports: each daemon binds its HTTPS port
# in their place.
_HTTPS_INSTEAD = {
    "namenode_http": "namenode_https",
    "namenode2_http": "namenode2_https",
    "journalnode_http": "journalnode_https",
    "datanode_http": "datanode_https",
}
# The environment variable keytool reads the keystore's password from.
_PASSWORD_VAR = "TFYARN_KEYSTORE_PASSWORD"


def secure_ports(settings: ClusterSettings) -> dict[str, int]:
    """The secure cluster's own ports by name, shifted by the port offset."""
    table = {**SECURE_PORTS, **(SECURE_HA_PORTS if settings.ha else {})}
    return {name: p + settings.port_offset for name, (p, _) in table.items()}


def bound_ports(settings: ClusterSettings) -> dict[str, int]:
    """Every port of ``PORTS`` by name as the daemons bind it: on a secure
    cluster HDFS's web ports are their HTTPS ports (the HTTP ones stay closed),
    so port checks look where a daemon listens."""
    ports = settings.resolved_ports()
    if not settings.secure:
        return ports
    https = secure_ports(settings)
    return {
        name: https.get(_HTTPS_INSTEAD.get(name, ""), port)
        for name, port in ports.items()
    }


def namenode_web(settings: ClusterSettings) -> tuple[int, bool]:
    """The NameNode's web port and whether it speaks HTTPS (HTTPS_ONLY when
    secure: its HTTP port is closed)."""
    if settings.secure:
        return secure_ports(settings)["namenode_https"], True
    return settings.resolved_ports()["namenode_http"], False


@dataclasses.dataclass(frozen=True)
class KerberosStatus:
    """The ``kerberos`` object of ``tfyarn cluster status --json``."""

    realm: str
    kdc: str  # host:port
    kdc_pid: int | None
    user_principal: str
    user_keytab: Path
    ticket_cache: Path

    def to_dict(self) -> dict[str, object]:
        return {
            k: str(v) if isinstance(v, Path) else v
            for k, v in dataclasses.asdict(self).items()
        }


@dataclasses.dataclass(frozen=True)
class SecureCluster:
    """The Kerberos side of the secure local cluster in ``base_dir``."""

    base_dir: Path
    settings: ClusterSettings
    user: str = dataclasses.field(default_factory=getpass.getuser)

    @property
    def dir(self) -> Path:
        return self.base_dir / "kerberos"

    @property
    def kdc(self) -> Kdc:
        port = secure_ports(self.settings)["kdc"]
        return Kdc(self.dir, realm=f"TFYARN{port}.TEST", port=port)

    @property
    def user_principal(self) -> str:
        return f"{self.user}@{self.kdc.realm}"

    @property
    def user_keytab(self) -> Path:
        return self.kdc.keytab(self.user)

    @property
    def ticket_cache(self) -> Path:
        return self.dir / "ccache"

    @property
    def keystore(self) -> Path:
        return self.dir / "keystore.jks"

    def java_flags(self) -> list[str]:
        """For every JVM: daemons, CLIs, skein's driver and, through
        JDK_JAVA_OPTIONS, the JVMs in containers."""
        return self.kdc.java_flags()

    def env(self) -> dict[str, str]:
        """KRB5_CONFIG (kinit, GSSAPI) and the cluster's own ticket cache
        (Java reads KRB5CCNAME too)."""
        return {**self.kdc.env(), "KRB5CCNAME": f"FILE:{self.ticket_cache}"}

    def conf(self) -> _secure_conf.SecureConf:
        ports = secure_ports(self.settings)
        return _secure_conf.SecureConf(
            realm=self.kdc.realm,
            user=self.user,
            keytabs={s: self.kdc.keytab(s) for s in _secure_conf.SERVICES},
            keystore=self.keystore,
            store_password=self._store_password(),
            namenode_https=ports["namenode_https"],
            datanode_https=ports["datanode_https"],
            token_lifetime_s=self.settings.token_lifetime_s,
            journalnode=self.settings.ha,
        )

    def write_config(self, conf_dir: Path) -> None:
        """Make the rendered configuration in ``conf_dir`` secure."""
        _secure_conf.write_secure_config(conf_dir, self.conf())

    def _store_password(self) -> str:
        path = self.dir / "keystore.password"
        if not path.exists():
            self.dir.mkdir(parents=True, exist_ok=True)
            path.touch(mode=0o600)
            path.write_text(secrets.token_urlsafe(18))
        return path.read_text().strip()

    # -- start / stop ---------------------------------------------------------

    def start(self, java_home: Path, log: Callable[[str], None]) -> None:
        """Run the KDC (a no-op when it runs), make what is missing of the
        principals, keytabs and keystore, and get the user a ticket.

        Raises
        ------
        ClusterError
            Kerberos tools missing, the KDC's port taken or the KDC dead at
            start (naming its log), keytool failing.
        """
        missing = _kdc.missing_tools()
        if missing:
            raise ClusterError(
                f"a secure local cluster (--secure) runs its own Kerberos KDC, but "
                f"this machine lacks {', '.join(missing)}. Install them (Debian/"
                f"Ubuntu: `sudo apt-get install -y {' '.join(_kdc.PACKAGES)}`, or "
                "`bash tests/system-packages.sh` in a tfyarn checkout) and start "
                "again, or start without --secure."
            )
        kdc = self.kdc
        if kdc.pid() is None:
            log(
                f"Starting the Kerberos KDC of realm {kdc.realm} on port {kdc.port} ..."
            )
        kdc.start()
        for service in _secure_conf.SERVICES:
            if not kdc.keytab(service).exists():
                principal = f"{service}/{_secure_conf.HOST}@{kdc.realm}"
                kdc.add_principal(principal, kdc.keytab(service))
        if not self.user_keytab.exists():
            kdc.add_principal(self.user_principal, self.user_keytab)
        if not self.keystore.exists():
            self._make_keystore(java_home)
        kdc.kinit(self.user_principal, self.user_keytab, self.ticket_cache)

    def _make_keystore(self, java_home: Path) -> None:
        # A self-signed key for the HTTPS_ONLY NameNode and DataNode; the same
        # file is their truststore and the clients' (ssl-client.xml). The
        # password goes through the environment: on the command line any local
        # user could read it in /proc, and keytool's launcher would take one
        # starting with "-J" as a JVM option.
        password = self._store_password()
        command = [
            str(java_home / "bin" / "keytool"),
            "-genkeypair", "-noprompt", "-alias", _secure_conf.HOST,
            "-keyalg", "RSA", "-keysize", "2048", "-validity", "3650",
            "-dname", f"CN={_secure_conf.HOST}",
            "-ext", "SAN=dns:localhost,ip:127.0.0.1",
            "-keystore", str(self.keystore), "-storetype", "JKS",
            "-storepass:env", _PASSWORD_VAR, "-keypass:env", _PASSWORD_VAR,
        ]  # fmt: skip
        try:
            done = subprocess.run(
                command,
                env={**os.environ, _PASSWORD_VAR: password},
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ClusterError(
                f"could not make the secure cluster's TLS keystore with keytool "
                f"({exc}); the JDK in {java_home} must have bin/keytool"
            ) from exc
        if done.returncode != 0:
            self.keystore.unlink(missing_ok=True)
            raise ClusterError(
                "keytool could not make the secure cluster's TLS keystore "
                f"{self.keystore}: {(done.stderr or done.stdout).strip()[:400]}"
            )
        self.keystore.chmod(0o600)

    def stop(self) -> bool:
        """Stop the KDC; True if it was running."""
        kdc = self.kdc
        running = kdc.pid() is not None
        kdc.stop()
        return running

    def status(self) -> KerberosStatus:
        kdc = self.kdc
        return KerberosStatus(
            realm=kdc.realm,
            kdc=f"127.0.0.1:{kdc.port}",
            kdc_pid=kdc.pid(),
            user_principal=self.user_principal,
            user_keytab=self.user_keytab,
            ticket_cache=self.ticket_cache,
        )
