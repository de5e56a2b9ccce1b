"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest
from _am_support import new_credentials


@pytest.fixture(scope="session")
def credentials() -> tuple[bytes, bytes]:
    """A skein-style certificate and key (CN skein-internal) for mutual TLS."""
    return new_credentials()


@pytest.fixture(autouse=True)
def _no_job_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """Unit tests never reach HDFS: an ended job's final record is absent,
    unless a test hands one in (test_client_record.py)."""
    from tfyarn.data.fs.errors import PathNotFoundError

    def absent(url: str) -> bytes:
        raise PathNotFoundError(f"{url}: no such file (unit tests keep off HDFS)")

    monkeypatch.setattr("tfyarn.client.jobs._record_bytes", absent)
