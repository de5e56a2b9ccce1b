"""The YARN boundary: one skein driver, logged in, to the cluster.

Built on skein's client, which talks to YARN through a small Java driver that
it starts on first use (a few seconds). Each public call opens its own driver
unless given one with ``client=`` (see :func:`connect`).

The rest of the boundary lives in modules named for what they answer, and
their public names are re-exported here for callers:

- which cluster, its configuration checked: :mod:`tfyarn.client.which_cluster`
  (every driver reads that configuration with bounded retries,
  :mod:`tfyarn.client.hadoop_conf`, so an unreachable ResourceManager is
  reported after ``$TFYARN_YARN_TIMEOUT``, 20 s, instead of hanging);
- whether the ResourceManager (or a NameNode) answers:
  :mod:`tfyarn.client.reachability`;
- what YARN's answers mean, in words: :mod:`tfyarn.client.yarn_answers`;
- application ids and states: :mod:`tfyarn.client.applications`;
- the last driver's log and login: :mod:`tfyarn.client.last_driver`.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from typing import Any

from tfyarn.client import kerberos, last_driver
from tfyarn.client.applications import (
    ACTIVE,
    DONE,
    TAG,
    UnknownApplicationError,
    app_order,
    check_app_id,
    no_application,
)
from tfyarn.client.kerberos import Login
from tfyarn.client.reachability import (
    PROBE_TIMEOUT_S,
    YarnUnreachableError,
    rm_accepts_connections,
    unreachable,
    unreachable_rm_notice,
)
from tfyarn.client.which_cluster import NO_CLUSTER, conf_dir, java_environ, use_cluster
from tfyarn.client.yarn_answers import ask, cause, yarn_errors
from tfyarn.contract.hadoop_conf import HadoopConf
from tfyarn.errors import ClusterError, TfyarnError

__all__ = [
    "ACTIVE",
    "DONE",
    "NO_CLUSTER",
    "PROBE_TIMEOUT_S",
    "TAG",
    "UnknownApplicationError",
    "YarnUnreachableError",
    "app_order",
    "ask",
    "cause",
    "check_app_id",
    "check_login",
    "connect",
    "java_environ",
    "last_login",
    "login_as",
    "no_application",
    "opened",
    "rm_accepts_connections",
    "unreachable",
    "unreachable_rm_notice",
    "use_cluster",
    "yarn_errors",
]

# The login asked for by the command running (see login_as).
_requested: Login | None = None


def connect(login: Login | None = None) -> Any:
    """Open a skein client (and its Java driver) to the cluster.

    On a secure cluster the driver logs in as ``login`` (a principal and
    keytab), by default the one of the enclosing :func:`login_as`, else the
    ``principal``/``keytab`` of the user's config, and with neither from the
    ticket cache; a login that cannot work is refused
    before the driver starts (:func:`tfyarn.client.kerberos.check`).

    Returns
    -------
    skein.Client
        Close it when done (it is a context manager).

    Raises
    ------
    TfyarnError
        No cluster can be found, or the driver could not start.
    KerberosError
        A secure cluster, and no valid ticket, a wrong keytab or no KDC.

    Examples
    --------
    >>> with tfyarn.connect() as yarn:                    # doctest: +SKIP
    ...     app_id = tfyarn.submit("train.py", num_worker=2, client=yarn)
    ...     tfyarn.wait(app_id, client=yarn)
    """
    import skein

    login = check_login(login if login is not None else _requested)
    conf = HadoopConf(conf_dir())
    log = last_driver.log_path()
    log.parent.mkdir(parents=True, exist_ok=True)
    last_driver.forget_old_logs(log.parent)
    # skein's Client.__del__ calls close(), which fails on an instance whose
    # __init__ raised (no _proc yet) and prints "Exception ignored in ...":
    # build it in two steps so a failed one can be disarmed.
    client = skein.Client.__new__(skein.Client)
    try:
        try:
            with _environ(java_environ()):
                client.__init__(
                    log=str(log),
                    log_level="warn",
                    principal=login.principal,
                    keytab=login.keytab,
                )
        except BaseException:
            client._proc = None  # skein already stopped its driver if it had one
            raise
    except FileNotFoundError as exc:  # `yarn` not on PATH
        raise ClusterError(f"{NO_CLUSTER} ({exc.filename or exc} not found)") from None
    except subprocess.CalledProcessError as exc:
        raise TfyarnError(
            f"`yarn classpath --glob` failed with exit code {exc.returncode}; "
            "check the Hadoop installation behind the `yarn` command"
        ) from None
    except skein.exceptions.SkeinError as exc:
        # A failed keytab login ends the driver; only its log says why.
        said = f"{exc}\n{last_driver.tail(log)}"
        found = kerberos.explain(said, login, conf.realm)
        if found is not None:
            raise found from None
        raise TfyarnError(
            f"could not start skein's YARN driver: {exc}; its log is {log}"
        ) from None
    return client


def check_login(login: Login | None = None) -> Login:
    """Find the cluster and refuse a Kerberos login that cannot work; the login.

    :func:`connect` calls it; so do commands that start another Java client
    first (``yarn logs``), which would take ~20 s to fail without a ticket.
    ``login`` defaults to the ``principal``/``keytab`` of the user's config.

    Raises
    ------
    ClusterError
        No cluster (see :func:`use_cluster`).
    KerberosError
        A secure cluster and no valid ticket, or a keytab that is missing,
        unreadable or without the principal.
    """
    use_cluster()
    login = login if login is not None else _configured_login()
    kerberos.check(login, conf_dir())
    last_driver.remember(login)
    return login


def last_login() -> Login:
    """The login of the last :func:`connect` (or :func:`check_login`)."""
    return last_driver.login()


def _configured_login() -> Login:
    """The principal/keytab of the user's config file, if any (client-only keys)."""
    from tfyarn.client import config

    return config.client_options(config.load()).login


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    """``os.environ`` = ``env`` inside the block: skein's driver inherits it."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@contextlib.contextmanager
def login_as(login: Login) -> Iterator[None]:
    """Every :func:`connect` inside the block logs in as ``login``.

    How ``submit``'s ``--principal``/``--keytab`` reach the driver without
    every caller on the way passing them.
    """
    global _requested
    saved, _requested = _requested, login
    try:
        yield
    finally:
        _requested = saved


@contextlib.contextmanager
def opened(client: Any | None) -> Iterator[Any]:
    """``client`` itself, or a new one (see :func:`connect`) closed on exit."""
    if client is not None:
        yield client
        return
    own = connect()
    try:
        yield own
    finally:
        own.close()
