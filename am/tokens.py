"""The job's HDFS delegation tokens in the master: keep them fresh, or say when they end.

At submission skein obtains HDFS delegation tokens (``fs.defaultFS`` and
``hdfs_namenodes``), which the ResourceManager renews until their maximum
lifetime (7 days by default); after that no task can open a new HDFS
connection. So the master:

- with a keytab (``tfyarn submit --principal P --keytab F`` ships it to the
  master alone, private to the application), fetches fresh tokens before the
  old ones end (``am/fetch_tokens.py``; when: ``am/token_schedule.py``),
  merges them into its own token file, and sends them to every task through
  the contract (``Credentials`` on WatchCluster), tasks started later
  included;
- without, warns at start (log and ``warnings`` in the status) how long the
  job can use HDFS, and names an expired token in a failed task's diagnostics.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Protocol

from am import fetch_tokens
from am import token_schedule as schedule
from am.decisions import Decision, FailureHint, TokenStatus, Warn
from tfyarn._proto import master_pb2 as pb
from tfyarn.contract import env as _env
from tfyarn.contract.tokens import (
    HDFS_KIND,
    TokenFile,
    TokenFileError,
    dates,
    usable_until,
    write_atomically,
)
from tfyarn.spec import JobSpec


class Job(Protocol):
    """What the keeper needs of the job: its spec, its applier, its streams."""

    @property
    def spec(self) -> JobSpec: ...

    def apply(self, decisions: Iterable[Decision]) -> None: ...

    def push_credentials(self, event: bytes, version: int) -> None: ...


log = logging.getLogger(__name__)

# The master sleeps in steps no longer than this (a suspended VM's clock jumps).
STEP = 30.0


class TokenKeeper:
    """Watches (and with a keytab, refreshes) one job's HDFS delegation tokens.

    Parameters
    ----------
    state
        The job: receives the fresh tokens (``push_credentials``), the status
        fields and the failure hint.
    token_file
        This container's token file (``HADOOP_TOKEN_FILE_LOCATION``).
    principal, keytab
        The login for fresh tokens; both empty: tokens are not refreshed.
    namenodes
        Name services besides fs.defaultFS (``JobSpec.hdfs_namenodes``).
    """

    def __init__(
        self,
        state: Job,
        *,
        token_file: Path,
        principal: str = "",
        keytab: str = "",
        namenodes: tuple[str, ...] = (),
        wall: Callable[[], float] = time.time,
        fetch: Callable[..., fetch_tokens.Fetched] = fetch_tokens.fetch,
    ) -> None:
        self.state = state
        self.token_file = token_file
        self.principal = principal
        self.keytab = keytab
        self.namenodes = namenodes
        self.wall = wall
        self.fetch = fetch
        self.life: schedule.Lifetime | None = None
        self.version = 0
        self.failures = 0
        self.next_at: float | None = None

    @property
    def renews(self) -> bool:
        return bool(self.principal and self.keytab and self.life)

    def start(self) -> None:
        """Read the submission's tokens; warn, or plan the first refresh."""
        try:
            found = TokenFile.read(self.token_file).of_kind(HDFS_KIND)
        except (OSError, TokenFileError) as exc:
            log.warning("cannot read the job's tokens in %s: %s", self.token_file, exc)
            return
        self.life = schedule.lifetime(
            (d.issued, usable_until(d)) for t in found if (d := dates(t)) is not None
        )
        if self.life is None:
            return  # no HDFS delegation tokens: not a secure cluster
        self.state.apply([FailureHint(self.hint)])
        now = self.wall()
        if self.principal and self.keytab:
            self.next_at = schedule.refresh_at(self.life)
            log.info(
                "HDFS delegation tokens end in %s; fresh ones from the keytab of "
                "%s in %s",
                schedule.describe(self.life.ends - now),
                self.principal,
                schedule.describe(max(0.0, self.next_at - now)),
            )
        else:
            warning = schedule.no_keytab_warning(self.life, now)
            log.warning("%s", warning)
            self.state.apply([Warn(warning)])
        self._publish()

    def due(self) -> bool:
        """Whether fresh tokens are due now (at start: a job that started late)."""
        return self.renews and self.next_at is not None and self.next_at <= self.wall()

    async def run(self) -> None:
        """Refresh the tokens until cancelled (only with a keytab)."""
        while self.renews and self.next_at is not None:
            wait = self.next_at - self.wall()
            if wait > 0:
                await asyncio.sleep(min(wait, STEP))
                continue
            await self.refresh()

    async def refresh(self) -> None:
        """Fetch fresh tokens once; hand them to the master's file and every task."""
        assert self.life is not None
        began = time.monotonic()
        try:
            fetched = await asyncio.to_thread(
                self.fetch, self.principal, self.keytab, self.namenodes
            )
            fresh = TokenFile(tuple(fetched.tokens.of_kind(HDFS_KIND)))
            life = schedule.lifetime(_ends(fresh, fetched.expires))
            if life is None:
                raise TokenFileError("the NameNode gave no HDFS delegation token")
        except Exception as exc:  # noqa: BLE001 -- keep the old ones, try again
            self.failures += 1
            now = self.wall()
            self.next_at = schedule.retry_at(now, self.life.ends, self.failures)
            log.warning(
                "could not fetch fresh HDFS delegation tokens (%d in a row; next "
                "try in %s): %s",
                self.failures,
                schedule.describe(self.next_at - now),
                _said(exc),
            )
            self._publish(error=_said(exc))
            return
        self._merge_into_own_file(fresh)
        self.version += 1
        self.failures = 0
        self.life = life
        self.next_at = schedule.refresh_at(life)
        event = pb.ClusterEvent(
            credentials=pb.Credentials(
                tokens=fresh.to_bytes(), version=self.version, ends=life.ends
            )
        )
        self.state.push_credentials(event.SerializeToString(), self.version)
        now = self.wall()
        log.info(
            "fresh HDFS delegation tokens #%d for %s in %.1f s, sent to every task; "
            "they end in %s, next refresh in %s",
            self.version,
            ", ".join(t.service for t in fresh.tokens),
            time.monotonic() - began,
            schedule.describe(life.ends - now),
            schedule.describe(self.next_at - now),
        )
        self._publish()

    def hint(self, stderr_tail: str) -> str:
        """The diagnostics line for a task that died of an expired token, or ""."""
        return schedule.expired_hint(stderr_tail, now=self.wall(), life=self.life)

    def _merge_into_own_file(self, fresh: TokenFile) -> None:
        # The master's own HDFS calls (markers, TensorBoard) read this file;
        # YARN's AMRMToken in it stays (am/unregister.py needs it).
        try:
            current = TokenFile.read(self.token_file)
            write_atomically(self.token_file, current.merged(fresh).to_bytes())
        except (OSError, TokenFileError) as exc:
            log.warning("could not update %s: %s", self.token_file, exc)

    def _publish(self, *, error: str = "") -> None:
        if self.life is None:
            return
        status = {
            "refreshed_by": self.principal if self.principal and self.keytab else "",
            "ends": self.life.ends,
            "refreshes": self.version,
            "next_refresh": self.next_at,
            "last_error": error,
        }
        self.state.apply([TokenStatus(status)])


