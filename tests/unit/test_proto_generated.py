"""The committed tfyarn/_proto code must match what proto/generate.py produces."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    # In a subprocess: grpc_tools' protoc crashes a process that already
    # loaded TensorFlow's or pyarrow's protobuf (other tests do).
    done = subprocess.run(
        [sys.executable, str(REPO / "proto" / "generate.py"), str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    written = [Path(line) for line in done.stdout.split()]
    assert written, "proto/generate.py produced nothing"
    stale = []
    for path in written:
        committed = REPO / path.relative_to(tmp_path)
        if not committed.is_file() or committed.read_text() != path.read_text():
            stale.append(str(committed.relative_to(REPO)))
    assert not stale, (
        f"generated code is stale: {stale}; run `python proto/generate.py` and commit"
    )
