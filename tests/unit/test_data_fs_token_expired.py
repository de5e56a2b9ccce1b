"""In a container, a refused HDFS login with an ended token says the token expired."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _am_support import hdfs_token

from tfyarn.contract.tokens import TokenFile
from tfyarn.data.fs.errors import HdfsAuthError, mapped_error

GSS = RuntimeError('GSSAPIError("GSS_S_NO_CRED", "No Kerberos credentials available")')


def test_an_ended_token_is_named_with_its_end_and_the_keytab_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "container_tokens"
    issued_ms = int((time.time() - 300) * 1000)
    path.write_bytes(TokenFile((hdfs_token("10.0.0.1:8020", issued_ms),)).to_bytes())
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(path))
    error = mapped_error("open", "hdfs:///x", GSS, namenode="hdfs://")
    assert isinstance(error, HdfsAuthError)
    text = str(error)
    assert "the HDFS delegation token for fs.defaultFS was refused: it expired" in text
    assert "maximum lifetime ended at" in text and "--keytab FILE" in text
    named = mapped_error("open", "hdfs://10.0.0.1:8020/x", GSS, "hdfs://10.0.0.1:8020")
    assert "token for hdfs://10.0.0.1:8020 was refused" in str(named)
    # A NameNode it has no token for: name it at submission, as before.
    other = mapped_error("open", "hdfs://10.0.0.9:8020/x", GSS, "hdfs://10.0.0.9:8020")
    assert "--hdfs_namenodes" in str(other)
