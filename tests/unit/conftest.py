"""Fixtures shared by the unit tests."""

from __future__ import annotations

import pytest
from _am_support import new_credentials


@pytest.fixture(scope="session")
def credentials() -> tuple[bytes, bytes]:
    """A skein-style certificate and key (CN skein-internal) for mutual TLS."""
    return new_credentials()
