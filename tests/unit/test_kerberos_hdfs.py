"""HDFS on a secure cluster: GSSAPI failures mapped, tokens found.

The messages are hdfs-native 0.14.7's, measured on the secure local cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tfyarn.data.fs import HdfsAuthError, HdfsError, hdfs
from tfyarn.data.fs.errors import mapped_error

NO_CRED = RuntimeError(
    'GSSAPIError(GssMajorCodes { raw: "0x00070000", calling_error: "none", '
    'routine_error: "GSS_S_NO_CRED", supplementary_info: "0x0000" }, 2529639053, '
    '"No credentials were supplied, or the credentials were unavailable or '
    "inaccessible: No Kerberos credentials available (default cache: "
    'FILE:/tmp/krb5cc_0)")'
)
NO_KDC = RuntimeError(
    'GSSAPIError(GssMajorCodes { raw: "0x000d0000" }, 2529639068, "Unspecified '
    "GSS failure.  Minor code may provide more information: Cannot contact any "
    "KDC for realm 'EXAMPLE.TEST'\")"
)
URL = "hdfs://nn:8020/data"


@pytest.fixture
def client_side(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("HADOOP_TOKEN_FILE_LOCATION", raising=False)
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "hdfs-site.xml").write_text(
        "<configuration><property><name>dfs.namenode.kerberos.principal</name>"
        "<value>nn/_HOST@EXAMPLE.TEST</value></property></configuration>"
    )
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    return conf


def test_no_ticket_is_one_line_saying_kinit(client_side: Path) -> None:
    err = mapped_error("list", URL, NO_CRED, namenode="hdfs://nn:8020")
    assert isinstance(err, HdfsAuthError) and isinstance(err, PermissionError)
    assert isinstance(err, HdfsError)
    text = str(err)
    assert "no valid Kerberos ticket for hdfs://nn:8020: run `kinit " in text
    assert "@EXAMPLE.TEST`" in text
    assert "\n" not in text and "GSSAPIError" not in text


def test_a_container_without_its_token_is_told_to_name_the_namenode(
    client_side: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", "/c/container_tokens")
    text = str(mapped_error("create", URL, NO_CRED, namenode="hdfs://nn:8020"))
    assert "no delegation token for hdfs://nn:8020 in this container" in text
    assert "--hdfs_namenodes" in text


def test_an_unreachable_kdc_is_named(client_side: Path) -> None:
    err = mapped_error("stat", URL, NO_KDC)
    assert isinstance(err, HdfsAuthError)
    assert "the Kerberos KDC did not answer" in str(err)


def test_other_errors_are_not_taken_for_kerberos(client_side: Path) -> None:
    assert not isinstance(
        mapped_error("stat", URL, FileNotFoundError("x")), HdfsAuthError
    )
    assert not isinstance(
        mapped_error("stat", URL, ConnectionRefusedError("Connection refused")),
        HdfsAuthError,
    )


def test_in_a_container_the_namenode_is_named_by_ip_like_its_token(
    client_side: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Outside a container Kerberos needs the host name: kept.
    assert hdfs.token_url("hdfs://localhost:8020") == "hdfs://localhost:8020"
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", "/c/container_tokens")
    assert hdfs.token_url("hdfs://localhost:8020") == "hdfs://127.0.0.1:8020"
    # An HA name service (no port) and viewfs are hdfs-native's to resolve.
    assert hdfs.token_url("hdfs://ns1") == "hdfs://ns1"
    assert hdfs.token_url("viewfs://cluster") == "viewfs://cluster"
    # fs.defaultFS spelled by host name: named by address; by address: left.
    core = client_side / "core-site.xml"
    core.write_text(
        "<configuration><property><name>fs.defaultFS</name>"
        "<value>hdfs://localhost:9000</value></property></configuration>"
    )
    assert hdfs.token_url(None) == "hdfs://127.0.0.1:9000"
    core.write_text(core.read_text().replace("localhost", "127.0.0.1"))
    assert hdfs.token_url(None) is None
