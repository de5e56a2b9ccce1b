"""The committed tfyarn/_proto code must match what proto/generate.py produces."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _generator():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(
        "generate", REPO / "proto" / "generate.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    written = _generator().generate(tmp_path)
    assert written, "proto/generate.py produced nothing"
    stale = []
    for path in written:
        committed = REPO / path.relative_to(tmp_path)
        if not committed.is_file() or committed.read_text() != path.read_text():
            stale.append(str(committed.relative_to(REPO)))
    assert not stale, (
        f"generated code is stale: {stale}; run `python proto/generate.py` and commit"
    )
