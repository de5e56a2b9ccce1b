"""Class-data sharing for the local cluster's JVMs: where archives live and
the options that make or map one.

A JVM started with ``-XX:ArchiveClassesAtExit=FILE`` writes the classes it
loaded from the class path to FILE as it exits normally; one started with
``-XX:SharedArchiveFile=FILE`` maps them instead of reading, parsing and
verifying them from the jars again. The JVM checks that the archive fits
(the same JDK, the same jars, size and time, in the same order up to the last
one it took a class from) and otherwise starts as before: a wrong or missing
archive costs only the speed it would have given. Both options arrived in
JDK 13; on an older JDK (11 is still allowed) none is given, since an
unknown option stops the JVM.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from tfyarn.cluster import _hadoop

ARCHIVE_DIR = "cds"
# The first JDK with dynamic archives (-XX:ArchiveClassesAtExit) and the
# ``cds+dynamic`` log tag.
FIRST_RELEASE = 13
# A mismatch (another JDK, a jar replaced) must not add a warning line to
# every command's or daemon's output; nor must the dump's notes on classes it
# cannot keep ("Pre JDK 6 class not supported by CDS").
QUIET = ("-Xlog:cds=off", "-Xlog:cds+dynamic=off")


def supported(java_home: Path) -> bool:
    """Whether ``java_home`` has dynamic archives (its ``release`` file says
    a version of 13 or newer; read without starting a JVM)."""
    match = re.match(r"(\d+)", _hadoop.java_release(java_home))
    return match is not None and int(match.group(1)) >= FIRST_RELEASE


def archive_dir() -> Path:
    """``<cache>/cds``: every archive, and the files being written."""
    return _hadoop.cache_root() / ARCHIVE_DIR


def archive_path(name: str, *key: str) -> Path:
    """``<cache>/cds/<name>-<digest of key>.jsa``."""
    digest = hashlib.sha256("\0".join(key).encode()).hexdigest()[:16]
    return archive_dir() / f"{name}-{digest}.jsa"


def use_options(archive: Path) -> list[str]:
    """Options that map ``archive`` when it is there and fits."""
    return [f"-XX:SharedArchiveFile={archive}", *QUIET]


def dump_options(partial: Path) -> list[str]:
    """Options that write the loaded classes to ``partial`` at a normal exit."""
    return [f"-XX:ArchiveClassesAtExit={partial}", *QUIET]
