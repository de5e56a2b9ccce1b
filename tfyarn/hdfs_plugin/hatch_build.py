"""Hatchling build hook: compile the HDFS plugin for TensorFlow with cargo.

Runs for ``pip install -e .`` (editable: the library lands next to this file,
where ``tfyarn.hdfs`` looks for it, since the package is imported from the
checkout) and for wheels (the library goes into the wheel, which becomes
platform-specific). Without cargo the install goes on without the plugin,
with a warning; ``tfyarn.enable_hdfs()`` then says how to get it.

``CARGO_TARGET_DIR`` and ``CARGO_BUILD_JOBS`` are honoured (cargo reads them).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

CRATE = Path(__file__).resolve().parent
LIBRARY = "libtfyarn_hdfs.so"


def _cargo() -> str | None:
    found = shutil.which("cargo")
    if found:
        return found
    fallback = Path.home() / ".cargo" / "bin" / "cargo"  # rustup's default
    return str(fallback) if fallback.is_file() else None


def _target_dir() -> Path:
    """Where cargo builds: ``CARGO_TARGET_DIR``, else the per-user tfyarn cache
    (``$TFYARN_CACHE_DIR`` or ``~/.cache/tfyarn``, as for Hadoop's jars), so a
    fresh checkout or a reinstall reuses the compiled dependencies (about 3
    CPU-minutes here) and compiles only the plugin itself (about 30 s)."""
    explicit = os.environ.get("CARGO_TARGET_DIR")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("TFYARN_CACHE_DIR") or str(Path.home() / ".cache" / "tfyarn")
    return Path(cache) / "hdfs-plugin-target"


def build_plugin() -> Path | None:
    """``cargo build --release`` of the crate; the built library, or None."""
    cargo = _cargo()
    if cargo is None:
        print(
            "tfyarn: cargo not found; installing without the hdfs:// plugin for "
            "TensorFlow (install Rust from https://rustup.rs and reinstall)",
            file=sys.stderr,
        )
        return None
    target = _target_dir()
    env = dict(os.environ)
    # The machine's two cores are shared; cargo reads CARGO_BUILD_JOBS.
    env.setdefault("CARGO_BUILD_JOBS", "2")
    start = time.monotonic()
    subprocess.run(
        [
            cargo,
            "build",
            "--release",
            "--locked",
            "--manifest-path",
            str(CRATE / "Cargo.toml"),
        ],
        check=True,
        env={**env, "CARGO_TARGET_DIR": str(target)},
    )
    print(
        f"tfyarn: built the hdfs:// plugin in {time.monotonic() - start:.0f} s",
        file=sys.stderr,
    )
    built = target / "release" / LIBRARY
    dest = CRATE / LIBRARY
    shutil.copy2(built, dest)
    return dest


class CargoBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        library = build_plugin()
        if library is None or version == "editable":
            return
        build_data["force_include"][str(library)] = f"tfyarn/hdfs_plugin/{LIBRARY}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True