def keeper_for(state: Job, environ: dict[str, str] | None = None) -> TokenKeeper | None:
    """The job's keeper, started; None outside a secure cluster."""
    env: dict[str, Any] = dict(os.environ if environ is None else environ)
    token_file = env.get("HADOOP_TOKEN_FILE_LOCATION")
    if not token_file:
        return None
    keytab = Path(_env.KEYTAB_FILE)
    keeper = TokenKeeper(
        state,
        token_file=Path(token_file),
        principal=env.get(_env.KEYTAB_PRINCIPAL, ""),
        keytab=str(keytab.resolve()) if keytab.is_file() else "",
        namenodes=tuple(state.spec.hdfs_namenodes),
    )
    keeper.start()
    return keeper


def _ends(fresh: TokenFile, expires: dict[str, float]) -> list[tuple[float, float]]:
    """``(issued, ends)`` of each token: the earlier of its maximum date and expiry."""
    out = []
    for token in fresh.tokens:
        d = dates(token)
        if d is not None:
            ends = usable_until(d)
            out.append((d.issued, min(ends, expires.get(token.service, ends))))
    return out


def _said(exc: BaseException) -> str:
    """The error, with the Java helper's telling line (its exception) if any."""
    stderr = [ln.strip() for ln in str(getattr(exc, "stderr", "") or "").splitlines()]
    stderr = [ln for ln in stderr if ln and not ln.startswith(("WARNING", "SLF4J"))]
    java = [ln for ln in stderr if "Exception" in ln or "Error" in ln] or stderr
    return f"{type(exc).__name__}: {exc}" + (f" ({java[-1]})" if java else "")
