"""Which filesystem holds a URL, and small helpers on URLs and patterns."""

from __future__ import annotations

import fnmatch
import glob as _glob
import os
import threading
from urllib.parse import urlparse

from tfyarn.contract import hadoop_conf
from tfyarn.data.fs.base import FileSystem
from tfyarn.data.fs.hdfs import HDFS_SCHEMES, HdfsFileSystem, default_fs
from tfyarn.data.fs.local import LocalFileSystem
from tfyarn.errors import HdfsError

_FS_CACHE: dict[tuple[str, str, str], HdfsFileSystem] = {}
_FS_CACHE_LOCK = threading.Lock()
_LOCAL = LocalFileSystem()


def is_remote(url: str) -> bool:
    """Whether ``url`` names an HDFS/ViewFS location (not local disk)."""
    return urlparse(url).scheme in HDFS_SCHEMES


def resolve(url: str) -> FileSystem:
    """The filesystem that holds ``url``.

    Parameters
    ----------
    url : str
        ``hdfs://[namenode]/path``, ``viewfs://cluster/path``, ``file:///path``
        or a plain local path.

    Returns
    -------
    FileSystem
        Cached per NameNode and Hadoop config dir, so connections are reused
        and ``hdfs:///`` follows a changed ``HADOOP_CONF_DIR``.

    Raises
    ------
    HdfsError
        For a scheme tfyarn cannot open (``s3://`` ...).

    Examples
    --------
    >>> fs = resolve("hdfs:///tmp/tfyarn/digits")
    >>> [i.url for i in fs.glob("hdfs:///tmp/tfyarn/digits/train-*")]  # doctest: +SKIP
    """
    parsed = urlparse(url)
    scheme = parsed.scheme
    if scheme in ("", "file") or (len(scheme) == 1 and os.name == "nt"):
        return _LOCAL
    if scheme not in HDFS_SCHEMES:
        raise HdfsError(
            f"cannot open {url}: unknown scheme {scheme!r} (known: hdfs://, "
            "viewfs://, file:// and plain local paths)"
        )
    # The config decides what hdfs:/// means and how to log in: a client made
    # under another HADOOP_CONF_DIR would talk to another cluster.
    key = (scheme, parsed.netloc, hadoop_conf.explicit_conf_dir() or "")
    with _FS_CACHE_LOCK:
        fs = _FS_CACHE.get(key)
        if fs is None:
            fs = _FS_CACHE[key] = HdfsFileSystem(scheme, parsed.netloc)
        return fs


def qualify(path: str, *, user: str | None = None) -> str:
    """A full URL for a path typed on the command line, the way ``hdfs dfs`` reads it.

    A URL with a scheme is kept; a bare path means ``fs.defaultFS`` (absolute,
    or relative to ``/user/<user>``). The local disk is ``file:///...``.

    Raises
    ------
    HdfsError
        A bare path with no Hadoop configuration to say what it means.

    Examples
    --------
    >>> qualify("file:///tmp/x")
    'file:///tmp/x'
    >>> qualify("/tmp/x")  # with fs.defaultFS hdfs://127.0.0.1:8020
    'hdfs://127.0.0.1:8020/tmp/x'
    """
    if urlparse(path).scheme:
        return path
    default = default_fs()
    if default is None:
        raise HdfsError(
            f"{path!r} is a bare path, which means the default filesystem "
            "(fs.defaultFS, as in `hdfs dfs`), but no Hadoop configuration was found: "
            "set HADOOP_CONF_DIR or start the local cluster, or write "
            f"file://{os.path.abspath(path)} for the local disk"
        )
    if not path.startswith("/"):
        from tfyarn.data.fs.errors import _local_user

        who = user or os.environ.get("HADOOP_USER_NAME") or _local_user()
        path = f"/user/{who}/{path}"
    return default.rstrip("/") + path


def join(base: str, *parts: str) -> str:
    """Join URL or path components with ``/``."""
    out = base.rstrip("/")
    for p in parts:
        out += "/" + p.strip("/")
    return out


def has_magic(pattern: str) -> bool:
    """Whether a path contains glob characters."""
    return _glob.has_magic(pattern)


def matches(name: str, pattern: str) -> bool:
    """Shell-style match of a base name."""
    return fnmatch.fnmatchcase(name, pattern)
