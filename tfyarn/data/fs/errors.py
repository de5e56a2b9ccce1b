"""HDFS error classes, and the one mapping of client and OS errors to them."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from urllib.parse import urlparse

from tfyarn.contract import hadoop_conf
from tfyarn.data.fs.failover import NameService, describe, what_to_check
from tfyarn.errors import HdfsError


class PathNotFoundError(HdfsError, FileNotFoundError):
    """The path does not exist."""


class HdfsPermissionError(HdfsError, PermissionError):
    """The user may not do this to the path."""


class NameNodeUnreachableError(HdfsError, ConnectionError):
    """The NameNode did not answer (refused, unreachable or timed out)."""


class PathExistsError(HdfsError, FileExistsError):
    """The destination exists and replacing it was not asked for."""


class QuotaExceededError(HdfsError):
    """A directory's HDFS space or name quota is used up."""


class HdfsAuthError(HdfsError, PermissionError):
    """A secure HDFS could not authenticate us: no ticket, no token, no KDC."""


# How hdfs-native (libgssapi_krb5) says it has no credentials, or no KDC.
_NO_CREDENTIALS = (
    "gss_s_no_cred",
    "no kerberos credentials",
    "no credentials were supplied",
    "client cannot authenticate via",
    "ticket expired",
)
_NO_KDC = ("cannot contact any kdc", "cannot find kdc")


_CONNECT_WORDS = (
    "connection refused",
    "connection reset",
    "timed out",
    "no route",
    "unreachable",
    "failed to connect",
    "broken pipe",
    "dns",
    "failed to lookup",
    "name or service not known",
)


def mapped_error(
    op: str,
    url: str,
    exc: BaseException,
    namenode: str | None = None,
    services: tuple[NameService, ...] = (),
) -> HdfsError:
    """Turn a client or OS error into an HdfsError a user can act on.

    Parameters
    ----------
    op, url : str
        What was done to which URL, for the message.
    exc : BaseException
        The client's (or the OS's) error.
    namenode : str, optional
        The client's target, ``scheme://authority``.
    services : tuple of NameService, optional
        The name services the client talks to: a NameNode error then names
        the service, its NameNodes and how to see which is active.
    """
    # NameNode errors arrive with the server's Java stack trace appended: keep
    # the first line, which carries the message.
    text = _first_line(exc)
    low = text.lower()
    cls: type[HdfsError] = HdfsError
    auth = kerberos_message(op, url, low, namenode)
    if auth is not None:
        return HdfsAuthError(auth)
    if (
        isinstance(exc, FileNotFoundError)
        or "filenotfound" in low
        or ("does not exist" in low)
    ):
        cls = PathNotFoundError
        msg = (
            f"{url} does not exist ({op}). Check the path; list the parent with "
            f"`tfyarn data ls {url.rsplit('/', 1)[0] or '/'}`."
        )
    elif (
        isinstance(exc, PermissionError)
        or "permission denied" in low
        or ("accesscontrolexception" in low)
    ):
        cls = HdfsPermissionError
        user = os.environ.get("HADOOP_USER_NAME") or _local_user()
        msg = (
            f"permission denied for {op} on {url} as user {user!r}: {text}. "
            "Ask the owner to grant access (hdfs dfs -chmod/-chown/-setfacl) "
            "or run as a user who has it (HADOOP_USER_NAME without Kerberos)."
        )
    elif "quotaexceeded" in low:
        cls = QuotaExceededError
        kind = "name (file count)" if "nsquota" in low else "space"
        msg = (
            f"the HDFS {kind} quota is used up: {op} of {url} was refused ({text}). "
            "Free room under that directory, write elsewhere, or ask an HDFS "
            "administrator for more (hdfs dfs -count -q -h DIR shows the quota)."
        )
    elif isinstance(exc, FileExistsError) or "already exists" in low:
        cls = PathExistsError
        msg = f"{url} already exists ({op}): {text}"
    elif services and (_STANDBY in low or _is_connect_error(exc, low)):
        cls = NameNodeUnreachableError
        msg = (
            f"no NameNode of {describe(services)} served {op} of {url}: "
            f"{'all are standby' if _STANDBY in low else 'none could be reached'} "
            f"({text}). {what_to_check(services)}."
        )
    elif _STANDBY in low:
        cls = NameNodeUnreachableError
        msg = (
            f"{namenode or 'the NameNode'} is a standby NameNode, which serves "
            f"no {op} of {url} ({text}). Name the HA name service instead "
            "(hdfs://<nameservice>/..., dfs.nameservices in hdfs-site.xml) so "
            "the client finds the active NameNode, or check which is active "
            "with `hdfs haadmin -getAllServiceState`."
        )
    elif _is_connect_error(exc, low):
        cls = NameNodeUnreachableError
        where = namenode or "the NameNode"
        msg = (
            f"cannot reach {where} for {op} of {url}: {text}. Check the host and "
            "port in the URL or fs.defaultFS in $HADOOP_CONF_DIR/core-site.xml, "
            "and that HDFS is running (`tfyarn cluster status` for the local "
            "cluster)."
        )
    else:
        msg = f"HDFS {op} of {url} failed: {type(exc).__name__}: {text}"
    return cls(msg)


# A NameNode that is not active refuses every call with this.
_STANDBY = "standbyexception"


def _is_connect_error(exc: BaseException, low: str) -> bool:
    return isinstance(exc, ConnectionError) or any(w in low for w in _CONNECT_WORDS)


