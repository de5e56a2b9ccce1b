"""Hatchling build hook: compile the HDFS plugin for TensorFlow with cargo.

Runs for ``pip install -e .`` (editable: the library lands next to this file,
where ``tfyarn.hdfs`` looks for it, since the package is imported from the
checkout) and for wheels (the library goes into the wheel, which becomes
platform-specific: see "Packaging" in README.md here for its tag). Beside the
library goes ``libtfyarn_hdfs.json``, the TensorFlow minor version it serves,
checked before TensorFlow loads it (tfyarn/contract/hdfs_plugin.py). Without
cargo the install goes on without the plugin, saying so in one line;
``tfyarn.enable_hdfs()`` and the helpers then say it again at the first use.

``CARGO_TARGET_DIR`` and ``CARGO_BUILD_JOBS`` are honoured (cargo reads them).
"""

from __future__ import annotations

import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

CRATE = Path(__file__).resolve().parent


def _by_path(name: str, path: Path) -> ModuleType:
    """A module of tfyarn by its path: the build environment has hatchling,
    not tfyarn's dependencies."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CONTRACT = _by_path("_tfyarn_hdfs_plugin", CRATE.parent / "contract" / "hdfs_plugin.py")
SOURCES = _by_path("_tfyarn_cargo_sources", CRATE / "cargo_sources.py")
LIBRARY: str = CONTRACT.LIBRARY


def _cargo() -> str | None:
    found = shutil.which("cargo")
    if found:
        return found
    fallback = Path.home() / ".cargo" / "bin" / "cargo"  # rustup's default
    return str(fallback) if fallback.is_file() else None


def build_plugin(*, incremental: bool = False) -> Path | None:
    """``cargo build --release`` of the crate; the built library, or None.
    ``incremental``: rustc may reuse its incremental cache (editable installs)."""
    cargo = _cargo()
    if cargo is None:
        print(
            f"tfyarn: cargo not found, installing without the hdfs:// plugin "
            f"({CONTRACT.FALLBACK}): to get it, {CONTRACT.HOW_TO_GET}",
            file=sys.stderr,
        )
        return None
    # The per-user tfyarn cache (as for Hadoop's jars), so a fresh checkout or
    # a reinstall reuses the compiled dependencies (about 3 CPU-minutes here)
    # and compiles only the plugin itself (cargo_sources.py says how).
    target: Path = SOURCES.prepare()
    env = dict(os.environ)
    # The machine's two cores are shared; cargo reads CARGO_BUILD_JOBS.
    env.setdefault("CARGO_BUILD_JOBS", "2")
    if not incremental:  # a wheel to ship: no incremental codegen (Cargo.toml)
        env.setdefault("CARGO_INCREMENTAL", "0")
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


# Libraries every manylinux policy lets a wheel use from the system (PEP 599).
MANYLINUX_SYSTEM = frozenset(
    {
        "libc.so.6",
        "libm.so.6",
        "libdl.so.2",
        "libpthread.so.0",
        "librt.so.1",
        "libgcc_s.so.1",
        "ld-linux-x86-64.so.2",
        "ld-linux-aarch64.so.1",
    }
)


def _needed(library: Path) -> list[str]:
    """The library's DT_NEEDED entries (``readelf -d``)."""
    out = subprocess.run(
        ["readelf", "-d", str(library)], capture_output=True, text=True, check=True
    ).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def platform_tag(library: Path) -> str:
    """``manylinux_2_N_<arch>`` for the newest glibc symbol version the library
    references, when it needs no library beyond manylinux's system set (so
    ``auditwheel show`` agrees); else the plain ``linux_<arch>``.

    The library does not link against TensorFlow (its C API is looked up in
    the process), so nothing of TensorFlow's is needed or bundled.
    """
    arch = platform.machine()
    plain = f"linux_{arch}"
    if sys.platform != "linux" or shutil.which("readelf") is None:
        return plain
    if not set(_needed(library)) <= MANYLINUX_SYSTEM:
        return plain
    versions = re.findall(rb"GLIBC_2\.(\d+)", library.read_bytes())
    minor = max([17, *(int(v) for v in versions)])  # 2.17: manylinux2014's floor
    return f"manylinux_2_{minor}_{arch}"


def _tensorflow_minor(dependencies: list[str]) -> str:
    for requirement in dependencies:
        if re.match(r"tensorflow(-cpu)?\b", requirement):
            minor = CONTRACT.tensorflow_minor(requirement)
            if minor:
                return str(minor)
    raise RuntimeError(
        "pyproject.toml's dependencies name no tensorflow version (>=X.Y): the "
        "hdfs:// plugin's record of what it was built for needs one"
    )


class CargoBuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        library = build_plugin(incremental=version == "editable")
        if library is None:
            return
        record = CONTRACT.write_built_for(
            library, _tensorflow_minor(self.metadata.core.dependencies)
        )
        if version == "editable":
            return
        build_data["force_include"][str(library)] = f"tfyarn/hdfs_plugin/{LIBRARY}"
        build_data["force_include"][str(record)] = f"tfyarn/hdfs_plugin/{record.name}"
        # Not a Python extension: any Python 3, one platform (as xgboost does).
        build_data["pure_python"] = False
        build_data["tag"] = f"py3-none-{platform_tag(library)}"
