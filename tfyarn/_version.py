"""tfyarn's version, written once in pyproject.toml, and ``tfyarn --version``.

``--version`` names what a bug report needs: tfyarn, TensorFlow, skein,
Python, the Hadoop client on PATH, and whether TensorFlow gets ``hdfs://``
through the plugin. It reads package metadata rather than importing
TensorFlow (seconds) and asks ``yarn version`` only if a ``yarn`` is on PATH.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from tfyarn.contract import hdfs_plugin as _built

# TensorFlow's distributions, any of which provides ``import tensorflow``.
_TENSORFLOW = ("tensorflow-cpu", "tensorflow", "tensorflow-gpu", "tf-nightly")
_YARN_TIMEOUT_S = 30


def version() -> str:
    """The installed tfyarn's version (``0+unknown`` for a tree never installed)."""
    try:
        return metadata.version("tfyarn")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def _distribution(*names: str) -> str | None:
    for name in names:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def hadoop_client() -> str:
    """The first line of ``yarn version`` of the ``yarn`` on PATH."""
    yarn = shutil.which("yarn")
    if yarn is None:
        return "none (no yarn on PATH)"
    try:
        proc = subprocess.run(
            [yarn, "version"],
            capture_output=True,
            text=True,
            timeout=_YARN_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{yarn} did not answer 'yarn version': {exc}"
    first = next((ln for ln in proc.stdout.splitlines() if ln.strip()), "")
    if proc.returncode != 0 or not first:
        return f"{yarn} failed 'yarn version' (exit {proc.returncode})"
    return f"{first.strip()} ({yarn})"


def plugin(tensorflow: str | None) -> str:
    """Whether the hdfs:// plugin is installed and fits this TensorFlow."""
    from tfyarn import hdfs

    path = hdfs.plugin_path()
    if not path.is_file():
        return f"absent: {_built.NOT_INSTALLED}"
    wrong = _built.mismatch(path, tensorflow) if tensorflow else None
    return f"unusable: {wrong}" if wrong else f"present ({path})"


def report() -> str:
    """What ``tfyarn --version`` prints."""
    tensorflow = _distribution(*_TENSORFLOW)
    here = Path(__file__).resolve().parent
    return "\n".join(
        [
            f"tfyarn {version()} ({here})",
            f"TensorFlow {tensorflow or 'not installed'}",
            f"skein {_distribution('skein') or 'not installed'}",
            f"Python {sys.version.split()[0]} ({sys.executable})",
            f"Hadoop client: {hadoop_client()}",
            f"hdfs:// plugin: {plugin(tensorflow)}",
        ]
    )
