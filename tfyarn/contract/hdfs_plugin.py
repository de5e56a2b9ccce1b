"""What the ``hdfs://`` plugin was built for, and what is said when it is not used.

The build hook (tfyarn/hdfs_plugin/hatch_build.py) writes a small JSON file
beside the library naming the TensorFlow minor version whose filesystem C API
the plugin's hand-written structs follow (``src/ffi.rs``). Before TensorFlow
is given the library (:func:`tfyarn.hdfs.enable`, and the task runtime's
``sitecustomize``) the running TensorFlow is checked against it: another minor
version may lay the tables out differently, which would crash the process
rather than fail, so a mismatch is one line and the fallback route instead.

Standard library only: the build hook and the task runtime's
``sitecustomize`` load this file by path, without tfyarn's dependencies.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

#: The library's file name, in ``tfyarn/hdfs_plugin/``.
LIBRARY = "libtfyarn_hdfs.so"
#: What it was built for, beside it.
BUILT_FOR = "libtfyarn_hdfs.json"

#: How to get the plugin where it is missing.
HOW_TO_GET = (
    "install a tfyarn wheel (pip install tfyarn-*.whl, or from your package "
    "index), or reinstall tfyarn with cargo on PATH (https://rustup.rs)"
)
#: The route tfyarn takes without it.
FALLBACK = (
    "tfyarn.checkpoint and tfyarn.data copy through local disk; plain "
    "TensorFlow cannot open hdfs:// paths"
)
#: The one line said at install (no cargo) and at the first hdfs:// use.
NOT_INSTALLED = f"tfyarn's HDFS plugin for TensorFlow is not installed: {HOW_TO_GET}"


def built_for_path(library: Path) -> Path:
    return library.with_name(BUILT_FOR)


def write_built_for(library: Path, tensorflow: str) -> Path:
    """Record beside ``library`` the TensorFlow minor version it serves."""
    path = built_for_path(library)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"tensorflow": tensorflow, "filesystem_abi": 0}) + "\n")
    tmp.replace(path)
    return path


def tensorflow_minor(requirement: str) -> str | None:
    """``"2.21"`` from a requirement such as ``tensorflow-cpu>=2.21,<2.22``."""
    found = re.search(r">=\s*(\d+)\.(\d+)", requirement)
    return f"{found.group(1)}.{found.group(2)}" if found else None


def mismatch(library: Path, tensorflow_version: str) -> str | None:
    """Why ``library`` must not be loaded into this TensorFlow, or None.

    A library without its record (an older build, a hand-built one named by
    ``TFYARN_HDFS_PLUGIN``) is trusted, as before the record existed.
    """
    try:
        built = json.loads(built_for_path(library).read_text())["tensorflow"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    running = ".".join(tensorflow_version.split(".")[:2])
    if running == built:
        return None
    return (
        f"tfyarn's HDFS plugin {library} was built for TensorFlow {built}, "
        f"this is TensorFlow {tensorflow_version}: not loading it ({FALLBACK}); "
        f"install the tfyarn release built for TensorFlow {running}"
    )
