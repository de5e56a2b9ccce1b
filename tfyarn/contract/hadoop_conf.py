"""The Hadoop client configuration: which directory, and what its site files say.

The client, the master and the task runtime all ask the same questions of a
Hadoop configuration: where it is, what ``hdfs:///`` means, which NameNodes and
ResourceManagers the cluster has, and whether it wants Kerberos. They are
answered here, once, from one parser of Hadoop's ``*-site.xml`` files.

Which directory (:func:`conf_dir`): ``$HADOOP_CONF_DIR`` if set, else the
configuration of the local cluster ``tfyarn cluster start`` runs, while it runs.
This module is the only code of tfyarn and the master that reads
``$HADOOP_CONF_DIR`` or ``$HADOOP_HOME`` (a unit test holds it to that):
everyone else asks :func:`conf_dir`, :func:`explicit_conf_dir` or
:func:`local_fallback_conf_dir`.

Each site file is parsed once per version (its path, modification time, size
and inode), so asking again is a dictionary lookup; a file changed in the last
two seconds is parsed each time until it has settled. A missing file reads as
empty, as Hadoop reads it; one that is not XML raises :class:`HadoopConfError`
naming it. Within a file the last definition of a property wins, unless an
earlier one is marked ``<final>true</final>``, as in Hadoop.

Examples
--------
>>> conf = HadoopConf("/etc/hadoop/conf")  # doctest: +SKIP
>>> conf.default_fs, conf.rm_addresses, conf.is_secure  # doctest: +SKIP
('hdfs://nn.example.com:8020', ['rm.example.com:8032'], False)
"""

from __future__ import annotations

import os
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import NamedTuple

from tfyarn.contract import local_cluster
from tfyarn.errors import ClusterError

#: The variable naming the Hadoop client configuration directory.
CONF_DIR_ENV = "HADOOP_CONF_DIR"
#: The Hadoop installation, whose ``etc/hadoop`` some readers fall back to.
HADOOP_HOME_ENV = "HADOOP_HOME"

CORE_SITE = "core-site.xml"
HDFS_SITE = "hdfs-site.xml"
YARN_SITE = "yarn-site.xml"
#: The site files a YARN client needs: core-site.xml names HDFS
#: (fs.defaultFS), yarn-site.xml the ResourceManager.
CLIENT_SITES = (CORE_SITE, YARN_SITE)

#: yarn-default.xml's port of ``yarn.resourcemanager.address``.
RM_PORT = 8032


class HadoopConfError(ClusterError):
    """The Hadoop configuration is missing, or one of its files cannot be read."""


class NameNode(NamedTuple):
    """One NameNode of an HDFS name service: its id and RPC ``host:port``."""

    id: str
    address: str


# -- which directory ----------------------------------------------------------


def local_cluster_conf_dir(home: Path | None = None) -> Path | None:
    """The local cluster's configuration directory while its NameNode runs, else None.

    ``hdfs:///`` needs a NameNode alone (either of an HA pair). Where the cluster lives (``home``,
    by default :func:`tfyarn.contract.local_cluster.default_home`) and whether
    its NameNode runs are :mod:`tfyarn.contract.local_cluster`'s to say.
    """
    home = home or local_cluster.default_home()
    namenode = local_cluster.NAMENODE_MAIN_CLASS
    if all(
        local_cluster.running_pid(home, key, namenode) is None
        for key in local_cluster.NAMENODE_KEYS
    ):
        return None
    return local_cluster.conf_dir(home)


def explicit_conf_dir() -> str | None:
    """``$HADOOP_CONF_DIR`` as set (None when unset or empty): the user's choice,
    which wins over the local cluster."""
    return os.environ.get(CONF_DIR_ENV) or None


def use_conf_dir(directory: str | os.PathLike[str]) -> None:
    """Make ``directory`` this process's ``$HADOOP_CONF_DIR`` (and its children's)."""
    os.environ[CONF_DIR_ENV] = os.fspath(directory)


