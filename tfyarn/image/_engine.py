"""The Docker engine, through its ``docker`` command line."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from typing import IO

from tfyarn.errors import TfyarnError


class ImageError(TfyarnError):
    """Building or checking an image failed; the message says what to do."""


def docker(
    args: Sequence[str],
    *,
    timeout: float,
    stdin: IO[bytes] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``docker ARGS``; on failure raise :class:`ImageError` with its last line."""
    binary = shutil.which("docker")
    if binary is None:
        raise ImageError(
            "no `docker` command on PATH: install Docker (Debian: docker.io) "
            "and start dockerd"
        )
    try:
        result = subprocess.run(
            [binary, *args],
            stdin=stdin,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ImageError(
            f"`docker {' '.join(args[:2])}` did not finish in {timeout:.0f} s"
        ) from None
    if check and result.returncode != 0:
        raise ImageError(f"`docker {' '.join(args[:2])}` failed: {last_line(result)}")
    return result


def last_line(result: subprocess.CompletedProcess[str]) -> str:
    """Docker's error in one line: the daemon's answer if any, else the last line."""
    text = result.stderr or result.stdout or ""
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    for line in lines:
        if "Error response from daemon" in line:
            return line
    return lines[-1] if lines else f"exit status {result.returncode}"


def image_exists(tag: str) -> bool:
    return docker(["image", "inspect", tag], timeout=60, check=False).returncode == 0


def require_engine() -> None:
    """Refuse early, in one line, when no Docker engine answers."""
    result = docker(
        ["version", "--format", "{{.Server.Version}}"], timeout=30, check=False
    )
    if result.returncode != 0:
        raise ImageError(
            f"the Docker engine does not answer ({last_line(result)}); start "
            "dockerd (as root) and try again"
        )
