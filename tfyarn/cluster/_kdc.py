"""A Kerberos realm of the local cluster's own: an MIT KDC on loopback.

For ``tfyarn cluster start --secure``: one ``krb5kdc`` per cluster,
its database, configuration and keytabs under ``<base_dir>/kerberos``, never
``/etc/krb5.conf`` (Debian's install may create one; the host's own realm, if
any, stays untouched). No admin server: ``kadmin.local`` writes the database
directly. Every program that talks to the realm gets ``KRB5_CONFIG`` (C
libraries: kinit, hdfs-native's GSSAPI); every JVM also needs
``-Djava.security.krb5.conf`` (Java ignores ``KRB5_CONFIG``): see
:meth:`Kdc.java_flags`.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
import socket
import subprocess
import time
from pathlib import Path

from tfyarn.cluster import _process
from tfyarn.errors import ClusterError

TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit", "klist")
# Debian/Ubuntu packages that bring TOOLS.
PACKAGES = ("krb5-kdc", "krb5-admin-server", "krb5-user")
START_TIMEOUT_S = 20.0


def missing_tools() -> list[str]:
    """The Kerberos programs this machine lacks (looked up on PATH and sbin)."""
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    return [tool for tool in TOOLS if shutil.which(tool, path=path) is None]


def _tool(name: str) -> str:
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    found = shutil.which(name, path=path)
    if found is None:
        raise ClusterError(
            f"Kerberos tools not found: {', '.join(missing_tools())}. A secure local "
            "cluster runs its own KDC; install them (Debian/Ubuntu: "
            f"`sudo apt-get install -y {' '.join(PACKAGES)}`) and start again."
        )
    return found


@dataclasses.dataclass(frozen=True)
class Kdc:
    """One realm: where it lives, its name and the KDC's port on 127.0.0.1.

    Examples
    --------
    >>> kdc = Kdc(Path("/tmp/c/kerberos"), realm="TFYARN.TEST", port=18800)
    >>> kdc.start()  # doctest: +SKIP
    >>> kdc.add_principal("alice", kdc.keytab("alice"))  # doctest: +SKIP
    """

    base_dir: Path
    realm: str
    port: int

    @property
    def krb5_conf(self) -> Path:
        return self.base_dir / "krb5.conf"

    @property
    def kdc_conf(self) -> Path:
        return self.base_dir / "kdc.conf"

    @property
    def log(self) -> Path:
        return self.base_dir / "kdc.log"

    @property
    def _pid_file(self) -> Path:
        return self.base_dir / "kdc.pid"

    def keytab(self, name: str) -> Path:
        """Where the keytab called ``name`` lives (only the owner may read it)."""
        return self.base_dir / "keytabs" / f"{name}.keytab"

    def env(self) -> dict[str, str]:
        """What C programs need to use this realm (kinit, klist, GSSAPI)."""
        return {"KRB5_CONFIG": str(self.krb5_conf)}

    def java_flags(self) -> list[str]:
        """What every JVM needs (Java reads neither KRB5_CONFIG nor kdc.conf)."""
        return [f"-Djava.security.krb5.conf={self.krb5_conf}"]

    # -- setting up ---------------------------------------------------------

    def create(self) -> None:
        """Write the configuration and create the database, once."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        (self.base_dir / "keytabs").mkdir(mode=0o700, exist_ok=True)
        self.kdc_conf.write_text(self._kdc_conf_text())
        self.krb5_conf.write_text(self._krb5_conf_text())
        if (self.base_dir / "principal").exists():
            return
        # The master key is stashed (kdc's own file); nobody needs to type it.
        # It is typed on stdin (asked twice), not given with -P: a command
        # line is readable by every local user in /proc.
        key = secrets.token_urlsafe(24)
        self._run(
            [_tool("kdb5_util"), "-r", self.realm, "create", "-s"],
            "create the Kerberos database",
            stdin=f"{key}\n{key}\n",
        )  # fmt: skip

    def _kdc_conf_text(self) -> str:
        base = self.base_dir
        return (
            "[kdcdefaults]\n"
            f" kdc_ports = {self.port}\n"
            f" kdc_tcp_ports = {self.port}\n"
            "[realms]\n"
            f" {self.realm} = {{\n"
            f"  database_name = {base / 'principal'}\n"
            f"  key_stash_file = {base / 'stash'}\n"
            f"  acl_file = {base / 'kadm5.acl'}\n"
            "  max_life = 1d\n"
            "  max_renewable_life = 7d\n"
            "  supported_enctypes = aes256-cts-hmac-sha1-96:normal "
            "aes128-cts-hmac-sha1-96:normal\n"
            " }\n"
            "[logging]\n"
            f" kdc = FILE:{self.log}\n"
        )

    def _krb5_conf_text(self) -> str:
        return (
            "[libdefaults]\n"
            f" default_realm = {self.realm}\n"
            " dns_lookup_realm = false\n"
            " dns_lookup_kdc = false\n"
            " rdns = false\n"
            # TCP only: one port to probe and to forward, and Java agrees.
            " udp_preference_limit = 1\n"
            " forwardable = true\n"
            " ticket_lifetime = 24h\n"
            " renew_lifetime = 7d\n"
            "[realms]\n"
            f" {self.realm} = {{\n"
            f"  kdc = 127.0.0.1:{self.port}\n"
            " }\n"
        )

    # -- running ------------------------------------------------------------

    def pid(self) -> int | None:
        """The KDC's pid while it runs, else None."""
        try:
            pid = int(self._pid_file.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except (OSError, ValueError):
            return None
        ours = Path(cmdline[0].decode()).name == "krb5kdc"
        return pid if ours and self.realm.encode() in cmdline else None

    def start(self, *, timeout: float = START_TIMEOUT_S) -> None:
        """Create the realm if needed and run its KDC; return once it answers.

        Raises
        ------
        ClusterError
            Tools missing, the port taken, or the KDC not answering in time
            (the message quotes its log).
        """
        self.create()
        if self.pid() is not None:
            return
        if _listening(self.port):
            raise ClusterError(
                f"port {self.port} (the local KDC) is already in use; stop what holds "
                "it or start the cluster with another --port-offset"
            )
        with open(self.base_dir / "kdc.out", "wb") as out:
            proc = subprocess.Popen(
                [_tool("krb5kdc"), "-n", "-r", self.realm],
                env={
                    **os.environ,
                    **self.env(),
                    "KRB5_KDC_PROFILE": str(self.kdc_conf),
                },
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._pid_file.write_text(f"{proc.pid}\n")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise ClusterError(
                    f"the local KDC exited with code {proc.returncode} at start; "
                    f"its log {self.log} says:\n{_tail(self.log)}"
                    f"{_tail(self.base_dir / 'kdc.out')}Fix what it says, or make "
                    "a new realm with `tfyarn cluster stop --wipe`."
                )
            if _listening(self.port):
                return
            time.sleep(0.1)
        self.stop()
        raise ClusterError(
            f"the local KDC did not listen on 127.0.0.1:{self.port} within "
            f"{timeout:.0f} s; its log {self.log} says:\n{_tail(self.log)}"
        )

    def stop(self) -> None:
        """Stop the KDC (bounded); the realm's files stay."""
        pid = self.pid()
        if pid is None:
            return
        # Waits for the process itself: an exiting KDC shows an empty command
        # line (so pid() says None) well before it is gone.
        _process.terminate([pid], grace=5)
        self._pid_file.unlink(missing_ok=True)

    # -- principals ---------------------------------------------------------

    def add_principal(self, principal: str, keytab: Path) -> Path:
        """Create ``principal`` (random key) if new and add its key to ``keytab``.

        Keys are exported without re-randomizing them, so earlier keytabs of
        the same principal stay valid.
        """
        listing = self._kadmin(f"getprinc {principal}", check=False)
        if "Principal:" not in listing:
            self._kadmin(f"addprinc -randkey {principal}")
        keytab.parent.mkdir(parents=True, exist_ok=True)
        self._kadmin(f"ktadd -norandkey -k {keytab} {principal}")
        keytab.chmod(0o600)
        return keytab

    def kinit(self, principal: str, keytab: Path, ccache: Path) -> None:
        """Get a ticket for ``principal`` from ``keytab`` into ``ccache``.

        Raises
        ------
        ClusterError
            The KDC refused or did not answer; the message quotes kinit.
        """
        self._run(
            [
                _tool("kinit"),
                "-k",
                "-t",
                str(keytab),
                "-c",
                f"FILE:{ccache}",
                principal,
            ],
            f"get a Kerberos ticket for {principal} from {keytab}",
        )

    def _kadmin(self, query: str, *, check: bool = True) -> str:
        return self._run(
            [_tool("kadmin.local"), "-r", self.realm, "-q", query],
            f"kadmin.local {query.split()[0]}",
            check=check,
        )

    def _run(
        self,
        command: list[str],
        what: str,
        *,
        check: bool = True,
        stdin: str | None = None,
    ) -> str:
        env = {**os.environ, **self.env(), "KRB5_KDC_PROFILE": str(self.kdc_conf)}
        try:
            done = subprocess.run(
                command,
                env=env,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise ClusterError(f"could not {what}: no answer in 30 s") from exc
        if check and done.returncode != 0:
            said = (done.stderr or done.stdout).strip()
            raise ClusterError(f"could not {what}: {said}")
        return done.stdout + done.stderr


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _tail(path: Path, lines: int = 8) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "".join(f"  {line}\n" for line in text[-lines:])