def kerberos_message(
    op: str, url: str, low: str, namenode: str | None = None
) -> str | None:
    """One line for a GSSAPI failure in ``low`` (a lowercased message), or None.

    In a YARN container (``HADOOP_TOKEN_FILE_LOCATION`` set) there is no
    ticket by design: only the delegation tokens obtained at submission, for
    fs.defaultFS and ``hdfs_namenodes``, matched by the exact ``ip:port``
    (``ha-hdfs:<name service>`` for an HA name service).
    """
    where = namenode or "HDFS"
    if any(mark in low for mark in _NO_KDC):
        return (
            f"HDFS {op} of {url}: the Kerberos KDC did not answer, so no ticket "
            f"for {where} could be had. Check that the KDC in your krb5.conf "
            "(KRB5_CONFIG) runs and is reachable (`kinit` fails the same way)."
        )
    if not any(mark in low for mark in _NO_CREDENTIALS):
        return None
    token_file = os.environ.get("HADOOP_TOKEN_FILE_LOCATION")
    ended = _token_ended(token_file, namenode) if token_file else None
    if ended is not None:
        named = where if urlparse(where).netloc else "fs.defaultFS"
        return (
            f"HDFS {op} of {url}: the HDFS delegation token for {named} was "
            f"refused: it expired ({ended}), and containers have no Kerberos "
            "ticket to get another. Submit jobs longer than the tokens' "
            "lifetime with --principal USER@REALM --keytab FILE: the master "
            "then fetches fresh tokens for every task."
        )
    if token_file:
        return (
            f"HDFS {op} of {url}: no delegation token for {where} in this "
            "container, and containers have no Kerberos ticket: name that "
            "NameNode at submission (--hdfs_namenodes hdfs://HOST:PORT, or "
            "hdfs://NAMESERVICE for an HA pair) so its token is obtained with "
            "the job's."
        )
    return (
        f"HDFS {op} of {url}: no valid Kerberos ticket for {where}: run "
        f"`kinit{_principal_hint()}`, then retry."
    )


def _token_ended(token_file: str, namenode: str | None) -> str | None:
    """When this container's token for ``namenode`` ended, if it has one.

    Its maximum date if that has passed, else "renewal ended": a token that
    exists and is refused has expired (or was cancelled).
    """
    import time

    from tfyarn.contract.tokens import (
        HDFS_KIND,
        TokenFile,
        TokenFileError,
        dates,
        usable_until,
    )

    target = urlparse(namenode or "")
    service = target.netloc
    if target.scheme == "hdfs" and service and ":" not in service:
        # Hadoop names an HA name service's token ha-hdfs:<name service>.
        service = f"ha-hdfs:{service}"
    try:
        found = TokenFile.read(token_file).of_kind(HDFS_KIND)
    except (OSError, TokenFileError):
        return None
    mine = [t for t in found if not service or t.service == service]
    if not mine:
        return None
    # A client ignores a token near its maximum date (CLIENT_SLACK_S).
    ends = [usable_until(d) for t in mine if (d := dates(t)) is not None]
    if ends and min(ends) <= time.time():
        when = time.strftime("%H:%M:%S UTC", time.gmtime(min(ends)))
        return f"its maximum lifetime ended at {when}"
    return "its renewal lapsed, or it was cancelled"


def _principal_hint() -> str:
    """`` user@REALM`` for the kinit hint, the realm the cluster's principals name."""
    conf = hadoop_conf.current()
    try:
        realm = conf.realm if conf is not None else None
    except hadoop_conf.HadoopConfError:
        return ""  # a hint is not worth a second error
    return f" {_local_user()}@{realm}" if realm else ""


@contextlib.contextmanager
def conf_errors() -> Iterator[None]:
    """A Hadoop configuration file that cannot be read becomes an HdfsError.

    Everything the data layer raises on purpose is one; the message already
    names the file and what to do.
    """
    try:
        yield
    except hadoop_conf.HadoopConfError as exc:
        raise HdfsError(str(exc)) from None


_RPC_ERROR = re.compile(r'^RPCError\("([\w.$]+)", "(.*)', re.DOTALL)


def rpc_error(exc: BaseException) -> tuple[str, str] | None:
    """The Java class and message of a NameNode's refusal, or None.

    hdfs-native 0.14 raises them as ``RuntimeError('RPCError("<java class>",
    "<message>\\n\\tat ...")')`` (the repr, escapes and all); some builds
    give the class and message as two arguments.

    Examples
    --------
    >>> rpc_error(RuntimeError('RPCError("org.apache.hadoop.ipc.StandbyException", "no")'))
    ('org.apache.hadoop.ipc.StandbyException', 'no')
    >>> rpc_error(OSError("RPC listener disconnected")) is None
    True
    """
    args = [a for a in exc.args if isinstance(a, str)]
    if len(args) >= 2 and args[0].startswith(("org.", "java.")):
        return args[0], args[1]
    m = _RPC_ERROR.match(str(exc).strip())
    return None if m is None else (m.group(1), m.group(2).removesuffix('")'))


def _first_line(exc: BaseException) -> str:
    """The message of a client error without the server's stack trace: the
    Java class's short name and the message's first line."""
    found = rpc_error(exc)
    if found is None:
        return str(exc).strip().split("\n", 1)[0].strip()
    java_class, message = found[0], found[1].replace('\\"', '"')
    message = message.replace("\\n", "\n").strip().split("\n", 1)[0].strip()
    return f"{java_class.rsplit('.', 1)[-1]}: {message}"


def _local_user() -> str:
    try:
        import getpass

        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for the uid in a container
        return "?"
