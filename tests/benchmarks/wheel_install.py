"""What installing from the wheel costs against an editable install with cargo.

Usage (from a checkout, cargo on PATH, pip's cache warm)::

    python tests/benchmarks/wheel_install.py [--wheel dist/tfyarn-*.whl]

Builds the wheel (``python -m build --wheel``) unless one is given, then
times ``pip install WHEEL`` into an empty virtualenv (no cargo needed: the
plugin is inside) and ``pip install -e .`` into another (cargo builds the
plugin; its dependencies come from the shared cargo target cache, so this is
the usual, warm case). Both venvs are made in a temporary directory and
removed. The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _timed(argv: list[str], cwd: Path) -> float:
    began = time.monotonic()
    subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - began


def _venv(root: Path) -> str:
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
    return str(root / "bin" / "python")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wheel", type=Path, help="a built wheel (else one is built)")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tfyarn-wheel-bench-") as tmp:
        work = Path(tmp)
        build_s = None
        wheel = opts.wheel
        if wheel is None:
            build_s = _timed(
                [sys.executable, "-m", "build", "--wheel", "--outdir", str(work), str(REPO)],
                cwd=work,
            )  # fmt: skip
            (wheel,) = work.glob("tfyarn-*.whl")
        python = _venv(work / "from-wheel")
        wheel_s = _timed([python, "-m", "pip", "install", "-q", str(wheel)], cwd=work)
        python = _venv(work / "editable")
        editable_s = _timed(
            [python, "-m", "pip", "install", "-q", "-e", str(REPO)], cwd=work
        )
        size_mb = wheel.stat().st_size / 1e6
    result = {
        "benchmark": "wheel_install",
        "wheel": wheel.name,
        "wheel_mb": round(size_mb, 2),
        "build_wheel_s": None if build_s is None else round(build_s, 1),
        "install_wheel_s": round(wheel_s, 1),
        "install_editable_with_cargo_s": round(editable_s, 1),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
