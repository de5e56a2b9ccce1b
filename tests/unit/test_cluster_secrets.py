"""The secure local cluster's secrets never reach a command line: a real
keytool makes the keystore with a password that starts with ``-J`` (which
keytool's launcher would take as a JVM option), and the KDC's master key is
typed on kdb5_util's stdin."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from _required import missing

from tfyarn.cluster import ClusterSettings, _kdc
from tfyarn.cluster._hadoop import find_java_home
from tfyarn.cluster._kdc import Kdc
from tfyarn.cluster._secure import SecureCluster
from tfyarn.errors import ClusterError


def _record_commands(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Run commands for real, keeping each one's argv."""
    commands: list[list[str]] = []
    real_run = subprocess.run

    def run(command: list[str], *args: Any, **kwargs: Any) -> Any:
        commands.append([str(arg) for arg in command])
        return real_run(command, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    return commands


def test_keytool_takes_a_password_starting_with_dash_j_off_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secure = SecureCluster(tmp_path, ClusterSettings(secure=True), user="alice")
    password = "-J3kHZ_rLCkdQCom2yKZIueG"
    secure.dir.mkdir(parents=True)
    (secure.dir / "keystore.password").write_text(password)
    try:
        java_home = find_java_home()
    except ClusterError as exc:
        missing(f"no JDK for keytool: {exc}")
    commands = _record_commands(monkeypatch)

    secure._make_keystore(java_home)

    assert commands and not any(password in arg for c in commands for arg in c)
    assert oct(secure.keystore.stat().st_mode & 0o777) == "0o600"
    listed = subprocess.run(
        [str(java_home / "bin" / "keytool"), "-list", "-keystore",
         str(secure.keystore), "-storepass:env", "PW"],
        env={**os.environ, "PW": password},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert "PrivateKeyEntry" in listed.stdout


def test_the_kdc_master_key_is_typed_not_passed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if "kdb5_util" in _kdc.missing_tools():
        missing("kdb5_util is not installed (tests/system-packages.sh)")
    commands = _record_commands(monkeypatch)
    Kdc(tmp_path, realm="R.TEST", port=18888).create()
    [create] = [c for c in commands if "create" in c]
    assert "-P" not in create
    # The database and its stash exist: kdb5_util read the key from stdin.
    assert (tmp_path / "principal").exists() and (tmp_path / "stash").exists()
