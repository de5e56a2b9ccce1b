"""Java and the Hadoop jars: find the one, fetch the other from Maven Central once."""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
import zipfile
from pathlib import Path

from tfyarn import _paths
from tfyarn.cluster import _versions
from tfyarn.cluster._versions import DEFAULT_VERSION
from tfyarn.errors import ClusterError

# Flags the Hadoop scripts add on Java 9+: Hadoop 3.4 reflects into these packages.
ADD_OPENS_PACKAGES = (
    "java.base/java.io",
    "java.base/java.lang",
    "java.base/java.lang.reflect",
    "java.base/java.math",
    "java.base/java.net",
    "java.base/java.nio",
    "java.base/java.text",
    "java.base/java.util",
    "java.base/java.util.concurrent",
    "java.base/java.util.zip",
    "java.base/sun.nio.ch",
    "java.base/sun.security.util",
    "java.base/sun.security.x509",
)
ADD_OPENS = tuple(f"--add-opens={pkg}=ALL-UNNAMED" for pkg in ADD_OPENS_PACKAGES)

FETCH_TIMEOUT_S = 900
COMPLETE_MARKER = ".complete"


def pom_path() -> Path:
    return _paths.conf_dir() / "hadoop" / "pom.xml"


def pinned_version(pom: Path | None = None) -> str:
    """The Hadoop version pinned in ``conf/hadoop/pom.xml`` (the default)."""
    pom = pom or pom_path()
    match = re.search(r"<hadoop\.version>([^<]+)</hadoop\.version>", pom.read_text())
    if not match:
        raise ClusterError(f"{pom} does not set <hadoop.version>; reinstall tfyarn")
    return match.group(1).strip()


