"""The YARN boundary: which cluster, one skein driver, and skein's errors mapped once.

Built on skein's client, which talks to YARN through a small Java driver that
it starts on first use (a few seconds). Each public call opens its own driver
unless given one with ``client=`` (see :func:`connect`).

Which cluster: ``$HADOOP_CONF_DIR`` if set (and holding a client
configuration), else the local cluster started by ``tfyarn cluster start`` if it
is running. Every driver reads that configuration with bounded retries
(:mod:`tfyarn.client.hadoop_conf`), so an unreachable ResourceManager is
reported after ``$TFYARN_YARN_TIMEOUT`` (20 s) instead of hanging.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from tfyarn.client import hadoop_conf, kerberos
from tfyarn.client.kerberos import Login
from tfyarn.contract.hadoop_conf import (
    CONF_DIR_ENV,
    RM_PORT,
    HadoopConf,
    NameNode,
    check_conf_dir,
)
from tfyarn.errors import ClusterError, SpecError, TfyarnError

T = TypeVar("T")
TAG = "tfyarn"  # every tfyarn application carries this YARN tag
_APP_ID = re.compile(r"^application_\d+_\d+$")
# YARN's application states.
ACTIVE = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")
DONE = ("FINISHED", "FAILED", "KILLED")
NO_CLUSTER = (
    "no YARN cluster: run `tfyarn cluster start` or set HADOOP_CONF_DIR "
    "(and put the `yarn` command on PATH)"
)
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
# "Call From vm/127.0.0.1 to localhost:1 failed on connection exception".
_CALLED = re.compile(r"\bto ([\w.\-]+):(\d+) failed on\b")
# Hadoop's pointer to its wiki after a connection error: noise in a message.
_WIKI = re.compile(r";?\s*For more details see:\s+\S+")
# A driver's "Unknown ApplicationId" this soon came from a ResourceManager that
# answered; one that cannot be reached makes the driver retry for
# TFYARN_YARN_TIMEOUT first, so only a slower answer may mean "unreachable".
_ANSWERED_WITHIN_S = 1.0
# How long to wait for a ResourceManager to accept a connection.
PROBE_TIMEOUT_S = 3.0
# The login of the last driver started, so yarn_errors can name it.
_login = Login()
# The login asked for by the command running (see login_as).
_requested: Login | None = None


class YarnUnreachableError(TfyarnError, ConnectionError):
    """The ResourceManager could not be reached within the bound."""


class UnknownApplicationError(TfyarnError, LookupError):
    """The cluster knows no application of that id."""


class _LateAnswer(UnknownApplicationError):
    """An "unknown application" after a search for the ResourceManager: ask again.

    The driver answers so for any failed call, also when it gave up finding
    an active ResourceManager; one that listens now (a standby listens for
    clients only once it has taken over and recovered its applications) will
    say for sure. :func:`ask` asks it; elsewhere this is an unknown application.
    """


def no_application(app_id: str, detail: str = "") -> UnknownApplicationError:
    """The one message for an application id the cluster does not know.

    ``tfyarn status``, ``kill`` and ``logs`` all raise it, whichever of YARN's
    interfaces noticed.
    """
    why = f" ({detail})" if detail else ""
    return UnknownApplicationError(
        f"no application {app_id} on this cluster{why}; "
        "`tfyarn list --all` shows the known ones"
    )


def use_cluster() -> None:
    """Point this process (and the skein driver it starts) at the cluster.

    ``$HADOOP_CONF_DIR`` wins (a real cluster); otherwise the local cluster of
    ``tfyarn cluster start``, if it is running, is put into ``os.environ``.

    Raises
    ------
    ClusterError
        Neither is available, or ``$HADOOP_CONF_DIR`` is missing, empty or
        lacks ``core-site.xml``/``yarn-site.xml`` (Hadoop would silently use
        its defaults: a ResourceManager on 0.0.0.0).
    """
    conf_dir = os.environ.get(CONF_DIR_ENV)
    if conf_dir:
        check_conf_dir(conf_dir)
        return
    from tfyarn.cluster import use_local_cluster

    try:
        use_local_cluster()
    except ClusterError:
        raise ClusterError(NO_CLUSTER) from None
    conf_dir = os.environ.get(CONF_DIR_ENV)
    if not conf_dir:  # no local cluster running
        raise ClusterError(NO_CLUSTER)
    check_conf_dir(conf_dir)


def java_environ() -> dict[str, str]:
    """The environment for a Java YARN client: ours, reading the bounded config.

    Call after :func:`use_cluster`.
    """
    conf_dir = os.environ.get(CONF_DIR_ENV)
    if not conf_dir:
        return dict(os.environ)
    bounded = hadoop_conf.bounded_conf_dir(conf_dir, hadoop_conf.yarn_timeout())
    return {**os.environ, CONF_DIR_ENV: str(bounded)}


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
    conf = HadoopConf(os.environ[CONF_DIR_ENV])
    log = _driver_log()
    log.parent.mkdir(parents=True, exist_ok=True)
    _forget_old_logs(log.parent)
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
        said = f"{exc}\n{_tail(log)}"
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
    global _login
    use_cluster()
    login = login if login is not None else _configured_login()
    kerberos.check(login, os.environ[CONF_DIR_ENV])
    _login = login
    return login


def last_login() -> Login:
    """The login of the last :func:`connect` (or :func:`check_login`)."""
    return _login


def _configured_login() -> Login:
    """The principal/keytab of the user's config file, if any (client-only keys)."""
    from tfyarn.client import config

    return config.client_options(config.load()).login


