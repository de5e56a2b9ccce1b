"""A check whose tool is missing skips on a developer's machine but fails in
CI, so a green CI run has run the plugin's tests, mypy and ruff."""

from __future__ import annotations

import pytest
from _required import missing


@pytest.mark.parametrize("value", ["true", "1", "TRUE"])
def test_a_missing_tool_fails_under_ci(
    monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.fail.Exception, match="cargo is not installed"):
        missing("cargo is not installed")


@pytest.mark.parametrize("value", [None, "", "false"])
def test_a_missing_tool_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch, value: str | None
) -> None:
    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    with pytest.raises(pytest.skip.Exception, match="mypy is not installed"):
        missing("mypy is not installed")
