"""Kerberos on the client: who logs in, checked before skein's driver starts.

On a secure cluster (``hadoop.security.authentication=kerberos`` in
core-site.xml) skein's driver logs in from the user's ticket cache or from a
keytab (``principal``/``keytab``, client-only options: they never travel with
the job). Without a ticket the driver starts (5 s) and only then answers
"Kerberos ticket not found"; a bad keytab makes it exit with the reason in its
log only. So the login is checked here first (``klist``, instant), and what
the driver says anyway is mapped to one message in :func:`explain`.
"""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tfyarn.contract.hadoop_conf import HadoopConf, realm_of
from tfyarn.contract.ticket import has_ticket
from tfyarn.errors import SpecError, TfyarnError


class KerberosError(TfyarnError, PermissionError):
    """No usable Kerberos login: no ticket, a wrong keytab, or no KDC."""


@dataclass(frozen=True)
class Login:
    """How the client authenticates: a keytab, or (both None) the ticket cache."""

    principal: str | None = None
    keytab: str | None = None

    def __post_init__(self) -> None:
        if bool(self.principal) != bool(self.keytab):
            given, missing = (
                ("principal", "keytab") if self.principal else ("keytab", "principal")
            )
            raise SpecError(
                f"{given} given without {missing}: a keytab login needs both "
                "(--principal USER@REALM --keytab FILE); give neither to use "
                "your ticket cache (kinit)"
            )


# What Java, skein and MIT Kerberos say, most specific first: (marks, kind).
_KDC_DOWN = (
    "cannot contact any kdc",
    "connection refused",
    "receive timed out",
    "sockettimeoutexception",
)
_KINDS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("unable to obtain password from user",), "not_in_keytab"),
    (("client not found in kerberos database", "client_not_found"), "unknown"),
    (
        (
            "checksum failed",
            "pre-authentication information was invalid",
            "integrity check on decrypted field failed",
            "preauth_failed",
        ),
        "bad_keys",
    ),
    (
        (
            "kerberos ticket not found",
            "failed to find any kerberos tgt",
            "no valid credentials provided",
            "client cannot authenticate via:[token, kerberos]",
            "ticket expired",
        ),
        "no_ticket",
    ),
)
_KERBEROS_CONTEXT = ("kerberos", "gss", "loginexception", "krb", "kdc")


def kind_of(text: str) -> str | None:
    """Which Kerberos failure a driver's message describes, or None.

    ``kdc_down`` when the KDC did not answer (Java says "Connection refused"
    inside a GSS or login failure; only then, since the same words alone mean
    an unreachable ResourceManager).
    """
    low = text.lower()
    kerberos = any(mark in low for mark in _KERBEROS_CONTEXT)
    if kerberos and any(mark in low for mark in _KDC_DOWN):
        return "kdc_down"
    for marks, kind in _KINDS:
        if any(mark in low for mark in marks):
            return kind
    return None


def explain(text: str, login: Login, realm: str | None = None) -> KerberosError | None:
    """The one error for a Kerberos failure in what skein's driver said, or None."""
    kind = kind_of(text)
    if kind is None:
        return None
    if kind == "no_ticket" and login.keytab:
        kind = "bad_keys"  # a keytab login that still has no credentials
    return KerberosError(message(kind, login, realm))


