"""A decided FAILED ends the application on the attempt that decided it.

skein leaves a FAILED application registered unless the attempt is YARN's
last, so the master unregisters it first (am/unregister.py); YARN itself is
exercised in tests/integration/test_restart_policy.py.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from am import unregister
from am.launcher import SkeinLauncher

REPO = Path(__file__).resolve().parents[2]


class FakeApp:
    id = "application_1_0001"

    def __init__(self, calls: list[str]) -> None:
        self.calls = calls

    def shutdown(self, status: str, diagnostics: str) -> None:
        self.calls.append(f"skein shutdown {status}")


def shut_down(
    monkeypatch: pytest.MonkeyPatch, status: str, *, last: bool, fails: bool = False
) -> list[str]:
    calls: list[str] = []

    def fake_unregister(status: str, diagnostics: str, **_: Any) -> None:
        calls.append(f"unregister {status}: {diagnostics}")
        if fails:
            raise subprocess.CalledProcessError(1, "Unregister.java")

    monkeypatch.setattr(unregister, "unregister", fake_unregister)
    launcher = SkeinLauncher(FakeApp(calls), last_attempt=last)
    asyncio.run(launcher.shutdown(status, "ValueError: x"))
    return calls


def test_a_failed_job_unregisters_before_skein_shuts_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert shut_down(monkeypatch, "FAILED", last=False) == [
        "unregister FAILED: ValueError: x",
        "skein shutdown FAILED",
    ]
    assert shut_down(monkeypatch, "KILLED", last=False)[0].startswith("unregister")


def test_skein_alone_when_it_unregisters_by_itself(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # SUCCEEDED, or YARN's last attempt: skein unregisters the application.
    assert shut_down(monkeypatch, "SUCCEEDED", last=False) == [
        "skein shutdown SUCCEEDED"
    ]
    assert shut_down(monkeypatch, "FAILED", last=True) == ["skein shutdown FAILED"]


def test_if_unregistering_fails_skein_still_shuts_down(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls = shut_down(monkeypatch, "FAILED", last=False, fails=True)
    assert calls[-1] == "skein shutdown FAILED"


def test_the_classpath_is_skein_jvms_the_masters_parent() -> None:
    # skein's JVM has CLASSPATH and starts the master without it: here a
    # shell plays the JVM (the trailing `true` keeps it from exec'ing).
    probe = "from am.unregister import jvm_classpath; print(jvm_classpath())"
    env = {**os.environ, "CLASSPATH": "/jars/*:./*", "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        ["bash", "-c", f'env -u CLASSPATH {sys.executable} -c "{probe}"; true'],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "/jars/*:./*"


def test_no_classpath_outside_a_skein_container() -> None:
    env = {k: v for k, v in os.environ.items() if k != "CLASSPATH"}
    child = subprocess.Popen(["sleep", "30"], env=env)
    try:
        with pytest.raises(LookupError):
            unregister.jvm_classpath(child.pid, depth=1)
    finally:
        child.kill()
        child.wait()


def test_the_java_helper_ships_with_the_master() -> None:
    # Shipped in the am archive (JobSpec.to_skein zips the am directory).
    assert unregister.JAVA_SOURCE.is_file()
    command = unregister.java_command("cp")
    assert command[-1] == str(unregister.JAVA_SOURCE)
    assert command[-3:-1] == ["-cp", "cp"]
