"""The Docker tests' fixture names a missing command and where it looked
(dockerd is in /usr/sbin, which a user's PATH may lack)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import _by_path
import pytest

CONFTEST = Path(__file__).parents[1] / "integration" / "docker" / "conftest.py"


def _conftest() -> ModuleType:
    return _by_path.load("docker_conftest", CONFTEST)


def test_a_command_in_sbin_is_found_without_sbin_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    (sbin / "dockerd").write_text("#!/bin/sh\n")
    (sbin / "dockerd").chmod(0o755)
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    conftest = _conftest()
    assert conftest.system_command("dockerd", where=(str(sbin),)) == str(
        sbin / "dockerd"
    )


def test_a_missing_command_is_named_with_where_it_was_looked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    conftest = _conftest()
    with pytest.raises(pytest.fail.Exception) as info:
        conftest.system_command("dockerd", where=(str(tmp_path),))
    message = str(info.value)
    assert "no `dockerd` command on PATH (/usr/bin:/bin)" in message
    assert f"nor in {tmp_path}" in message
    with pytest.raises(pytest.fail.Exception, match=r"`docker` command on PATH \(\)"):
        monkeypatch.setenv("PATH", "")
        conftest.system_command("docker", where=())
