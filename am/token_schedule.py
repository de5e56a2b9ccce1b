"""When the job's HDFS delegation tokens end, when to fetch new ones, what to say.

Pure: times are epoch seconds passed in, nothing is read or waited for here
(``am/tokens.py`` acts on these answers). A token ends at the earlier of its
maximum date (in its identifier) and its renewal deadline: the
ResourceManager renews the tokens obtained at submission until their maximum
date, but nobody renews the ones the master fetches itself, so those end at
the deadline their first renewal reported (``dfs.namenode.delegation.token.renew-interval``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tfyarn.contract.exit_codes import hdfs_auth_failure

# Fetch new tokens this far into the old ones' life (Spark's renewal ratio)...
RATIO = 0.75
# ...but at least this long before they end, when their life allows it...
MARGIN = 30.0
# ...and never before half of it.
HALF = 0.5
# A failed fetch is retried after RETRY_FIRST, doubling up to RETRY_CAP, and
# at least four times before the tokens end.
RETRY_FIRST = 10.0
RETRY_CAP = 600.0
MIN_WAIT = 5.0


@dataclass(frozen=True)
class Lifetime:
    """The life of the job's tokens: from the issue of the one ending first to its end."""

    issued: float
    ends: float

    @property
    def span(self) -> float:
        return self.ends - self.issued


def lifetime(tokens: Iterable[tuple[float, float]]) -> Lifetime | None:
    """The tokens' common life from their ``(issued, ends)``; None for no tokens.

    Examples
    --------
    >>> lifetime([(100.0, 220.0), (110.0, 200.0)])
    Lifetime(issued=110.0, ends=200.0)
    >>> lifetime([]) is None
    True
    """
    found = sorted(tokens, key=lambda t: t[1])
    if not found:
        return None
    return Lifetime(issued=found[0][0], ends=found[0][1])


def refresh_at(life: Lifetime) -> float:
    """When to fetch the next tokens.

    Examples
    --------
    >>> refresh_at(Lifetime(0.0, 120.0))   # 0.75 of the life, 30 s before the end
    90.0
    >>> refresh_at(Lifetime(0.0, 60.0))    # 30 s before the end: half of it
    30.0
    >>> refresh_at(Lifetime(0.0, 40.0))    # never before half
    20.0
    >>> refresh_at(Lifetime(0.0, 86400.0)) / 3600
    18.0
    """
    at = min(life.issued + RATIO * life.span, life.ends - MARGIN)
    return max(at, life.issued + HALF * life.span)


def retry_at(now: float, ends: float, failures: int) -> float:
    """When to try again after ``failures`` fetches failed in a row.

    Examples
    --------
    >>> retry_at(0.0, 3600.0, 1), retry_at(0.0, 3600.0, 3)
    (10.0, 40.0)
    >>> retry_at(0.0, 3600.0, 20)   # capped
    600.0
    >>> retry_at(0.0, 40.0, 3)      # four more tries before the end
    10.0
    >>> retry_at(100.0, 90.0, 1)    # already ended: keep trying, not too often
    110.0
    """
    delay = min(RETRY_CAP, RETRY_FIRST * 2 ** max(0, failures - 1))
    remaining = ends - now
    if remaining > 0:
        delay = min(delay, max(MIN_WAIT, remaining / 4))
    return now + delay


def describe(seconds: float) -> str:
    """A duration in words a user reads at a glance.

    Examples
    --------
    >>> describe(120), describe(5400), describe(7 * 86400), describe(30)
    ('2 min', '1.5 h', '7 days', '30 s')
    """
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h".replace(".0 h", " h")
    return f"{seconds / 86400:.1f} days".replace(".0 days", " days")


def no_keytab_warning(life: Lifetime, now: float) -> str:
    """What the master says at start when it cannot renew the job's tokens."""
    left = max(0.0, life.ends - now)
    return (
        f"HDFS delegation tokens end in {describe(left)} ({describe(life.span)} "
        "after submission: their maximum lifetime, less the last minute, in "
        "which HDFS clients no longer use them): after that no task can open a "
        "new HDFS connection. For longer jobs submit with --principal "
        "USER@REALM --keytab FILE, so the master fetches fresh ones."
    )


def expired_hint(stderr_tail: str, *, now: float, life: Lifetime | None) -> str:
    """The diagnostics line for a task that died of its expired token, or "".

    Only once the tokens have ended and if the task's stderr shows an HDFS
    authentication failure.

    Examples
    --------
    >>> expired_hint("RuntimeError: GSSAPIError(... GSS_S_NO_CRED ...)",
    ...              now=200.0, life=Lifetime(0.0, 120.0))[:44]
    'HDFS delegation token expired (at 2 min into'
    >>> expired_hint("GSS_S_NO_CRED", now=100.0, life=Lifetime(0.0, 120.0))
    ''
    """
    if life is None or now < life.ends or not hdfs_auth_failure(stderr_tail):
        return ""
    span = describe(life.span)
    return (
        f"HDFS delegation token expired (at {span} into the job, the end of "
        "its maximum lifetime), so the task could not authenticate to HDFS: pass "
        f"--principal USER@REALM --keytab FILE to tfyarn submit for jobs longer "
        f"than {span}; the master then fetches fresh tokens."
    )