def local_fallback_conf_dir() -> Path | None:
    """The running local cluster's configuration when ``$HADOOP_CONF_DIR`` is
    unset, else None: what to hand a reader that knows only the variable
    (hdfs-native, the plugin) so that ``hdfs:///`` means the same to it."""
    if explicit_conf_dir():
        return None
    return local_cluster_conf_dir()


def hadoop_home_conf_dir() -> str | None:
    """``$HADOOP_HOME/etc/hadoop``, where hdfs-native (as Hadoop's own tools)
    looks without ``$HADOOP_CONF_DIR``; None when ``$HADOOP_HOME`` is unset."""
    home = os.environ.get(HADOOP_HOME_ENV)
    return os.path.join(home, "etc", "hadoop") if home else None


def conf_dir() -> Path | None:
    """The Hadoop configuration directory this process uses, or None.

    ``$HADOOP_CONF_DIR`` if set (whether or not it exists: :func:`require_conf_dir`
    says what is wrong with it), else the running local cluster's
    (:func:`local_cluster_conf_dir`).
    """
    explicit = explicit_conf_dir()
    if explicit:
        return Path(explicit)
    return local_cluster_conf_dir()


def require_conf_dir() -> Path:
    """:func:`conf_dir`, which must be an existing directory.

    Raises
    ------
    HadoopConfError
        No configuration is known, or ``$HADOOP_CONF_DIR`` names no directory;
        the message says what to set.
    """
    directory = conf_dir()
    if directory is None:
        raise HadoopConfError(
            f"no Hadoop configuration: {CONF_DIR_ENV} is not set and no local "
            f"cluster runs. Set {CONF_DIR_ENV} to the directory holding your "
            "cluster's core-site.xml (and hdfs-site.xml, yarn-site.xml), or "
            "start the local cluster with `tfyarn cluster start`"
        )
    if not directory.is_dir():
        raise HadoopConfError(
            f"{CONF_DIR_ENV}={directory} does not exist or is not a directory; "
            f"point {CONF_DIR_ENV} at the directory holding your cluster's "
            "core-site.xml, or unset it to use `tfyarn cluster start`'s cluster"
        )
    return directory


def current() -> HadoopConf | None:
    """The configuration of :func:`conf_dir`, or None without one."""
    directory = conf_dir()
    return HadoopConf(directory) if directory is not None else None


def check_conf_dir(
    directory: str | os.PathLike[str], required: tuple[str, ...] = CLIENT_SITES
) -> Path:
    """``directory`` as a :class:`Path`, if it holds a readable client configuration.

    Hadoop silently falls back to its built-in defaults (a ResourceManager on
    ``0.0.0.0:8032``) when the directory is empty or lacks its site files, so
    they are checked before anything starts.

    Parameters
    ----------
    directory : path
        The value of ``$HADOOP_CONF_DIR``.
    required : tuple of str
        The site files that must be there and parse.

    Raises
    ------
    HadoopConfError
        The directory is missing, is not a directory, cannot be read, or lacks
        a readable ``required`` file; the message names it and what is wrong.
    """
    path = Path(directory).expanduser()
    where = f"{CONF_DIR_ENV}={directory}"
    needed = " and ".join(required)
    if not path.exists():
        raise HadoopConfError(
            f"{where} does not exist; point {CONF_DIR_ENV} at your cluster's "
            f"client configuration (the directory holding {needed}), or unset "
            "it to use `tfyarn cluster start`'s cluster"
        )
    if not path.is_dir():
        raise HadoopConfError(
            f"{where} is a file, not a directory; point {CONF_DIR_ENV} at the "
            f"directory holding {needed}"
        )
    try:
        missing = [name for name in required if not (path / name).is_file()]
        empty = not any(path.iterdir())
    except OSError as exc:
        raise HadoopConfError(
            f"cannot read {where} ({exc.strerror or exc}); point {CONF_DIR_ENV} "
            "at a client configuration you can read"
        ) from None
    if missing:
        what = "it is empty" if empty else "it has no " + " and no ".join(missing)
        raise HadoopConfError(
            f"{where} is not a Hadoop client configuration: {what} (Hadoop would "
            f"silently use its built-in defaults instead); point {CONF_DIR_ENV} "
            f"at the directory holding your cluster's {needed}"
        )
    for name in required:
        # Hadoop would fail later, with a Java stack trace in a log file.
        _read_site(os.fspath(path / name), f" (from {CONF_DIR_ENV})")
    return path


