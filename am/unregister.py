"""End the application for good from a master attempt that is not YARN's last.

skein's Java ApplicationMaster unregisters a FAILED or KILLED application only
on its last attempt (``runOnExit``: SUCCEEDED or ``currentAttempt >=
maxAttempts``); before that it exits without unregistering and YARN, taking
the attempt for a dead master, starts another one, which can only repeat the
outcome. A decided outcome must end the application; AM attempts are for a
master that died. So before skein's shutdown the master unregisters the
attempt itself, with the final status and diagnostics: ``Unregister.java``
calls YARN's own ``AMRMClient``, run by the JDK's source launcher on the
classpath of skein's ApplicationMaster (its JVM is this process's parent) and
authenticated by the attempt's AMRMToken, exactly as skein's calls are. A
master that crashes never gets here: YARN still starts it again.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

JAVA_SOURCE = Path(__file__).with_name("Unregister.java")
# The source launcher compiles Unregister.java, then YARN's client connects:
# a few seconds on a busy machine, bounded here.
TIMEOUT = 90.0


def jvm_classpath(pid: int | None = None, *, depth: int = 3) -> str:
    """The ``CLASSPATH`` of the nearest ancestor that has one (skein's AM JVM).

    skein removes ``CLASSPATH`` from the master's own environment.

    Raises
    ------
    LookupError
        No ancestor within ``depth`` has one (not in a skein AM container).
    """
    pid = os.getppid() if pid is None else pid
    for _ in range(depth):
        try:
            raw = Path(f"/proc/{pid}/environ").read_bytes()
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            break
        for entry in raw.split(b"\0"):
            if entry.startswith(b"CLASSPATH="):
                return entry[len(b"CLASSPATH=") :].decode()
        ppid = [ln for ln in status.splitlines() if ln.startswith("PPid:")]
        if not ppid:
            break
        pid = int(ppid[0].split()[1])
    raise LookupError("no CLASSPATH in the environment of skein's ApplicationMaster")


def java_command(classpath: str, source: Path = JAVA_SOURCE) -> list[str]:
    java_home = os.environ.get("JAVA_HOME", "")
    java = str(Path(java_home, "bin", "java")) if java_home else "java"
    return [java, "-Xmx128m", *_light_flags(), "-cp", classpath, str(source)]


def _light_flags() -> tuple[str, ...]:
    # Imported here: am/dependencies.py unregisters through this module from
    # a Python that may lack tfyarn itself, where the JVM just starts slower.
    try:
        from tfyarn.contract import jvm
    except ImportError:
        return ()
    return jvm.LIGHT_FLAGS


def unregister(status: str, diagnostics: str, *, timeout: float = TIMEOUT) -> None:
    """Unregister this application attempt with ``status`` and ``diagnostics``.

    Raises
    ------
    LookupError, OSError, subprocess.SubprocessError
        It did not happen (no JDK, no token, YARN refused, too slow): the
        caller falls back to skein's own shutdown.
    """
    done = subprocess.run(
        [*java_command(jvm_classpath()), status],
        input=diagnostics.encode(),
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise subprocess.CalledProcessError(
            done.returncode, "Unregister.java", done.stdout, done.stderr[-3000:]
        )
