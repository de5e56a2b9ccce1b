"""Namespace calls lost in a NameNode failover, made good.

When the active NameNode dies after a call that changes the namespace left
the client (mkdirs, delete, rename, create, addBlock, complete), nobody knows
whether it was applied. Hadoop's Java client sends it again, and the NameNode
that took over answers the resent call from its retry cache (the standby
rebuilds that cache from the edit log). hdfs-native sends a retry from a new
connection with a new client id, which that cache cannot match, so it sends
nothing again and raises an ``OSError`` ("RPC listener disconnected").

On an HA name service :class:`~tfyarn.data.fs.HdfsFileSystem` makes such a
call good by what the namespace shows once the other NameNode has taken over:

- **mkdirs** is sent again: a directory that exists is a success;
- **delete**: the path gone means the lost call deleted it; still there, the
  delete is sent again;
- **rename**: the source gone and the destination there means the lost call
  renamed it; the source still there, the rename is sent again;
- **a new file** (:class:`KeptBytes`): its writer keeps what it was given (up
  to :data:`KEEP`) and, when create, a block or the close is lost, writes the
  file anew (delete what the lost call left, create, write the bytes again).

The TensorFlow plugin does the same (``tfyarn/hdfs_plugin/src/lost_call.rs``).
An append, or a file beyond KEEP, lost mid-call still fails.

A call the NameNode answers with ``RetriableException`` applied nothing and
is sent again after a second, up to :data:`ASKED_AGAIN` times, as Hadoop's
Java client does (:func:`resent_when_asked`; a new file's writer writes it
anew): a NameNode still taking over answers so for a delegation token it has
not loaded yet (``InvalidToken ... can't be found in cache``), as does one
still starting or in its start-up safe mode.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final, TypeVar

from tfyarn.data.fs.errors import rpc_error

T = TypeVar("T")

#: Times a lost call is made good before its error is the caller's.
AGAIN: Final = 2
#: Seconds the name service's other NameNode gets to take over; the client's
#: own failover waits ride out the rest.
SETTLE_S: Final = 1.0
#: The most a new file's writer keeps to write it again after a failover.
KEEP: Final = 64 << 20
#: Times a call the NameNode asked to be sent again is sent again.
ASKED_AGAIN: Final = 8

_RETRIABLE = "org.apache.hadoop.ipc.RetriableException"

# What a NameNode answered (the call was refused, not lost).
_ANSWERS = (
    FileNotFoundError,
    FileExistsError,
    PermissionError,
    IsADirectoryError,
    NotADirectoryError,
)


class SendAgain:
    """The type of :data:`SEND_AGAIN`."""

    def __repr__(self) -> str:
        return "SEND_AGAIN"


#: What ``took_effect`` returns when the lost call was not applied.
SEND_AGAIN: Final = SendAgain()


def lost_mid_call(exc: BaseException) -> bool:
    """Whether hdfs-native's error is a connection lost after the request left.

    hdfs-native raises I/O failures as ``OSError``; NameNode refusals come as
    ``RuntimeError`` or the answers above. A name service whose NameNodes all
    refused connections to the end is down, not lost mid-call.

    Examples
    --------
    >>> lost_mid_call(OSError("RPC listener disconnected"))
    True
    >>> lost_mid_call(OSError("Connection refused (os error 111)"))
    False
    >>> lost_mid_call(FileNotFoundError("/x")), lost_mid_call(RuntimeError("RPCError"))
    (False, False)
    """
    if not isinstance(exc, OSError) or isinstance(exc, _ANSWERS):
        return False
    return "refused" not in str(exc).lower()


def asked_again(exc: BaseException) -> bool:
    """Whether the NameNode answered ``RetriableException``: nothing was
    applied, and it asks for the call again.

    Examples
    --------
    >>> asked_again(RuntimeError(
    ...     'RPCError("org.apache.hadoop.ipc.RetriableException", "InvalidToken")'))
    True
    >>> asked_again(RuntimeError('RPCError("org.apache.hadoop.ipc.StandbyException", "")'))
    False
    >>> asked_again(OSError("RPC listener disconnected"))
    False
    """
    found = rpc_error(exc)
    return found is not None and found[0] == _RETRIABLE


def resent_when_asked(
    call: Callable[[], T], *, sleep: Callable[[float], Any] = time.sleep
) -> T:
    """``call``, sent again a second after each ``RetriableException``, up to
    :data:`ASKED_AGAIN` times (on any cluster: the NameNode applied nothing)."""
    for asked in range(ASKED_AGAIN + 1):
        try:
            return call()
        except RuntimeError as exc:
            if asked == ASKED_AGAIN or not asked_again(exc):
                raise
            sleep(SETTLE_S)
    raise AssertionError("unreachable")  # pragma: no cover


def made_good(
    ha: bool,
    call: Callable[[], T],
    took_effect: Callable[[OSError], T | SendAgain],
    *,
    sleep: Callable[[float], Any] = time.sleep,
) -> T:
    """``call``, made good after a lost attempt on a name service (``ha``).

    ``took_effect`` looks at the namespace after a loss and returns the lost
    call's result if it was applied, :data:`SEND_AGAIN` to send it again, or
    raises (it gets the loss's error, to raise when nothing explains it).
    """
    for attempt in range(AGAIN + 1):
        try:
            return call()
        except OSError as exc:
            if not ha or attempt == AGAIN or not lost_mid_call(exc):
                raise
            sleep(SETTLE_S)
            done = took_effect(exc)
            if not isinstance(done, SendAgain):
                return done
    raise AssertionError("unreachable")  # pragma: no cover


def exists(client: Any, path: str) -> bool:
    """Whether ``path`` is there (hdfs-native's ``get_file_info``)."""
    try:
        client.get_file_info(path)
    except FileNotFoundError:
        return False
    return True


class KeptBytes:
    """A new file's bytes so far, to write it anew after a lost call.

    ``open_new`` creates the file (overwriting) and returns hdfs-native's
    writer. :meth:`write` and :meth:`close` send to the current writer and,
    when a call is lost, delete the file, open it anew and send the kept bytes
    again (:data:`AGAIN` times at most). Beyond :data:`KEEP` bytes nothing is
    kept and a loss is the caller's.
    """

    def __init__(
        self,
        ha: bool,
        open_new: Callable[[], Any],
        delete: Callable[[], Any],
        *,
        sleep: Callable[[float], Any] = time.sleep,
    ) -> None:
        self._open_new = open_new
        self._delete = delete
        self._sleep = sleep
        self._kept: bytearray | None = bytearray() if ha else None
        self._rewrites = 0
        self._inner = made_good(ha, open_new, self._anew_after_create, sleep=sleep)

    def _anew_after_create(self, _lost: OSError) -> SendAgain:
        self._forget()
        return SEND_AGAIN

    def _forget(self) -> None:
        """Delete what a lost call left: a file under construction by this
        very client refuses a new create."""
        try:
            self._delete()
        except (OSError, RuntimeError):
            pass

    def write(self, data: bytes) -> int:
        if self._kept is not None:
            if len(self._kept) + len(data) <= KEEP:
                self._kept += data
            else:
                self._kept = None
        try:
            return int(self._inner.write(data))
        except (OSError, RuntimeError) as exc:
            self._anew(exc)
            return len(data)

    def close(self) -> None:
        while True:
            try:
                self._inner.close()
                return
            except (OSError, RuntimeError) as exc:
                self._anew(exc)

    def _anew(self, exc: OSError | RuntimeError) -> None:
        """Write the file anew from the kept bytes, or raise ``exc``: after a
        lost call (:data:`AGAIN` times) or a NameNode's ``RetriableException``
        (an addBlock or complete refused: :data:`ASKED_AGAIN` times)."""
        while True:
            asked = asked_again(exc)
            if (
                self._kept is None
                or self._rewrites >= (ASKED_AGAIN if asked else AGAIN)
                or not (asked or lost_mid_call(exc))
            ):
                raise exc
            self._rewrites += 1
            self._sleep(SETTLE_S)
            self._forget()
            try:
                self._inner = self._open_new()
                self._inner.write(bytes(self._kept))
                return
            except (OSError, RuntimeError) as again:
                exc = again