def _driver_log() -> Path:
    """This process's skein driver log (skein truncates it at each start).

    One per process: the Kerberos mapping reads it, and a shared file is
    overwritten by any other tfyarn command starting meanwhile.
    """
    directory = Path(tempfile.gettempdir()) / f"tfyarn-{os.getuid()}"
    return directory / f"skein-driver-{os.getpid()}.log"


def _forget_old_logs(directory: Path) -> None:
    """Delete the driver logs of processes that ended (kept while they run)."""
    for log in directory.glob("skein-driver-*.log"):
        pid = log.stem.rpartition("-")[2]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            log.unlink(missing_ok=True)


def _tail(path: Path, size: int = 8000) -> str:
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - size))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


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


@contextlib.contextmanager
def yarn_errors(app_id: str | None = None) -> Iterator[None]:
    """Turn what skein raises into messages a user can act on; the one place.

    skein's ``_ClientBase._call`` maps its driver's gRPC status codes to
    exceptions: INVALID_ARGUMENT and FAILED_PRECONDITION to :class:`ValueError`,
    NOT_FOUND to :class:`KeyError`, an unreachable driver to
    ``skein.exceptions.ConnectionError``. For an application id YARN does not
    know (or that is not a skein application), skein 0.8.2's driver answers
    INVALID_ARGUMENT, so ``application_report`` and ``kill_application`` raise
    :class:`ValueError`; ``app_id`` has passed :func:`check_app_id` by then, so
    that can only mean "no such application" when the ResourceManager
    answered. The driver says the same when it could not reach the
    ResourceManager (down or restarting) after retrying for
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
        found = _kerberos_failure(_tail(_driver_log()))
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


def unreachable_rm_notice() -> str | None:
    """A line for a person when no ResourceManager accepts connections now.

    Said before a command's YARN call, which then looks for one for
    ``$TFYARN_YARN_TIMEOUT``: during a restart or a takeover, silence for that
    long reads as a hang. None when one accepts, or no cluster is configured
    or no ``yarn`` command found (the call itself then says so, at once).
    """
    if shutil.which("yarn") is None:
        return None
    try:
        use_cluster()  # sets $HADOOP_CONF_DIR, or raises
        addresses = HadoopConf(os.environ[CONF_DIR_ENV]).rm_addresses
    except ClusterError:
        return None
    if _any_accepts(addresses, PROBE_TIMEOUT_S):
        return None
    return (
        f"no ResourceManager accepts connections at {', '.join(addresses)} "
        "(restarting, or one taking over?); trying for up to "
        f"{hadoop_conf.yarn_timeout():.0f} s ({hadoop_conf.TIMEOUT_ENV}) ..."
    )


def rm_accepts_connections(timeout: float = PROBE_TIMEOUT_S) -> bool:
    """Whether a ResourceManager of ``$HADOOP_CONF_DIR`` accepts a TCP connection.

    True when there is no configuration to tell (nothing to contradict).
    """
    conf_dir = os.environ.get(CONF_DIR_ENV)
    if not conf_dir:
        return True
    try:
        addresses = HadoopConf(conf_dir).rm_addresses
    except ClusterError:
        return True
    return _any_accepts(addresses, timeout)


def _any_accepts(addresses: list[str], timeout: float) -> bool:
    """Whether any ``host:port`` of ``addresses`` accepts a TCP connection."""
    for address in addresses:
        host, _, port = address.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=timeout):
                return True
        except (OSError, ValueError):
            continue
    return False


def _kerberos_failure(said: str) -> kerberos.KerberosError | None:
    """The Kerberos error in what the driver said, for the last login, or None."""
    conf_dir = os.environ.get(CONF_DIR_ENV)
    conf = HadoopConf(conf_dir) if conf_dir else None
    if conf is None or not conf.is_secure:
        return None
    return kerberos.explain(said, _login, conf.realm)


def _name_service_of(conf_dir: str, address: str) -> tuple[str, list[NameNode]] | None:
    """The HA name service of ``conf_dir`` that ``address`` is a NameNode of.

    With HA, fs.defaultFS names the service (``hdfs://ns1``), not an address:
    the address Hadoop's message names is in hdfs-site.xml.
    """
    if not conf_dir:
        return None
    try:
        services = HadoopConf(conf_dir).name_services
    except ClusterError:
        return None  # a hint is not worth a second error
    for name, nodes in services.items():
        if any(n.address == address for n in nodes):
            return name, nodes
    return None


def unreachable(detail: str) -> TfyarnError:
    """The error for a Hadoop service that did not answer, naming where it was sought.

    Hadoop's message names the address it called ("Call From h to rm:8032
    failed on connection exception"): the ResourceManager, or, while skein's
    driver uploads a job's files, the HDFS NameNode.
    """
    conf_dir = os.environ.get(CONF_DIR_ENV, "")
    addresses = (
        HadoopConf(conf_dir).rm_addresses if conf_dir else [f"0.0.0.0:{RM_PORT}"]
    )
    timeout = hadoop_conf.yarn_timeout()
    called = _CALLED.search(detail)
    rm_ports = {a.rpartition(":")[2] for a in addresses}
    if called and called.group(2) not in rm_ports:
        address = f"{called.group(1)}:{called.group(2)}"
        service = _name_service_of(conf_dir, address)
        if service is not None:
            hdfs_site = Path(conf_dir) / "hdfs-site.xml"
            nodes = ", ".join(f"{n.id} at {n.address}" for n in service[1])
            return TfyarnError(
                f"could not reach {address} ({detail}), a NameNode of the HDFS "
                f"name service {service[0]} ({nodes}; {hdfs_site}). Check which "
                f"NameNode is active with `hdfs haadmin -ns {service[0]} "
                "-getAllServiceState` and that `hdfs dfs -ls /` works"
            )
        core_site = Path(conf_dir or "$HADOOP_CONF_DIR") / "core-site.xml"
        return TfyarnError(
            f"could not reach {address} ({detail}). If that is the HDFS "
            f"NameNode (fs.defaultFS in {core_site}), check that it runs and "
            "that `hdfs dfs -ls /` works"
        )
    return YarnUnreachableError(
        f"could not reach the YARN ResourceManager at {', '.join(addresses)} "
        f"({detail}; gave up after retrying for about {timeout:.0f} s). Check "
        f"that the ResourceManager runs and that yarn.resourcemanager.address in "
        f"{Path(conf_dir or '$HADOOP_CONF_DIR') / 'yarn-site.xml'} names it; "
        f"{hadoop_conf.TIMEOUT_ENV}=SECONDS waits longer"
    )


def check_app_id(app_id: str) -> str:
    """``app_id`` stripped, or a :class:`SpecError` naming the expected form."""
    app_id = app_id.strip()
    if not _APP_ID.match(app_id):
        raise SpecError(
            f"expected an application id like application_1700000000000_0001, "
            f"got {app_id!r}"
        )
    return app_id


def app_order(app_id: str) -> tuple[int, int]:
    """Sort key: cluster start time, then sequence number."""
    _, ts, seq = app_id.split("_")
    return int(ts), int(seq)


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