# -- the site files -----------------------------------------------------------

_SiteKey = tuple[int, int, int]  # (mtime_ns, size, inode): one version of a file
_sites: dict[str, tuple[_SiteKey, Mapping[str, str]]] = {}
_sites_lock = threading.Lock()
_MAX_SITES = 64  # a process reads one or two directories; tests make many
# A file's clock ticks coarsely (a jiffy on ext4 with older kernels, 2 s on
# FAT), so a rewrite of the same size within one tick keeps its whole version
# key: a file changed this recently is not cached until it has settled.
_SETTLE_NS = 2_000_000_000
_EMPTY: Mapping[str, str] = MappingProxyType({})


def read_site(path: str | os.PathLike[str]) -> Mapping[str, str]:
    """name -> value of one Hadoop ``*-site.xml`` file (read-only, cached).

    Parameters
    ----------
    path : path
        The file; a missing one reads as empty, as Hadoop reads it.

    Raises
    ------
    HadoopConfError
        The file exists but cannot be read or is not XML; the message names it.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> site = pathlib.Path(tempfile.mkdtemp()) / "core-site.xml"
    >>> _ = site.write_text(
    ...     "<configuration><property><name>fs.defaultFS</name>"
    ...     "<value>hdfs://nn:8020</value></property></configuration>")
    >>> dict(read_site(site))
    {'fs.defaultFS': 'hdfs://nn:8020'}
    >>> dict(read_site(site.parent / "yarn-site.xml"))
    {}
    """
    name = os.fspath(path)
    explicit = explicit_conf_dir()
    from_env = explicit and Path(name).parent == Path(explicit)
    return _read_site(name, f" (from {CONF_DIR_ENV})" if from_env else "")


def _read_site(name: str, origin: str) -> Mapping[str, str]:
    """:func:`read_site`; ``origin`` tells in an error where the file came from."""
    try:
        stat = os.stat(name)
    except (FileNotFoundError, NotADirectoryError):
        return _EMPTY
    except OSError as exc:
        raise _unreadable(name, origin, exc.strerror or str(exc)) from None
    key = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
    with _sites_lock:
        cached = _sites.get(name)
    if cached is not None and cached[0] == key:
        return cached[1]
    settled = time.time_ns() - stat.st_mtime_ns > _SETTLE_NS
    values = MappingProxyType(_parse(name, origin))
    if not settled:
        return values
    with _sites_lock:
        _sites.pop(name, None)
        _sites[name] = (key, values)
        while len(_sites) > _MAX_SITES:
            del _sites[next(iter(_sites))]  # the least recently parsed
    return values


def _parse(name: str, origin: str) -> dict[str, str]:
    try:
        root = ET.parse(name).getroot()
    except ET.ParseError as exc:
        raise _unreadable(name, origin, str(exc)) from None
    except FileNotFoundError:
        return {}  # removed since it was looked at
    except OSError as exc:
        raise _unreadable(name, origin, exc.strerror or str(exc)) from None
    values: dict[str, str] = {}
    final: set[str] = set()
    for prop in root.iter("property"):
        key = (prop.findtext("name") or "").strip()
        if not key or key in final:
            continue
        values[key] = (prop.findtext("value") or "").strip()
        if (prop.findtext("final") or "").strip().lower() == "true":
            final.add(key)
    return values


def _unreadable(name: str, origin: str, detail: str) -> HadoopConfError:
    return HadoopConfError(
        f"{name}{origin} cannot be read as a Hadoop configuration: {detail}; "
        "fix or replace the file"
    )


def realm_of(principal: str) -> str | None:
    """The realm of a Kerberos principal, or None without one.

    Examples
    --------
    >>> realm_of("nn/_HOST@EXAMPLE.COM")
    'EXAMPLE.COM'
    >>> realm_of("alice") is None
    True
    """
    return principal.rpartition("@")[2] or None if "@" in principal else None


