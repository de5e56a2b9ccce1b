"""TensorFlow's start-up lines stay in the task's log, not in the diagnostics tail."""

from __future__ import annotations

import collections
import os
import sys
from pathlib import Path

import pytest

from tfyarn.contract.noise import is_startup_noise
from tfyarn.runtime import child as _child

# What tensorflow-cpu 2.21 printed here before a script's own error.
TF_STARTUP = [
    (
        "WARNING: All log messages before absl::InitializeLog() is called are "
        "written to STDERR"
    ),
    (
        "I0000 00:00:1795371226.718134   18095 cpu_feature_guard.cc:227] This "
        "TensorFlow binary is optimized to use available CPU instructions in "
        "performance-critical operations."
    ),
    (
        "To enable the following instructions: AVX2 FMA, in other operations, "
        "rebuild TensorFlow with the appropriate compiler flags."
    ),
    (
        "I0000 00:00:1795371234.859241   18118 grpc_server_lib.cc:467] Started "
        "server with target: grpc://localhost:23456"
    ),
]


@pytest.mark.parametrize("line", TF_STARTUP)
def test_tensorflow_startup_lines_are_noise(line: str) -> None:
    assert is_startup_noise(line)


@pytest.mark.parametrize(
    "line",
    [
        "ValueError: boom",
        '  File "train.py", line 3, in <module>',
        # Warnings and errors from TensorFlow's C++ side may be the cause.
        "W0000 00:00:1795371234.859241   18118 op_kernel.cc:1840] OP_REQUIRES failed",
        "E0000 00:00:1795371234.859241   18118 coordination_service.cc:1] Task lost",
        "I think this line is the user's own",
    ],
)
def test_other_lines_are_kept(line: str) -> None:
    assert not is_startup_noise(line)


def test_the_tail_drops_startup_lines_and_the_log_keeps_them(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    lines = [*TF_STARTUP, "Traceback (most recent call last):", "ValueError: boom"]
    script = tmp_path / "noisy.py"
    script.write_text(
        f"import sys\nsys.stderr.write({chr(10).join(lines) + chr(10)!r})\n"
    )
    tail: collections.deque[str] = collections.deque(maxlen=40)
    started = _child.start(
        [sys.executable, str(script)], dict(os.environ), cwd=tmp_path, tail=tail
    )
    assert started.popen.wait(timeout=30) == 0
    started.tee.join(timeout=5)
    assert list(tail) == ["Traceback (most recent call last):", "ValueError: boom"]
    assert capfd.readouterr().err.splitlines()[-len(lines) :] == lines
