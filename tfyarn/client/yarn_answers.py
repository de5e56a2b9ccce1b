"""What YARN's answers mean, in words a user can act on: skein's errors mapped once.

skein's ``_ClientBase._call`` maps its driver's gRPC status codes to
exceptions: INVALID_ARGUMENT and FAILED_PRECONDITION to :class:`ValueError`,
NOT_FOUND to :class:`KeyError`, an unreachable driver to
``skein.exceptions.ConnectionError``. :func:`yarn_errors` turns each into a
message naming what went wrong (no such application, no ResourceManager, a
refused Kerberos login, YARN's own reason without Java's noise).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from tfyarn.client import kerberos, last_driver
from tfyarn.client.applications import UnknownApplicationError, no_application
from tfyarn.client.reachability import rm_accepts_connections, unreachable
from tfyarn.contract.hadoop_conf import HadoopConf, explicit_conf_dir
from tfyarn.errors import TfyarnError

T = TypeVar("T")
# What a driver's exception says when it could not reach the ResourceManager.
_UNREACHABLE = (
    "ConnectException",
    "Connection refused",
    "failed on connection exception",
    "UnknownHostException",
    "NoRouteToHostException",
    "ConnectTimeoutException",
    "SocketTimeoutException",
)
# Java exception class names YARN prefixes to its messages ("org.apache...: ").
_JAVA_PREFIX = re.compile(r"^(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error): ")
# Hadoop's pointer to its wiki after a connection error: noise in a message.
_WIKI = re.compile(r";?\s*For more details see:\s+\S+")
# A driver's "Unknown ApplicationId" this soon came from a ResourceManager that
# answered; one that cannot be reached makes the driver retry for
# TFYARN_YARN_TIMEOUT first, so only a slower answer may mean "unreachable".
_ANSWERED_WITHIN_S = 1.0


class _LateAnswer(UnknownApplicationError):
    """An "unknown application" after a search for the ResourceManager: ask again.

    The driver answers so for any failed call, also when it gave up finding
    an active ResourceManager; one that listens now (a standby listens for
    clients only once it has taken over and recovered its applications) will
    say for sure. :func:`ask` asks it; elsewhere this is an unknown application.
    """


@contextlib.contextmanager
def yarn_errors(app_id: str | None = None) -> Iterator[None]:
    """Turn what skein raises into messages a user can act on; the one place.

    For an application id YARN does not know (or that is not a skein
    application), skein 0.8.2's driver answers INVALID_ARGUMENT, so
    ``application_report`` and ``kill_application`` raise :class:`ValueError`;
    ``app_id`` has passed :func:`~tfyarn.client.applications.check_app_id` by
    then, so that can only mean "no such application" when the
    ResourceManager answered. The driver says the same when it could not
    reach the ResourceManager (down or restarting) after retrying for
    ``$TFYARN_YARN_TIMEOUT``: an answer that slow, with no ResourceManager
    accepting a connection, is reported as unreachable instead.
    """
    import skein

    began = time.monotonic()
    try:
        yield
    except TfyarnError:
        raise  # already says what to do (SpecError is also a ValueError)
    except (ValueError, KeyError) as exc:
        # skein's driver answers "Unknown ApplicationId" also when the
        # ResourceManager refused its Kerberos login; only its log tells.
        found = _kerberos_failure(last_driver.tail(last_driver.log_path()))
        if found is not None:
            raise found from None
        # ... and when it could not reach the ResourceManager at all (down,
        # or restarting), after retrying for the bound: nothing listens then.
        slow = time.monotonic() - began >= _ANSWERED_WITHIN_S
        if slow and not rm_accepts_connections():
            raise unreachable("no ResourceManager accepts connections") from None
        if slow and app_id:
            # One accepts now: it may have taken over after the driver gave up.
            raise _LateAnswer(str(no_application(app_id, cause(exc)))) from None
        if app_id:
            raise no_application(app_id, cause(exc)) from None
        raise TfyarnError(f"YARN refused the request: {cause(exc)}") from None
    except skein.exceptions.ConnectionError as exc:
        raise TfyarnError(
            f"lost skein's YARN driver ({cause(exc)}); try again"
        ) from None
    except skein.exceptions.SkeinError as exc:
        # Before the connection words: a KDC that refuses reads "Connection refused".
        found = _kerberos_failure(str(exc))
        if found is not None:
            raise found from None
        if any(mark in str(exc) for mark in _UNREACHABLE):
            raise unreachable(cause(exc)) from None
        raise TfyarnError(f"YARN refused the request: {cause(exc)}") from None


def ask(app_id: str, call: Callable[[], T]) -> T:
    """``call()``, a request about ``app_id``, under :func:`yarn_errors`.

    Asked a second time when the first "unknown application" came only after
    the driver had searched for a ResourceManager (a takeover under way): the
    one that answers now knows.
    """
    try:
        with yarn_errors(app_id):
            return call()
    except _LateAnswer:
        pass
    with yarn_errors(app_id):
        return call()


def _kerberos_failure(said: str) -> kerberos.KerberosError | None:
    """The Kerberos error in what the driver said, for the last login, or None."""
    conf_dir = explicit_conf_dir()
    conf = HadoopConf(conf_dir) if conf_dir else None
    if conf is None or not conf.is_secure:
        return None
    return kerberos.explain(said, last_driver.login(), conf.realm)


def cause(exc: BaseException, *, max_lines: int = 3) -> str:
    """What an exception from skein says, on one line, without Java noise.

    skein's driver answers "Failed to submit application, exception:" and the
    Java message on the next lines, where YARN's reason is; keep both, drop
    stack frames and Java class-name prefixes.
    """
    text = str(exc).strip()
    # KeyError's str() is the repr of its argument.
    if isinstance(exc, KeyError) and exc.args:
        text = str(exc.args[0]).strip()
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("at ", "...")):
            continue  # a Java stack frame
        line = _JAVA_PREFIX.sub("", line.removeprefix("Caused by: "))
        line = _WIKI.sub("", line).strip()
        if line.endswith("exception:"):
            line = line[: -len("exception:")].rstrip(" ,")
        if line not in lines:
            lines.append(line)
    return ": ".join(lines[:max_lines]) if lines else repr(exc)
