"""The master's entry point (am/__main__.py) wired to the fake launcher."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
from _am_support import job, new_credentials

from am.__main__ import am_attempt, serve
from am.launcher import FakeLauncher
from tfyarn.contract.status import MASTER_KEY, STATUS_KEY


def test_am_attempt_from_container_id() -> None:
    assert am_attempt("container_e17_1795314317772_0008_02_000001") == 2
    assert am_attempt("container_1795314317772_0008_01_000001") == 1
    assert am_attempt("") == 1


def fast_clock() -> float:
    """Twenty seconds a second: a registration timeout of 1 s is over at the
    loop's second pass (half a second later), not its third."""
    return 20 * time.monotonic()


@pytest.fixture
def second_attempt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A master container's directory (skein's credentials), in its 2nd attempt."""
    cert, key = new_credentials()
    (tmp_path / ".skein.crt").write_bytes(cert)
    (tmp_path / ".skein.pem").write_bytes(key)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CONTAINER_ID", "container_1795314317772_0008_02_000001")


@pytest.mark.usefixtures("second_attempt")
def test_serve_publishes_address_adds_page_and_ends_the_app() -> None:
    # A second AM attempt: the job counts one restart.
    launcher = FakeLauncher()
    spec = job(tasks={"worker": 1}, registration_timeout=1.0)

    code = asyncio.run(
        asyncio.wait_for(serve(spec, launcher, host="127.0.0.1", clock=fast_clock), 30)
    )

    assert code == 1
    assert launcher.kv[MASTER_KEY].startswith("127.0.0.1:")
    assert launcher.pages["tfyarn"].startswith("http://127.0.0.1:")  # loopback only
    # skein re-requests the declared containers in every attempt, numbered
    # from 0 again; the cluster this attempt forms carries restart 1.
    assert launcher.declared_ids == ["worker_0"] and launcher.started == []
    status = json.loads(launcher.kv[STATUS_KEY])
    assert status["cluster_restarts"] == 1
    assert status["phase"] == "FAILED" and status["restarts"] == 1
    assert "application master attempt 2" in status["restart_reasons"][0]
    assert launcher.final is not None and launcher.final[0] == "FAILED"
    assert "worker:0 waiting for a container" in launcher.final[1]


@pytest.mark.usefixtures("second_attempt")
def test_a_reattempt_after_a_decided_failure_repeats_it_and_runs_nothing() -> None:
    """skein re-attempts even a FAILED application; the outcome must stick."""

    class Remembering(FakeLauncher):
        async def previous_final(self) -> tuple[str, str] | None:
            return ("FAILED", "worker:1 exited with code 3; budget used up")

    launcher = Remembering()
    code = asyncio.run(asyncio.wait_for(serve(job(), launcher, host="127.0.0.1"), 30))
    assert code == 1
    assert launcher.started == [] and launcher.declared_ids == []
    assert launcher.final == ("FAILED", "worker:1 exited with code 3; budget used up")


@pytest.mark.usefixtures("second_attempt")
def test_a_reattempt_goes_on_with_the_restarts_charged_before() -> None:
    """A task that fails in every attempt must not get a fresh budget in each."""
    launcher = FakeLauncher()
    launcher.restarts_record = {
        "budget_used": 1,
        "restarts": 1,
        "cluster_restarts": 1,
        "restart_reasons": ["cluster restarted: worker:0 exited with code 3"],
        "failures": ["worker:0 exited with code 3"],
    }
    spec = job(tasks={"worker": 1}, registration_timeout=1.0, max_restarts=1)

    code = asyncio.run(
        asyncio.wait_for(serve(spec, launcher, host="127.0.0.1", clock=fast_clock), 30)
    )

    assert code == 1
    # One restart by the first attempt, one for the new master attempt.
    assert launcher.declared_ids == ["worker_0"]
    status = json.loads(launcher.kv[STATUS_KEY])
    assert status["cluster_restarts"] == 2
    assert status["restarts"] == 2 and status["budget_used"] == 1
    assert "application master attempt 2" in status["restart_reasons"][1]
    # The budget was used up before: this attempt's first failure ends the job,
    # and the diagnostics list the earlier attempt's failure too.
    assert launcher.final is not None and launcher.final[0] == "FAILED"
    assert "restart budget is used up (1 of max_restarts=1)" in launcher.final[1]
    assert "1. worker:0 exited with code 3" in launcher.final[1]
    assert "2. 1 task(s) did not register" in launcher.final[1]
