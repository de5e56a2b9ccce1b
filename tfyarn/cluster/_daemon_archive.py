"""Class-data archives for the local cluster's daemons and one-shot commands.

A NameNode, DataNode, NodeManager or ResourceManager loads thousands of
classes from Hadoop's jars as it starts: 2.8, 2.5, 3.1 and 4.7 CPU-seconds
here, 13 for a cluster. Mapped from an archive (:mod:`._cds`) they take 1.7,
1.5, 2.1 and 3.6-4.7. The test suite starts some ninety daemons.

An archive is named by the daemon's main class (or the command's name), the
JDK and the Hadoop line's jars; the daemons' class path lists the jars first
(:func:`tfyarn.cluster._hadoop.daemon_classpath`), so the JVM never compares
the cluster's own configuration directory and one archive serves every local
cluster of that line.

Where no archive exists yet, the daemon starts with ``-XX:ArchiveClassesAtExit``
naming a pending file of its own. The JVM writes it as it exits normally, so
it holds every class the daemon loaded in its life, not only its start's.
``tfyarn cluster stop`` keeps it as the archive when the daemon ended on its
SIGTERM (:func:`keep`) and deletes it when the daemon had to be killed
(:func:`discard`); a daemon killed on purpose (``cluster kill``) writes none.
A one-shot command keeps its file when it exits 0.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import time
from pathlib import Path

from tfyarn.cluster import _cds, _hadoop
from tfyarn.contract import local_cluster


def archive_path(java_home: Path, hadoop_version: str, role: str) -> Path:
    """The archive of ``role`` (a main class's simple name, or a one-shot
    command's name) for this JDK and Hadoop line."""
    return lib_archive_path(java_home, _hadoop.lib_dir(hadoop_version), role)


def lib_archive_path(java_home: Path, lib_dir: Path, role: str) -> Path:
    """The same, for the Hadoop line whose jars are in ``lib_dir``."""
    return _cds.archive_path(
        role, str(java_home.resolve()), _hadoop.java_release(java_home), str(lib_dir)
    )


def role_of(main_class: str) -> str:
    """``org.apache.hadoop.hdfs.server.namenode.NameNode`` -> ``NameNode``."""
    return main_class.rpartition(".")[2]


def _token(base_dir: Path, key: str) -> str:
    return hashlib.sha256(f"{base_dir}\0{key}".encode()).hexdigest()[:12]


def _pending(archive: Path, base_dir: Path, key: str) -> Path:
    return archive.with_name(f"{archive.stem}.{_token(base_dir, key)}.tmp")


def launch_options(
    java_home: Path, hadoop_version: str, role: str, base_dir: Path, key: str
) -> list[str]:
    """The JVM options of daemon ``key`` of the cluster in ``base_dir``: map
    the archive, or write a pending one at exit when there is none yet."""
    if not _cds.supported(java_home):
        return []
    archive = archive_path(java_home, hadoop_version, role)
    if archive.is_file():
        return _cds.use_options(archive)
    _sweep(archive.parent)
    partial = _pending(archive, base_dir, key)
    try:
        partial.parent.mkdir(parents=True, exist_ok=True)
        partial.unlink(missing_ok=True)  # an earlier life's, written or not
    except OSError:
        return []  # an unwritable cache costs only speed
    return _cds.dump_options(partial)


# What a daemon writing its archive as it exits adds to its stop: tens of
# MB of classes, 1-2 s on an idle machine, over 20 s on two cores under a
# test run's load (a stop that SIGKILLs it then loses the archive, and the
# next life writes it again).
DUMP_GRACE_S = 60.0


def writes_at_exit(pid: int) -> bool:
    """Whether the JVM ``pid`` writes an archive as it exits."""
    return any(
        arg.startswith("-XX:ArchiveClassesAtExit=")
        for arg in local_cluster.command_line(pid)
    )


def stop_grace(pid: int, grace: float) -> float:
    """How long to wait for daemon ``pid`` after SIGTERM, given the ``grace``
    it needs without an archive to write."""
    return grace + DUMP_GRACE_S if writes_at_exit(pid) else grace


def keep(base_dir: Path, key: str) -> bool:
    """Daemon ``key`` exited normally: its pending file, written whole before
    the JVM exited, becomes the archive unless another already did. Returns
    whether it did."""
    kept = False
    for partial in _pendings(base_dir, key):
        archive = partial.with_name(partial.name.split(".", 1)[0] + ".jsa")
        with contextlib.suppress(OSError):
            if partial.stat().st_size > 0 and not archive.exists():
                os.replace(partial, archive)  # whole or not at all
                kept = True
    discard(base_dir, key)
    return kept


def discard(base_dir: Path, key: str) -> None:
    """Delete daemon ``key``'s pending file (it was killed: maybe half written)."""
    for partial in _pendings(base_dir, key):
        partial.unlink(missing_ok=True)


# A pending file appears only as its JVM exits: one older than this was left
# by a daemon that ended without a stop (it failed, or its cluster was
# abandoned); 30-50 MB each, so it is deleted.
STALE_S = 600.0


def _sweep(directory: Path) -> None:
    now = time.time()
    for partial in directory.glob("*.tmp"):
        with contextlib.suppress(OSError):
            if now - partial.stat().st_mtime > STALE_S:
                partial.unlink()


def _pendings(base_dir: Path, key: str) -> list[Path]:
    return sorted(_cds.archive_dir().glob(f"*.{_token(base_dir, key)}.tmp"))
