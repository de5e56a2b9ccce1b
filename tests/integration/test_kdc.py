"""The local cluster's own Kerberos realm, against a real MIT KDC."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tfyarn.cluster._kdc import Kdc, missing_tools
from tfyarn.errors import ClusterError

pytestmark = pytest.mark.kerberos


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def kdc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kdc]:
    assert not missing_tools(), (
        f"Kerberos tools missing: {missing_tools()}; tests/system-packages.sh "
        "installs them"
    )
    realm = Kdc(
        tmp_path_factory.mktemp("kerberos"), realm="TFYARN.TEST", port=_free_port()
    )
    realm.start()
    yield realm
    realm.stop()


def _klist(kdc: Kdc, ccache: Path) -> str:
    done = subprocess.run(
        ["klist", "-c", f"FILE:{ccache}"],
        env={**os.environ, **kdc.env()},
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout + done.stderr


def test_a_keytab_gets_a_ticket_from_the_realm(kdc: Kdc, tmp_path: Path) -> None:
    keytab = kdc.add_principal("alice", kdc.keytab("alice"))
    assert keytab.stat().st_mode & 0o777 == 0o600
    kdc.kinit("alice", keytab, tmp_path / "cc")
    assert "Default principal: alice@TFYARN.TEST" in _klist(kdc, tmp_path / "cc")
    # Adding again keeps the key: the first keytab still works.
    kdc.add_principal("alice", tmp_path / "second.keytab")
    kdc.kinit("alice", keytab, tmp_path / "cc2")


def test_start_again_is_a_no_op(kdc: Kdc) -> None:
    pid = kdc.pid()
    kdc.start()
    assert pid is not None and kdc.pid() == pid


def test_another_principals_keytab_is_refused_naming_the_principal(
    kdc: Kdc, tmp_path: Path
) -> None:
    kdc.add_principal("alice", kdc.keytab("alice"))
    bob = kdc.add_principal("bob", kdc.keytab("bob"))
    with pytest.raises(ClusterError, match="ticket for alice") as info:
        kdc.kinit("alice", bob, tmp_path / "cc")
    assert "alice@TFYARN.TEST" in str(info.value)


def test_a_stopped_kdc_is_a_clear_bounded_error(kdc: Kdc, tmp_path: Path) -> None:
    keytab = kdc.add_principal("carol", kdc.keytab("carol"))
    kdc.stop()
    try:
        assert kdc.pid() is None
        started = time.monotonic()
        with pytest.raises(ClusterError, match="Cannot contact any KDC"):
            kdc.kinit("carol", keytab, tmp_path / "cc")
        assert time.monotonic() - started < 30
    finally:
        kdc.start()
    kdc.kinit("carol", keytab, tmp_path / "cc")


def test_a_taken_port_is_named(kdc: Kdc, tmp_path: Path) -> None:
    other = Kdc(tmp_path / "other", realm="OTHER.TEST", port=kdc.port)
    with pytest.raises(ClusterError, match=f"port {kdc.port}"):
        other.start()


def test_a_kdc_that_dies_at_start_names_its_log(tmp_path: Path) -> None:
    broken = Kdc(tmp_path / "broken", realm="BROKEN.TEST", port=_free_port())
    broken.create()
    (broken.base_dir / "stash").unlink()  # krb5kdc cannot open its database
    with pytest.raises(ClusterError, match="the local KDC exited") as info:
        broken.start()
    assert str(broken.log) in str(info.value)
    assert broken.pid() is None
