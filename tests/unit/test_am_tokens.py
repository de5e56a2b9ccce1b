"""The master's HDFS delegation tokens (am/tokens.py, am/token_schedule.py) and
the runtime's side (tfyarn/runtime/tokens.py), with the fetch faked."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from _am_support import AMRM, hdfs_token, job

from am import token_schedule
from am.fetch_tokens import Fetched
from am.launcher import FakeLauncher
from am.state import JobState
from am.token_schedule import Lifetime
from am.tokens import TokenKeeper
from tfyarn._proto import master_pb2 as pb
from tfyarn.contract import tokens
from tfyarn.contract.status import JobStatus
from tfyarn.contract.tokens import HDFS_KIND, TokenFile
from tfyarn.runtime import tokens as runtime_tokens

ISSUED = 1_795_500_000.0  # epoch s of the submission's tokens
SERVICE = "10.0.0.1:8020"


@pytest.mark.parametrize(
    ("issued", "ends", "at"),
    [
        (0.0, 120.0, 90.0),  # the secure test cluster's 120 s tokens
        (0.0, 60.0, 30.0),  # fetched ones there: renew interval 60 s
        (0.0, 7 * 86400.0, 0.75 * 7 * 86400),  # Hadoop's default 7 days
        (100.0, 110.0, 105.0),  # never before half of the life
    ],
)
def test_refresh_comes_before_the_end_with_room_to_retry(
    issued: float, ends: float, at: float
) -> None:
    when = token_schedule.refresh_at(Lifetime(issued, ends))
    assert when == pytest.approx(at)
    assert issued < when < ends


def test_retries_back_off_but_come_often_before_the_end() -> None:
    delays = [token_schedule.retry_at(0.0, 1e6, n) for n in range(1, 10)]
    assert delays == sorted(delays) and delays[-1] == token_schedule.RETRY_CAP
    assert token_schedule.retry_at(0.0, 20.0, 5) == token_schedule.MIN_WAIT


def test_expired_hint_needs_an_ended_token_and_an_auth_failure() -> None:
    life = Lifetime(0.0, 120.0)
    gss = 'RuntimeError: GSSAPIError(... "No Kerberos credentials available" ...)'
    hint = token_schedule.expired_hint(gss, now=130.0, life=life)
    assert hint.startswith("HDFS delegation token expired")
    assert (
        "--principal USER@REALM --keytab FILE" in hint and "longer than 2 min" in hint
    )
    assert token_schedule.expired_hint(gss, now=100.0, life=life) == ""
    assert token_schedule.expired_hint("ValueError: x", now=130.0, life=life) == ""
    assert token_schedule.expired_hint(gss, now=130.0, life=None) == ""


def token_file(tmp_path: Path, *found: tokens.Token) -> Path:
    path = tmp_path / "container_tokens"
    path.write_bytes(TokenFile(tokens=found).to_bytes())
    return path


class FakeFetch:
    """Stands in for FetchTokens.java: tokens issued at ``now``, renewable 60 s."""

    def __init__(self, clock: list[float], fail: int = 0) -> None:
        self.clock = clock
        self.fail = fail
        self.calls: list[tuple[str, str, tuple[str, ...]]] = []

    def __call__(
        self, principal: str, keytab: str, namenodes: tuple[str, ...]
    ) -> Fetched:
        self.calls.append((principal, keytab, namenodes))
        if self.fail:
            self.fail -= 1
            raise subprocess.CalledProcessError(
                1, "FetchTokens.java", "", "KDC said no"
            )
        issued = self.clock[0]
        fresh = hdfs_token(SERVICE, issued_ms=int(issued * 1000), life_ms=120_000)
        return Fetched(TokenFile(tokens=(fresh,)), {SERVICE: issued + 60.0})


def keeper(
    tmp_path: Path, clock: list[float], *, keytab: bool, fail: int = 0
) -> tuple[TokenKeeper, JobState, FakeFetch]:
    state = JobState(
        job(tasks={"worker": 2}, hdfs_namenodes=("hdfs://nn2:8020",)), FakeLauncher()
    )
    path = token_file(tmp_path, AMRM, hdfs_token(SERVICE, issued_ms=int(ISSUED * 1000)))
    fetch = FakeFetch(clock, fail)
    k = TokenKeeper(
        state,
        token_file=path,
        principal="me@R.TEST" if keytab else "",
        keytab="/c/tfyarn.keytab" if keytab else "",
        namenodes=state.spec.hdfs_namenodes,
        wall=lambda: clock[0],
        fetch=fetch,
    )
    k.start()
    return k, state, fetch


def test_without_a_keytab_the_master_warns_how_long_hdfs_lasts(tmp_path: Path) -> None:
    clock = [ISSUED + 5.0]
    k, state, _ = keeper(tmp_path, clock, keytab=False)
    assert not k.renews
    (warning,) = state.warnings
    assert warning.startswith("HDFS delegation tokens end in 55 s (60 s after")
    assert "--principal USER@REALM --keytab FILE" in warning
    status = JobStatus.from_dict(state.snapshot())
    assert status.warnings == [warning]
    assert status.hdfs_tokens and status.hdfs_tokens["ends"] == ISSUED + 60.0
    assert status.hdfs_tokens["refreshed_by"] == ""
    # A task that dies of the expired token after the end is named as such.
    clock[0] = ISSUED + 70.0
    assert state.failure_hint("GSS_S_NO_CRED").startswith(
        "HDFS delegation token expired"
    )


def test_without_hdfs_tokens_nothing_is_said(tmp_path: Path) -> None:
    state = JobState(job(), FakeLauncher())
    k = TokenKeeper(state, token_file=token_file(tmp_path, AMRM), wall=lambda: ISSUED)
    k.start()
    assert not k.renews and state.warnings == [] and state.hdfs_tokens is None


def test_with_a_keytab_fresh_tokens_reach_the_master_file_and_every_stream(
    tmp_path: Path,
) -> None:
    clock = [ISSUED + 5.0]
    k, state, fetch = keeper(tmp_path, clock, keytab=True)
    assert k.renews and state.warnings == []
    assert k.next_at == ISSUED + 30.0  # half of the 60 s hdfs-native uses them
    watcher = state.watch("worker", 0, 0, 0)
    clock[0] = ISSUED + 30.0
    asyncio.run(k.refresh())
    assert fetch.calls == [("me@R.TEST", "/c/tfyarn.keytab", ("hdfs://nn2:8020",))]
    # The master's own file: the fresh token, and YARN's AMRMToken kept.
    own = TokenFile.read(k.token_file)
    kinds = sorted(t.kind for t in own.tokens)
    assert kinds == [HDFS_KIND, "YARN_AM_RM_TOKEN"]
    assert tokens.dates(own.of_kind(HDFS_KIND)[0]).issued == ISSUED + 30.0  # type: ignore[union-attr]
    # Every open stream got them; fetched tokens end at their renewal deadline.
    event = pb.ClusterEvent.FromString(watcher._queue.get_nowait() or b"")
    assert event.credentials.version == 1
    assert event.credentials.ends == ISSUED + 90.0
    assert k.next_at == ISSUED + 60.0  # half of their 60 s
    # A stream opened later (a replacement) gets them first; one that has them does not.
    late = state.watch("worker", 1, 0, 0)
    assert (
        pb.ClusterEvent.FromString(late._queue.get_nowait() or b"").credentials.version
        == 1
    )
    again = state.watch("worker", 1, 0, 0, known_credentials=1)
    assert again._queue.empty()
    status = JobStatus.from_dict(state.snapshot())
    assert status.hdfs_tokens and status.hdfs_tokens["refreshes"] == 1
    assert status.hdfs_tokens["refreshed_by"] == "me@R.TEST"


def test_a_failed_fetch_keeps_the_old_tokens_and_retries(tmp_path: Path) -> None:
    clock = [ISSUED + 30.0]
    k, state, _ = keeper(tmp_path, clock, keytab=True, fail=1)
    before = k.token_file.read_bytes()
    asyncio.run(k.refresh())
    assert k.token_file.read_bytes() == before and state.credentials is None
    assert k.next_at == ISSUED + 37.5  # a quarter of the 30 s left
    assert "KDC said no" in (state.hdfs_tokens or {}).get("last_error", "")
    clock[0] = k.next_at
    asyncio.run(k.refresh())
    assert state.credentials is not None and k.failures == 0
    assert (state.hdfs_tokens or {}).get("last_error") == ""


def test_the_run_loop_refreshes_when_due(tmp_path: Path) -> None:
    clock = [ISSUED + 29.99]
    k, _, fetch = keeper(tmp_path, clock, keytab=True)

    async def scenario() -> None:
        loop = asyncio.create_task(k.run())
        while not fetch.calls:
            clock[0] += 0.01
            await asyncio.sleep(0.005)
        loop.cancel()

    asyncio.run(asyncio.wait_for(scenario(), 10))
    assert len(fetch.calls) == 1


def test_the_runtime_merges_fresh_tokens_into_its_file(tmp_path: Path) -> None:
    path = token_file(tmp_path, AMRM, hdfs_token(SERVICE, issued_ms=1000))
    fresh = TokenFile(tokens=(hdfs_token(SERVICE, issued_ms=9000),))
    credentials = pb.Credentials(tokens=fresh.to_bytes(), version=3, ends=ISSUED)
    assert runtime_tokens.apply(credentials, {"HADOOP_TOKEN_FILE_LOCATION": str(path)})
    merged = TokenFile.read(path)
    assert len(merged.tokens) == 2
    assert tokens.dates(merged.of_kind(HDFS_KIND)[0]).issued == 9.0  # type: ignore[union-attr]
    # No token file (an insecure cluster): nothing written, no crash.
    assert not runtime_tokens.apply(credentials, {})
    bad = pb.Credentials(tokens=b"junk", version=4)
    assert not runtime_tokens.apply(bad, {"HADOOP_TOKEN_FILE_LOCATION": str(path)})
    assert len(TokenFile.read(path).tokens) == 2


def test_an_expired_token_is_named_in_the_failed_task_s_diagnostics(
    tmp_path: Path,
) -> None:
    clock = [ISSUED + 70.0]
    _, state, _ = keeper(tmp_path, clock, keytab=False)
    task = state.tasks[next(iter(state.tasks))]
    task.exit_code = 1
    task.stderr_tail = (
        "Traceback (most recent call last):\n"
        "tfyarn.data.fs.errors.HdfsAuthError: HDFS list of hdfs://10.0.0.1:8020/x: "
        'RuntimeError: GSSAPIError("GSS_S_NO_CRED")'
    )
    reason = state._exit_reason(task)
    assert "HDFS delegation token expired (at 60 s into the job" in reason


def test_tfyarn_status_shows_the_tokens_and_the_warning() -> None:
    from tfyarn.client.cli import _token_lines
    from tfyarn.contract.status import Phase

    ends = 1_795_500_120.0
    kept = JobStatus(
        phase=Phase.RUNNING,
        hdfs_tokens={"refreshed_by": "me@R.TEST", "ends": ends, "refreshes": 3,
                     "next_refresh": None, "last_error": "KDC said no"},
    )  # fmt: skip
    assert _token_lines(kept) == [
        (
            "hdfs tokens:  valid until 06:02:00 UTC, refreshed 3 time(s) from the "
            "keytab of me@R.TEST"
        ),
        "              last refresh failed: KDC said no",
    ]
    warned = JobStatus(
        phase=Phase.RUNNING,
        hdfs_tokens={"refreshed_by": "", "ends": ends},
        warnings=["HDFS delegation tokens end in 2 min"],
    )
    assert _token_lines(warned) == [
        "hdfs tokens:  valid until 06:02:00 UTC, not refreshed (no keytab)",
        "warning:      HDFS delegation tokens end in 2 min",
    ]
    assert _token_lines(JobStatus(phase=Phase.RUNNING)) == []