# -- what a directory says ----------------------------------------------------


@dataclass(frozen=True)
class HadoopConf:
    """What one Hadoop configuration directory says.

    Each attribute reads the site files as they are now (through the cache of
    :func:`read_site`), so an object may be kept while the files change.

    Parameters
    ----------
    directory : path
        The configuration directory; a missing one reads as empty.
    """

    directory: Path

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        object.__setattr__(self, "directory", Path(directory))

    def site(self, name: str) -> Mapping[str, str]:
        """The properties of one site file of the directory (see :func:`read_site`)."""
        return read_site(self.directory / name)

    @property
    def core(self) -> Mapping[str, str]:
        """``core-site.xml``."""
        return self.site(CORE_SITE)

    @property
    def hdfs(self) -> Mapping[str, str]:
        """``hdfs-site.xml``."""
        return self.site(HDFS_SITE)

    @property
    def yarn(self) -> Mapping[str, str]:
        """``yarn-site.xml``."""
        return self.site(YARN_SITE)

    @property
    def default_fs(self) -> str | None:
        """``fs.defaultFS``: what ``hdfs:///`` and a bare path mean, or None."""
        return self.core.get("fs.defaultFS") or None

    @property
    def name_services(self) -> dict[str, list[NameNode]]:
        """Each HDFS name service (``dfs.nameservices``) and its NameNodes.

        A NameNode is listed by ``dfs.ha.namenodes.<ns>`` and addressed by
        ``dfs.namenode.rpc-address.<ns>.<nn>``; a service without HA ids has
        one NameNode at ``dfs.namenode.rpc-address.<ns>`` (id ``""``). A
        NameNode with no address is left out.
        """
        props = self.hdfs
        out: dict[str, list[NameNode]] = {}
        for ns in _split(props.get("dfs.nameservices", "")):
            ids = _split(props.get(f"dfs.ha.namenodes.{ns}", ""))
            if ids:
                nodes = [
                    NameNode(nn, props.get(f"dfs.namenode.rpc-address.{ns}.{nn}", ""))
                    for nn in ids
                ]
            else:
                nodes = [NameNode("", props.get(f"dfs.namenode.rpc-address.{ns}", ""))]
            out[ns] = [node for node in nodes if node.address]
        return out

    @property
    def rm_addresses(self) -> list[str]:
        """The ResourceManager address(es) a client of this configuration tries.

        ``yarn.resourcemanager.address``, else ``<yarn.resourcemanager.hostname>:8032``
        as Hadoop derives it; with HA (``yarn.resourcemanager.ha.enabled`` and
        ``yarn.resourcemanager.ha.rm-ids``), one per ResourceManager from
        ``yarn.resourcemanager.address.<id>`` (or ``hostname.<id>``).
        """
        props = self.yarn

        def address(suffix: str = "") -> str:
            explicit = props.get(f"yarn.resourcemanager.address{suffix}")
            if explicit:
                return explicit
            host = props.get(f"yarn.resourcemanager.hostname{suffix}", "0.0.0.0")
            return f"{host}:{RM_PORT}"

        ids = _split(props.get("yarn.resourcemanager.ha.rm-ids", ""))
        if props.get("yarn.resourcemanager.ha.enabled", "").lower() == "true" and ids:
            return [address(f".{i}") for i in ids]
        return [address()]

    @property
    def is_secure(self) -> bool:
        """Whether core-site.xml asks for Kerberos (``hadoop.security.authentication``)."""
        auth = self.core.get("hadoop.security.authentication", "simple")
        return auth.lower() == "kerberos"

    @property
    def realm(self) -> str | None:
        """The realm of the ResourceManager's principal, else the NameNode's, or None."""
        for principal in (
            self.yarn.get("yarn.resourcemanager.principal", ""),
            self.hdfs.get("dfs.namenode.kerberos.principal", ""),
        ):
            realm = realm_of(principal)
            if realm:
                return realm
        return None


def _split(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]