def message(kind: str, login: Login, realm: str | None = None) -> str:
    """What to tell the user for one kind of Kerberos failure."""
    who = login.principal or expected_principal(realm)
    if kind == "no_ticket":
        return (
            f"no valid Kerberos ticket: run `kinit {who}` (or pass --principal "
            "USER@REALM --keytab FILE)"
        )
    if kind == "kdc_down":
        how = f"the keytab {login.keytab}" if login.keytab else "your ticket"
        return (
            f"the Kerberos KDC of realm {realm or realm_of(who) or '?'} did not "
            f"answer, so {who} could not log in with {how}. Check that the KDC "
            "named in your krb5.conf (KRB5_CONFIG; Java reads "
            "-Djava.security.krb5.conf in SKEIN_DRIVER_JAVA_OPTIONS) runs and is "
            "reachable (`kinit` fails the same way), or `tfyarn cluster status` "
            "for the local cluster."
        )
    if kind == "not_in_keytab":
        return (
            f"the keytab {login.keytab} holds no key for {login.principal}: "
            f"`klist -k {login.keytab}` lists the principals it has; pass one of "
            "those with --principal, or the keytab made for this principal."
        )
    if kind == "unknown":
        return (
            f"the KDC does not know {who}: check the principal's spelling and "
            "realm (`klist -k KEYTAB` shows the keytab's)."
        )
    # bad_keys: the KDC rejected the keytab's key.
    return (
        f"the KDC refused the key of {who} in {login.keytab}: the keytab is "
        "stale (the principal's password or key version changed) or was made "
        "by another KDC or realm. Get a fresh keytab from your Kerberos "
        f"administrator, and check it with `kinit -kt {login.keytab} {who}`."
    )


def expected_principal(realm: str | None) -> str:
    """The principal a ``kinit`` would most likely need: this user in the realm."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "USER"
    return f"{user}@{realm}" if realm else user


def check(login: Login, conf_dir: str | os.PathLike[str]) -> None:
    """Refuse, before anything starts, a login that cannot work.

    A keytab must be a readable file holding the principal; without one, the
    ticket cache must hold a valid ticket (``klist -s``). Only for a secure
    cluster; without ``klist`` the cache check is left to skein's driver.

    Raises
    ------
    KerberosError
        What is wrong, and the ``kinit`` or option that fixes it.
    """
    if login.keytab:
        check_keytab(login)
    conf = HadoopConf(conf_dir)
    if not conf.is_secure:
        return
    if not login.keytab and not has_ticket():
        raise KerberosError(message("no_ticket", login, conf.realm))


def use_keytab_for_hdfs(login: Login) -> None:
    """Let this process's HDFS client (hdfs-native, GSSAPI) log in from the keytab.

    MIT Kerberos gets initial credentials from ``KRB5_CLIENT_KTNAME`` when the
    cache is empty; a private in-memory cache keeps the user's own untouched.
    For the command line only: it changes this process's environment.
    """
    if login.keytab:
        os.environ["KRB5_CLIENT_KTNAME"] = login.keytab
        os.environ["KRB5CCNAME"] = f"MEMORY:tfyarn-{os.getpid()}"


def check_keytab(login: Login) -> None:
    """The keytab exists, is readable and (if ``klist`` is here) holds the principal."""
    path = Path(login.keytab or "")
    try:
        with path.open("rb"):
            pass
    except FileNotFoundError:
        raise KerberosError(f"keytab not found: {path}") from None
    except IsADirectoryError:
        raise KerberosError(f"keytab {path} is a directory, not a keytab") from None
    except OSError as exc:
        raise KerberosError(
            f"keytab {path} is not readable ({exc.strerror}): "
            f"it must be readable by {expected_principal(None)}"
        ) from None
    principals = keytab_principals(path)
    if principals is not None and login.principal not in principals:
        holds = ", ".join(sorted(principals)) or "no principal (an empty keytab)"
        raise KerberosError(
            f"the keytab {path} holds no key for {login.principal}; it holds "
            f"{holds}. Pass one of those with --principal, or the keytab made "
            f"for {login.principal}."
        )


def keytab_principals(path: Path) -> set[str] | None:
    """The principals a keytab holds (``klist -k``), or None without ``klist``."""
    klist = shutil.which("klist")
    if klist is None:
        return None
    done = subprocess.run(
        [klist, "-k", str(path)],
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    if done.returncode != 0:
        raise KerberosError(
            f"{path} is not a keytab: `klist -k` says {done.stderr.strip()}"
        )
    # "KVNO Principal" table: "   1 nn/localhost@REALM".
    return {
        parts[1]
        for line in done.stdout.splitlines()
        if len(parts := line.split()) == 2 and parts[0].isdigit()
    }
