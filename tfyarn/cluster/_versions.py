"""The Hadoop versions the local cluster is known to run, and what each needs.

One table, so that what differs between Hadoop lines is said once: the
cluster's code asks this module (``maven_profiles``, ``check_java``) instead
of comparing version strings. Every entry was started here with real daemons
and ran jobs (``tests/integration/versions``); ``tfyarn/cluster/README.md``
has the evidence. A version not in the table is refused, naming those in it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from tfyarn.errors import ClusterError

#: The version every other tier runs on: ``<hadoop.version>`` in
#: ``conf/hadoop/pom.xml`` (a unit test keeps the two equal).
DEFAULT_VERSION = "3.4.3"

#: Maven profile of ``conf/hadoop/pom.xml`` that adds
#: ``javax.activation-api``. Hadoop 3.1 and older use ``javax.activation``
#: (Jersey, in the ResourceManager's and NodeManager's web apps) without
#: depending on it: the JDK carried it until Java 11 removed it. Without the
#: jar both daemons die at start with ``NoClassDefFoundError:
#: javax/activation/DataSource`` on Java 11 and 17 alike.
JAVAX_ACTIVATION = "javax-activation"

#: Java 9+ flags for Hadoop 3.1's Kerberos code. Its ``KerberosUtil``
#: (hadoop-auth) reads the default realm and the GSS OIDs by reflection on
#: the JDK's ``sun.security.krb5.Config`` and ``sun.security.jgss.GSSUtil``,
#: which Java 17 no longer exports: every secure daemon dies at start with
#: ``IllegalArgumentException: Can't get Kerberos realm`` (caused by
#: ``KerberosUtil cannot access class sun.security.krb5.Config (in module
#: java.security.jgss)``). Later lines ask ``javax.security.auth.kerberos``
#: instead. Harmless on a cluster without Kerberos.
KERBEROS_INTERNALS = tuple(
    f"--add-exports=java.security.jgss/{package}=ALL-UNNAMED"
    for package in ("sun.security.krb5", "sun.security.jgss")
)


@dataclasses.dataclass(frozen=True)
class KnownVersion:
    """One Hadoop release the local cluster runs.

    Parameters
    ----------
    version : str
        The release, as on Maven Central (``3.3.6``).
    line : str
        Its release line (``3.3``).
    shipped_by : str
        Distributions that ship this line, for the user picking a version.
    java_tested : tuple of int
        JDK major versions the cluster and jobs ran on here.
    maven_profiles : tuple of str
        Profiles of ``conf/hadoop/pom.xml`` the fetch activates.
    java9_flags : tuple of str
        Flags every JVM of the cluster (daemons, CLIs, containers) needs on
        Java 9 and newer, beside those all versions get.
    notes : str
        What is known to differ or not to work.
    """

    version: str
    line: str
    shipped_by: str
    java_tested: tuple[int, ...]
    maven_profiles: tuple[str, ...] = ()
    java9_flags: tuple[str, ...] = ()
    notes: str = ""


KNOWN: Mapping[str, KnownVersion] = {
    v.version: v
    for v in (
        KnownVersion(
            "3.4.3",
            "3.4",
            "Apache 3.4.x, the newest managed clusters",
            java_tested=(17,),
            notes="the pinned version: every test tier runs on it",
        ),
        KnownVersion(
            "3.3.6",
            "3.3",
            "Amazon EMR 7.0-7.2, Google Dataproc 2.3",
            java_tested=(17,),
            notes="the GPU plugin refuses a discovery path that ends in "
            "nvidia-smi (tfyarn gives it the directory)",
        ),
        KnownVersion(
            "3.2.4",
            "3.2",
            "Apache 3.2 (end of life)",
            java_tested=(17,),
            notes="upstream supports Java 8 only on this line; the "
            "ResourceManager's node report has no totalResource "
            "(tfyarn adds used and available)",
        ),
        KnownVersion(
            "3.1.4",
            "3.1",
            "Apache 3.1 (end of life)",
            java_tested=(17,),
            maven_profiles=(JAVAX_ACTIVATION,),
            java9_flags=KERBEROS_INTERNALS,
            notes="upstream supports Java 8 only on this line; needs "
            "javax.activation-api on Java 11+; no totalResource in the "
            "ResourceManager's node report",
        ),
        KnownVersion(
            "3.1.1",
            "3.1",
            "Cloudera CDP 7.1.x, Hortonworks HDP 3.1",
            java_tested=(11, 17),
            maven_profiles=(JAVAX_ACTIVATION,),
            java9_flags=KERBEROS_INTERNALS,
            notes="as 3.1.4; the NodeManager logs a harmless 'Unknown event "
            "arrived at ContainerScheduler: RECOVERY_COMPLETED' at start; "
            "Kerberos on Java 9+ needs the JDK's krb5 internals exported "
            "(tfyarn does); no /isActive servlet (HA states read from JMX)",
        ),
    )
}


def known_list() -> str:
    """The known versions for a message: ``3.4.3, 3.3.6, ...``."""
    return ", ".join(KNOWN)


def lookup(version: str) -> KnownVersion:
    """The table's entry for ``version``.

    Raises
    ------
    ClusterError
        ``version`` is not in the table; the message names those that are.
    """
    entry = KNOWN.get(str(version).strip())
    if entry is None:
        raise ClusterError(
            f"Hadoop {version!r} is not a version the local cluster is known to "
            f"run; pick one of {known_list()} (default {DEFAULT_VERSION}). "
            "The one nearest your production cluster's line is the best "
            "rehearsal: 3.1.1 for CDP 7.1 and HDP 3.1, 3.3.6 for EMR 7 and "
            "Dataproc 2.3."
        )
    return entry


def java_note(version: str, java_major: int) -> str | None:
    """A warning when ``version`` has not been run here on this JDK, else None.

    Not a refusal: Hadoop 3 runs on Java 8 and newer, and a JDK outside the
    table may well work; the user only learns it is untried.
    """
    entry = lookup(version)
    if java_major in entry.java_tested:
        return None
    tried = ", ".join(map(str, entry.java_tested))
    return (
        f"Note: Hadoop {entry.version} has not been run with tfyarn on Java "
        f"{java_major} (it ran on Java {tried}); if a daemon fails to start, "
        "set JAVA_HOME to one of those."
    )


def check_switch(base_dir: Path, before: str | None, version: str) -> None:
    """Refuse to start ``version`` on HDFS data another version formatted.

    A NameNode does not read an older release's metadata without an explicit
    ``-upgrade``, nor a newer one's at all; a stopped cluster asked for another
    Hadoop version is refused before any daemon starts.

    Parameters
    ----------
    base_dir : Path
        The cluster's base directory.
    before : str or None
        The Hadoop version of the cluster's last start (None: a new cluster).
    version : str
        The version asked for now.

    Raises
    ------
    ClusterError
        ``version`` differs from the last start's and HDFS holds data.
    """
    if before is None or before == version:
        return
    formatted = any((base_dir / "data").glob("namenode*/current/VERSION"))
    if formatted:
        raise ClusterError(
            f"the local cluster in {base_dir} holds HDFS data of Hadoop {before}, "
            f"which Hadoop {version}'s NameNode cannot take over in place. Run "
            f"`tfyarn cluster stop --wipe --base_dir {base_dir}` to start afresh "
            f"on {version} (its HDFS data is deleted), or give another --base_dir "
            "(and --port_offset) for a second cluster."
        )
