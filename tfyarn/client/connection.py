"""The YARN boundary: which cluster, one skein driver, and skein's errors mapped once.

Built on skein's client, which talks to YARN through a small Java driver that
it starts on first use (a few seconds). Each public call opens its own driver
unless given one with ``client=`` (see :func:`connect`).

Which cluster: ``$HADOOP_CONF_DIR`` if set, else the local cluster started by
``tfyarn cluster start`` if it is running.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tfyarn.errors import ClusterError, SpecError, TfyarnError

TAG = "tfyarn"  # every tfyarn application carries this YARN tag
_APP_ID = re.compile(r"^application_\d+_\d+$")
# YARN's application states.
ACTIVE = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")
DONE = ("FINISHED", "FAILED", "KILLED")
NO_CLUSTER = (
    "no YARN cluster: run `tfyarn cluster start` or set HADOOP_CONF_DIR "
    "(and put the `yarn` command on PATH)"
)


def use_cluster() -> None:
    """Point this process (and the skein driver it starts) at the cluster.

    ``$HADOOP_CONF_DIR`` wins (a real cluster); otherwise the local cluster of
    ``tfyarn cluster start``, if it is running, is put into ``os.environ``.

    Raises
    ------
    ClusterError
        Neither is available.
    """
    if os.environ.get("HADOOP_CONF_DIR"):
        return
    from tfyarn.cluster import use_local_cluster

    try:
        use_local_cluster()
    except ClusterError:
        raise ClusterError(NO_CLUSTER) from None


def connect() -> Any:
    """Open a skein client (and its Java driver) to the cluster.

    Returns
    -------
    skein.Client
        Close it when done (it is a context manager).

    Raises
    ------
    TfyarnError
        No cluster can be found, or the driver could not start.

    Examples
    --------
    >>> with tfyarn.connect() as yarn:                    # doctest: +SKIP
    ...     app_id = tfyarn.submit("train.py", num_worker=2, client=yarn)
    ...     tfyarn.wait(app_id, client=yarn)
    """
    import skein

    use_cluster()
    log_dir = Path(tempfile.gettempdir()) / f"tfyarn-{os.getuid()}"
    log_dir.mkdir(parents=True, exist_ok=True)
    log = log_dir / "skein-driver.log"
    try:
        return skein.Client(log=str(log), log_level="warn")
    except FileNotFoundError as exc:  # `yarn` not on PATH
        raise ClusterError(f"{NO_CLUSTER} ({exc.filename or exc} not found)") from None
    except subprocess.CalledProcessError as exc:
        raise TfyarnError(
            f"`yarn classpath --glob` failed with exit code {exc.returncode}; "
            "check the Hadoop installation behind the `yarn` command"
        ) from None
    except skein.exceptions.SkeinError as exc:
        raise TfyarnError(
            f"could not start skein's YARN driver: {exc}; its log is {log}"
        ) from None


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
    that can only mean "no such application".
    """
    import skein

    try:
        yield
    except TfyarnError:
        raise  # already says what to do (SpecError is also a ValueError)
    except (ValueError, KeyError) as exc:
        if app_id:
            raise TfyarnError(
                f"no application {app_id} on this cluster ({_first_line(exc)}); "
                "`tfyarn list --all` shows the known ones"
            ) from None
        raise TfyarnError(f"YARN refused the request: {_first_line(exc)}") from None
    except skein.exceptions.ConnectionError as exc:
        raise TfyarnError(
            f"lost skein's YARN driver ({_first_line(exc)}); try again"
        ) from None
    except skein.exceptions.SkeinError as exc:
        raise TfyarnError(f"YARN refused the request: {_first_line(exc)}") from None


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


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    # KeyError's str() is the repr of its argument.
    if isinstance(exc, KeyError) and exc.args:
        text = str(exc.args[0]).strip()
    return text.splitlines()[0] if text else repr(exc)
