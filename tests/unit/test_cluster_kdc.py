"""The local KDC's configuration and its errors, without running one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tfyarn.cluster import _kdc
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