def cache_root() -> Path:
    """Per-user cache of Hadoop jars: ``$TFYARN_CACHE_DIR`` or ``~/.cache/tfyarn``."""
    explicit = os.environ.get("TFYARN_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser().resolve()
    cache_home = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return (Path(cache_home).expanduser() / "tfyarn").resolve()


def find_java_home() -> Path:
    """The JDK the daemons run on: ``$JAVA_HOME``, else the ``java`` on PATH."""
    explicit = os.environ.get("JAVA_HOME")
    if explicit:
        home = Path(explicit)
        if (home / "bin" / "java").is_file():
            return home.resolve()
        raise ClusterError(
            f"JAVA_HOME={explicit} has no bin/java. Point JAVA_HOME at a JDK 11 or "
            "newer (e.g. /usr/lib/jvm/java-17-openjdk-amd64), or unset it to use "
            "the java on PATH."
        )
    java = shutil.which("java")
    if java is None:
        raise ClusterError(
            "no Java found: the local Hadoop cluster runs on a JDK 11 or newer, but "
            "JAVA_HOME is unset and there is no `java` on PATH. Install one (e.g. "
            "`apt-get install openjdk-17-jdk-headless`) or set JAVA_HOME, then run "
            "`tfyarn cluster start` again."
        )
    return Path(java).resolve().parent.parent


def java_major_version(java_home: Path) -> int:
    """The major version of ``java_home``'s java (8, 11, 17, ...)."""
    try:
        out = subprocess.run(
            [str(java_home / "bin" / "java"), "-version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        ).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ClusterError(f"cannot run {java_home}/bin/java -version: {exc}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if not match:
        raise ClusterError(
            f"cannot tell the version of {java_home}/bin/java (it printed "
            f"{out.strip()[:200]!r}); set JAVA_HOME to a JDK 11 or newer"
        )
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_392"
        major = int(match.group(2))
    return major


def java_release(java_home: Path) -> str:
    """``java_home``'s full version (``17.0.15``) from its ``release`` file,
    read without starting a JVM; "" when the file does not say."""
    try:
        text = (java_home / "release").read_text(errors="replace")
    except OSError:
        return ""
    match = re.search(r'^JAVA_VERSION="?([^"\n]+)"?', text, re.MULTILINE)
    return match.group(1).strip() if match else ""


def process_java_home(pid: int) -> Path | None:
    """The JDK a running JVM was started from (``/proc/<pid>/exe`` is its
    ``bin/java``), or None when that is not readable."""
    try:
        exe = Path(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return None
    return exe.parent.parent if exe.name == "java" else None


def java_module_flags(
    java_home: Path, version: str = DEFAULT_VERSION
) -> tuple[str, ...]:
    """``--add-opens`` flags (and those ``version``'s line needs) on Java 9+,
    nothing on Java 8."""
    if java_major_version(java_home) < 9:
        return ()
    return (*ADD_OPENS, *_versions.lookup(version).java9_flags)


def install_dir(version: str = DEFAULT_VERSION) -> Path:
    """``<cache>/hadoop/<version>-<digest>``, one per Hadoop version; the digest
    covers the pom and the version's Maven profiles, so a changed pom fetches
    afresh."""
    content = pom_path().read_bytes()
    profiles = _versions.lookup(version).maven_profiles
    if profiles:
        content += ("\n" + ",".join(profiles)).encode()
    digest = hashlib.sha256(content).hexdigest()[:8]
    return cache_root() / "hadoop" / f"{version}-{digest}"


def lib_dir(version: str = DEFAULT_VERSION) -> Path:
    """The jars (``yarn.application.classpath`` lists them)."""
    return install_dir(version) / "lib"


def resources_dir(version: str = DEFAULT_VERSION) -> Path:
    """Holds ``webapps/``: the NameNode and DataNode web apps, not in any main jar."""
    return install_dir(version) / "resources"


def daemon_classpath(conf_dir: Path, version: str = DEFAULT_VERSION) -> str:
    """The jars first, the directories last: a class-data archive is checked
    against the class path only up to the last jar it took a class from, so
    one archive fits every cluster's configuration directory (no jar carries
    a ``*-site.xml`` or ``log4j.properties`` that the directory's would lose to)."""
    return f"{lib_dir(version)}/*:{resources_dir(version)}:{conf_dir}"


def is_fetched(version: str = DEFAULT_VERSION) -> bool:
    return (install_dir(version) / COMPLETE_MARKER).is_file()


def maven_command(mvn: str, version: str, output: Path) -> list[str]:
    """``mvn dependency:copy-dependencies`` of ``version``'s jars into ``output``:
    the pom's version given on the command line, with the version's profiles."""
    profiles = _versions.lookup(version).maven_profiles
    return [
        mvn,
        "-B",
        "-f",
        str(pom_path()),
        "dependency:copy-dependencies",
        f"-Dhadoop.version={version}",
        *([f"-P{','.join(profiles)}"] if profiles else []),
        "-DincludeScope=runtime",
        f"-DoutputDirectory={output}",
    ]


def fetch_hadoop(
    version: str = DEFAULT_VERSION, *, timeout: float = FETCH_TIMEOUT_S, log=print
) -> Path:
    """The directory of Hadoop ``version``'s jars, fetched with Maven on first use.

    Jars land in ``<cache>/hadoop/<version>-<digest>/lib``; a marker file
    written last makes a half-finished fetch count as not fetched, and a lock
    keeps two concurrent starts from fetching at once.
    """
    target = lib_dir(version)
    if is_fetched(version):
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ClusterError(
            f"Maven is needed once to fetch Hadoop {version}'s jars from Maven "
            "Central, but there is no `mvn` on PATH. Install it (e.g. `apt-get "
            "install maven`) and run `tfyarn cluster start` again."
        )
    version_dir = target.parent
    version_dir.mkdir(parents=True, exist_ok=True)
    with open(version_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if is_fetched(version):
            return target
        log(f"Fetching Hadoop {version} jars from Maven Central into {version_dir} ...")
        started = time.monotonic()
        staging = Path(tempfile.mkdtemp(prefix="lib.", dir=version_dir))
        mvn_log = version_dir / "mvn.log"
        command = maven_command(mvn, version, staging)
        try:
            with open(mvn_log, "w") as out:
                proc = subprocess.run(
                    command,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    timeout=timeout,
                    check=False,
                    cwd=version_dir,
                )
        except subprocess.TimeoutExpired as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise ClusterError(
                f"fetching Hadoop {version} with Maven took longer than {timeout:.0f} "
                f"s; see {mvn_log}. Check the connection to Maven Central (or your "
                "Maven mirror in ~/.m2/settings.xml) and try again."
            ) from exc
        if proc.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            raise ClusterError(_maven_failure(version, mvn_log))
        _extract_webapps(staging, resources_dir(version))
        if target.exists():
            shutil.rmtree(target)
        # mkdtemp made it 0700: containers that run as another user (the
        # LinuxContainerExecutor's) read these jars through their classpath.
        staging.chmod(0o755)
        staging.rename(target)
        (version_dir / COMPLETE_MARKER).write_text(f"{version}\n")
        log(
            f"Fetched {len(list(target.glob('*.jar')))} jars in "
            f"{time.monotonic() - started:.0f} s."
        )
    return target


def prepare(version: str, java_home: Path, *, log=print) -> Path:
    """Hadoop ``version``'s jars (fetched on first use), after a note when
    ``version`` has not been run on ``java_home``'s JDK."""
    note = _versions.java_note(version, java_major_version(java_home))
    if note:
        log(note)
    return fetch_hadoop(version, log=log)


def _extract_webapps(jars: Path, dest: Path) -> None:
    """Unpack ``webapps/`` from hadoop-hdfs's tests jar, then drop the jar so its
    test classes stay off every classpath."""
    tests_jars = list(jars.glob("hadoop-hdfs-*-tests.jar"))
    if not tests_jars:
        raise ClusterError(
            f"the Maven fetch produced no hadoop-hdfs tests jar in {jars}; "
            f"{pom_path()} must list it (it carries the NameNode web app)"
        )
    shutil.rmtree(dest, ignore_errors=True)
    with zipfile.ZipFile(tests_jars[0]) as jar:
        members = [m for m in jar.namelist() if m.startswith("webapps/")]
        jar.extractall(dest, members)
    for jar_path in tests_jars:
        jar_path.unlink()


_NETWORK_HINTS = (
    "Could not transfer",  # artifact or metadata
    "transfer failed for",
    # With no network the dependency plugin itself cannot be resolved:
    "No plugin found for prefix",
    "Unknown host",
    "UnknownHostException",
    "Connection refused",
    "Connect timed out",
    "Network is unreachable",
    "offline mode",
)


def _maven_failure(version: str, mvn_log: Path) -> str:
    text = mvn_log.read_text(errors="replace") if mvn_log.exists() else ""
    errors = [line for line in text.splitlines() if line.startswith("[ERROR]")]
    first = errors[0][len("[ERROR]") :].strip() if errors else "no [ERROR] line"
    if any(hint in text for hint in _NETWORK_HINTS):
        return (
            f"Maven could not download Hadoop {version}'s jars: Maven Central (or "
            f"the mirror in ~/.m2/settings.xml) is unreachable ({first[:300]}). "
            f"Full output: {mvn_log}. Check the network or proxy settings for "
            "Maven, then run `tfyarn cluster start` again; later starts reuse the "
            "cached jars and need no network."
        )
    return (
        f"Maven failed to fetch Hadoop {version}'s jars ({first[:300]}). Full "
        f"output: {mvn_log}. Fix the cause shown there, then run "
        "`tfyarn cluster start` again."
    )
