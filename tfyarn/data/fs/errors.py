"""HDFS error classes, and the one mapping of client and OS errors to them."""

from __future__ import annotations

import os
import re

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
    op: str, url: str, exc: BaseException, namenode: str | None = None
) -> HdfsError:
    """Turn a client or OS error into an HdfsError a user can act on."""
    # NameNode errors arrive with the server's Java stack trace appended: keep
    # the first line, which carries the message.
    text = _first_line(exc)
    low = text.lower()
    cls: type[HdfsError] = HdfsError
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
    elif isinstance(exc, ConnectionError) or any(w in low for w in _CONNECT_WORDS):
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


_RPC_ERROR = re.compile(r'^RPCError\("([\w.$]+)", "(.*)', re.DOTALL)


def _first_line(exc: BaseException) -> str:
    """The message of a client error without the server's stack trace.

    hdfs-native reports NameNode errors as ``RPCError("<java class>",
    "<message>\\n\\tat ...")`` (the repr, escapes and all): keep the class's
    short name and the message's first line.
    """
    args = [a for a in exc.args if isinstance(a, str)]
    if len(args) >= 2 and args[0].startswith(("org.", "java.")):
        java_class, message = args[0], args[1]
    else:
        text = str(exc).strip()
        m = _RPC_ERROR.match(text)
        if m is None:
            return text.split("\n", 1)[0].strip()
        java_class, message = m.group(1), m.group(2).replace('\\"', '"')
    message = message.replace("\\n", "\n").strip().split("\n", 1)[0].strip()
    return f"{java_class.rsplit('.', 1)[-1]}: {message}"


def _local_user() -> str:
    try:
        import getpass

        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for the uid in a container
        return "?"
