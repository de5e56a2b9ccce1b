"""Where cargo builds the plugin, and why a fresh checkout need not recompile hdfs-native.

cargo decides that a path crate needs compiling again when one of its source
files is newer than its last build. A fresh clone gives every file the time of
the clone, so each checkout recompiled ``crc/`` (our stand-in for the crc
crate, which hdfs-native is patched to use) and so hdfs-native, although
neither changed: 80 CPU-seconds for the release build here, about as much
again for the Rust tests' build.

So the build directory in the cache is named by a digest of ``crc``'s
sources, and before cargo runs those sources get one fixed time. In a
directory named by that digest, ``crc`` was only ever built from these very
contents, so the fixed time cannot hide a change: a change makes another
digest, another directory, a full build. The plugin's own sources keep their
times (the plugin is the last crate compiled, about 20 CPU-seconds).
``CARGO_TARGET_DIR``, when set, is used as it is and no time is touched.

Standard library only: the build hook loads this file by path, before
tfyarn's dependencies exist; the Rust tests use the same directory.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

CRATE = Path(__file__).resolve().parent
CRC = CRATE / "crc"
# 2001-09-09 (10**9 s): older than any build, the same in every checkout.
FIXED_TIME_NS = 10**18


def sources(crate: Path) -> list[Path]:
    """What cargo reads of ``crate``: its manifest and ``src/``."""
    found = [crate / "Cargo.toml"]
    found += sorted(path for path in (crate / "src").rglob("*") if path.is_file())
    return found


def digest(crate: Path) -> str:
    """A digest of the names and contents of the crate's sources."""
    summed = hashlib.sha256()
    for path in sources(crate):
        summed.update(str(path.relative_to(crate)).encode() + b"\0")
        summed.update(path.read_bytes() + b"\0")
    return summed.hexdigest()


def target_dir() -> Path:
    """``CARGO_TARGET_DIR``, else ``hdfs-plugin-target/crc-<digest>`` in the
    per-user tfyarn cache (``$TFYARN_CACHE_DIR`` or ``~/.cache/tfyarn``)."""
    explicit = os.environ.get("CARGO_TARGET_DIR")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("TFYARN_CACHE_DIR") or str(Path.home() / ".cache" / "tfyarn")
    return Path(cache) / "hdfs-plugin-target" / f"crc-{digest(CRC)[:16]}"


def prepare() -> Path:
    """The directory to build in, ``crc``'s sources given their fixed time
    when it is the cache's digest-named one."""
    target = target_dir()
    if not os.environ.get("CARGO_TARGET_DIR"):
        for path in sources(CRC):
            if path.stat().st_mtime_ns != FIXED_TIME_NS:
                os.utime(path, ns=(FIXED_TIME_NS, FIXED_TIME_NS))
    return target
