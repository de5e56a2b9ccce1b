"""The local KDC's configuration and its errors, without running one; its stop."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tfyarn.cluster import _kdc, _process
from tfyarn.cluster._kdc import Kdc
from tfyarn.errors import ClusterError


def test_missing_tools_name_the_debian_packages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(shutil, "which", lambda *_, **__: None)
    with pytest.raises(ClusterError, match="apt-get install -y krb5-kdc") as info:
        Kdc(tmp_path, realm="R.TEST", port=1).start()
    assert "kdb5_util" in str(info.value)
    assert _kdc.missing_tools() == list(_kdc.TOOLS)


def test_config_names_the_realm_port_and_files(tmp_path: Path) -> None:
    kdc = Kdc(tmp_path, realm="R.TEST", port=18888)
    kdc_conf, krb5_conf = kdc._kdc_conf_text(), kdc._krb5_conf_text()
    assert "kdc_tcp_ports = 18888" in kdc_conf
    assert f"database_name = {tmp_path / 'principal'}" in kdc_conf
    assert "default_realm = R.TEST" in krb5_conf
    assert "kdc = 127.0.0.1:18888" in krb5_conf
    assert kdc.env() == {"KRB5_CONFIG": str(tmp_path / "krb5.conf")}
    assert kdc.java_flags() == [f"-Djava.security.krb5.conf={tmp_path / 'krb5.conf'}"]


def test_a_stop_waits_for_the_process_itself_not_its_command_line() -> None:
    # A process that takes 0.5 s to go after SIGTERM, as an exiting KDC does on
    # a loaded host: the KDC's stop (terminate) returns once it is gone, not before.
    slow_to_go = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: (time.sleep(0.5), sys.exit(0)))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", slow_to_go], stdout=subprocess.PIPE)
    assert child.stdout is not None and child.stdout.readline() == b"ready\n"
    began = time.monotonic()
    child.send_signal(signal.SIGTERM)
    assert _process.terminate([child.pid], grace=10) == []  # gone within the grace
    assert time.monotonic() - began >= 0.4
    assert child.poll() is not None  # reaped: nothing left to find
