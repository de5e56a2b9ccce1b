"""A class-data archive for skein's Java driver on the local cluster.

Every ``tfyarn`` command that talks to YARN starts skein's driver, a JVM that
loads some 5000 classes of Hadoop, gRPC and Netty from their jars before it
answers: 2.7 CPU-seconds here. Mapped from a class-data sharing archive (JDK
AppCDS, made once by a driver that ran ``-XX:ArchiveClassesAtExit``) the same
start and call take 1.8, and a whole ``tfyarn list`` 2.1 s and 2.1
CPU-seconds instead of 2.9 and 3.0.

The archive holds the classes of the jars on the driver's class path, so it
is named by what makes that path: the JDK, skein's jar (its path, size and
time) and the Hadoop line's jars. The JVM checks only the entries up to the
last one it archived a class from, which is why the local cluster's
``yarn classpath --glob`` puts the configuration directory last (no jar
carries a ``*-site.xml`` or ``log4j.properties``): one archive then serves
every local cluster of that Hadoop line, whatever its directory.

``tfyarn cluster start`` makes it in the background when it is missing
(:func:`start_making`); the driver's options always name it: a JVM given a
missing archive starts as before, without a word, and one that does not fit
(another skein) too, its warning switched off.
"""

from __future__ import annotations

import contextlib
import fcntl
import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from tfyarn.cluster import _cds, _hadoop


def skein_jar() -> Path:
    """The jar skein starts its driver from (``java/skein.jar`` in skein's
    package), found without importing skein."""
    spec = importlib.util.find_spec("skein")
    origin = spec.origin if spec else None
    return Path(origin).parent / "java" / "skein.jar" if origin else Path("skein.jar")


def archive_path(java_home: Path, hadoop_version: str) -> Path:
    """Where the archive for this JDK, skein and Hadoop line lives."""
    jar = skein_jar()
    stat = jar.stat() if jar.exists() else None
    return _cds.archive_path(
        "skein-driver",
        str(java_home.resolve()),
        _hadoop.java_release(java_home),
        str(jar),
        f"{stat.st_size}:{stat.st_mtime_ns}" if stat else "",
        str(_hadoop.lib_dir(hadoop_version)),
    )


def java_options(java_home: Path, archive: Path) -> list[str]:
    """The driver's JVM options that map ``archive`` when it is there (none
    on a JDK without dynamic archives)."""
    return _cds.use_options(archive) if _cds.supported(java_home) else []


def make(env: Mapping[str, str], archive: Path) -> bool:
    """Run one driver against the cluster in ``env`` and keep the classes it
    loaded as ``archive``. Returns whether it was made (False when another
    process is making it or the JVM wrote nothing)."""
    import skein

    archive.parent.mkdir(parents=True, exist_ok=True)
    lock = archive.with_suffix(".lock")
    with open(lock, "w") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False  # another start is making it
        if archive.exists():
            return False
        partial = archive.with_suffix(f".{os.getpid()}.tmp")
        options = [
            o
            for o in env.get("SKEIN_DRIVER_JAVA_OPTIONS", "").split()
            if not o.startswith(("-XX:SharedArchiveFile=", "-Xlog:cds"))
        ]
        os.environ.update(env)  # skein reads the cluster's from here
        client = skein.Client(
            java_options=[*options, *_cds.dump_options(partial)],
            log=str(archive.with_suffix(".log")),
        )
        try:
            client.get_applications(states=["RUNNING"])  # load what a call loads
        finally:
            client.close()  # the JVM writes the archive as it exits
        if not partial.is_file() or partial.stat().st_size == 0:
            with contextlib.suppress(OSError):
                partial.unlink()
            return False
        os.replace(partial, archive)  # whole or not at all, for JVMs starting
        archive.with_suffix(SOURCE).write_text(f"{skein_jar()}\n")
    prune(archive.parent)
    return True


# Beside each archive, the skein jar it was made from. Every new virtualenv
# (a fresh checkout, each CI run) has a skein jar of its own and so an
# archive of its own, 30-40 MB: one whose jar is gone is deleted.
SOURCE = ".source"
# An archive made before its jar was written beside it is kept this long.
UNNAMED_KEEP_S = 2 * 24 * 3600.0


def prune(directory: Path) -> list[Path]:
    """Delete the driver archives (and their lock, log and source files)
    whose skein jar no longer exists; returns the archives deleted."""
    gone = []
    now = time.time()
    for archive in directory.glob("skein-driver-*.jsa"):
        source = archive.with_suffix(SOURCE)
        with contextlib.suppress(OSError):
            if source.is_file():
                stale = not Path(source.read_text().strip()).is_file()
            else:
                stale = now - archive.stat().st_mtime > UNNAMED_KEEP_S
            if stale:
                for suffix in (".jsa", ".lock", ".log", SOURCE):
                    archive.with_suffix(suffix).unlink(missing_ok=True)
                gone.append(archive)
    return gone


def start_making(
    base_dir: Path, env: Mapping[str, str], java_home: Path, archive: Path
) -> None:
    """Make the archive in a detached process with the cluster's ``env`` (a
    driver run and its dump take several seconds the start need not wait for)."""
    if archive.exists() or not _cds.supported(java_home):
        return
    log = base_dir / "logs" / "skein-driver-archive.out"
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out, contextlib.suppress(OSError):  # only speed lost
        subprocess.Popen(
            [sys.executable, "-m", "tfyarn.cluster._driver_archive", str(archive)],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, **env},
            start_new_session=True,
        )


def main(argv: list[str]) -> int:
    """``python -m tfyarn.cluster._driver_archive ARCHIVE``, in the cluster's
    environment."""
    archive = Path(argv[0])
    made = make(dict(os.environ), archive)
    print(f"{'made' if made else 'left'} {archive}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
