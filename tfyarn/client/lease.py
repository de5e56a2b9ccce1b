"""The client's half of a server set's lease: a thread renewing it.

The master ends a set whose lease is not renewed within its bound (am/lease.py),
so servers never outlive the program holding them: when the process ends
(Ctrl-C, a closed notebook kernel, a crash), its daemon thread ends with it.
Renewals go every third of the bound, over the master's mutual-TLS channel
(tfyarn/contract/channel.py), so two may fail before the lease is at risk.
"""

from __future__ import annotations

import getpass
import logging
import os
import socket
import threading
from typing import Any

from tfyarn.errors import MasterError

log = logging.getLogger(__name__)


def holder() -> str:
    """Who renews, for the master's log."""
    try:
        user = getpass.getuser()
    except Exception:  # noqa: BLE001 -- only a name for a log line
        user = "?"
    return f"{user}@{socket.gethostname()} pid {os.getpid()}"


class Renewer:
    """Renews a set's lease in a daemon thread until :meth:`stop`.

    ``last`` is the master's latest ``RenewReply`` (None before the first);
    ``error`` the latest failure's text ("" after a success).
    """

    def __init__(self, address: str, credentials: tuple[bytes, bytes], bound: float):
        from tfyarn.contract.channel import MasterClient

        self.bound = bound
        self.interval = max(0.5, bound / 3)
        self.master = MasterClient(address, credentials)
        self.last: Any = None
        self.error = ""
        self._stop = threading.Event()
        self._holder = holder()
        self._thread = threading.Thread(
            target=self._run, name="tfyarn-lease", daemon=True
        )

    def start(self) -> Renewer:
        self.renew_once()  # the first before anything else: the bound counts
        self._thread.start()
        return self

    def renew_once(self) -> Any:
        from tfyarn._proto import master_pb2 as pb

        try:
            self.last = self.master.renew(
                pb.RenewRequest(holder=self._holder),
                timeout=max(1.0, self.interval),
            )
            self.error = ""
        except MasterError as exc:
            self.error = str(exc)
            log.warning("tfyarn: could not renew the servers' lease: %s", exc)
        return self.last

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.renew_once()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.interval + 5)
        self.master.close()
