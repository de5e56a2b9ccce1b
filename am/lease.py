"""A server set's lease: servers end once the client holding them is gone.

``tfyarn servers`` (without ``--detach``) and ``tfyarn.servers()`` start
TensorFlow servers for a program on the gateway. That program may end without
a word (Ctrl-C, a closed notebook kernel, a crashed gateway), so the client
renews a lease (the ``Renew`` RPC) every few seconds and the master ends the
set when no renewal came within the bound. :func:`decide` is the pure
decision (tests/unit/test_am_lease.py is its table); :class:`Lease` keeps the
one fact the servicer records, and the reconcile loop asks it each tick.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

# The client renews when a few of its renewals may still fail: its first comes
# once the master's address is published, which takes a few seconds more than
# a renewal; never less than this for it.
FIRST_RENEWAL_MIN = 60.0


class LeaseAction(Enum):
    KEEP = "keep the servers"
    EXPIRE = "end the server set: its client is gone"


@dataclass(frozen=True)
class LeaseView:
    """What the decision needs. Durations are seconds."""

    bound: float  # the lease; 0: none (a detached set, or a job)
    since_start: float  # since the master started
    since_renewal: float | None  # since the last renewal; None: never renewed
    settled: bool = False  # the job is ending anyway (killed, failed)


@dataclass(frozen=True)
class LeaseDecision:
    action: LeaseAction
    reason: str = ""


KEEP = LeaseDecision(LeaseAction.KEEP)


def decide(view: LeaseView) -> LeaseDecision:
    """Whether the servers stay.

    - No lease (``bound`` 0) or the job ending anyway: keep (nothing to do).
    - Renewed within the bound: keep.
    - Never renewed: the client gets ``max(bound, FIRST_RENEWAL_MIN)`` from
      the master's start (submitting, the master's address, TLS) before the
      set is called orphaned.
    - Otherwise: expire, saying how long it has been.

    Examples
    --------
    >>> decide(LeaseView(bound=60, since_start=100, since_renewal=5)).action
    <LeaseAction.KEEP: 'keep the servers'>
    """
    if view.bound <= 0 or view.settled:
        return KEEP
    if view.since_renewal is None:
        first = max(view.bound, FIRST_RENEWAL_MIN)
        if view.since_start <= first:
            return KEEP
        return LeaseDecision(
            LeaseAction.EXPIRE,
            f"tfyarn: server set ended: its client never renewed the lease in "
            f"{view.since_start:.0f} s (bound {first:.0f} s); the program that "
            "started it did not get its master's address, or ended first",
        )
    if view.since_renewal <= view.bound:
        return KEEP
    return LeaseDecision(
        LeaseAction.EXPIRE,
        f"tfyarn: server set ended: its lease expired, no renewal from its "
        f"client for {view.since_renewal:.0f} s (bound {view.bound:.0f} s); "
        "the program holding it ended (Ctrl-C, a closed notebook kernel, a "
        "crash) or lost its connection to the cluster",
    )


class Lease:
    """The last renewal of one server set (monotonic seconds), and who made it."""

    def __init__(self, bound: float, started: float) -> None:
        self.bound = bound
        self.started = started
        self.renewed_at: float | None = None
        self.holder = ""

    def renew(self, now: float, holder: str) -> None:
        self.renewed_at = now
        self.holder = holder

    def view(self, now: float, *, settled: bool) -> LeaseView:
        return LeaseView(
            bound=self.bound,
            since_start=now - self.started,
            since_renewal=None if self.renewed_at is None else now - self.renewed_at,
            settled=settled,
        )
