"""Which filesystem holds a URL, and small helpers on URLs and patterns."""

from __future__ import annotations

import fnmatch
import glob as _glob
import os
import threading
from urllib.parse import urlparse

from tfyarn.data.fs.base import FileSystem
from tfyarn.data.fs.hdfs import HDFS_SCHEMES, HdfsFileSystem
from tfyarn.data.fs.local import LocalFileSystem
from tfyarn.errors import HdfsError

_FS_CACHE: dict[tuple[str, str], HdfsFileSystem] = {}
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
        Cached per NameNode, so connections are reused.

    Raises
    ------
    HdfsError
        For a scheme tfyarn cannot open (``s3://`` ...).

    Examples
    --------
    >>> fs = resolve("hdfs:///tmp/tfyarn/digits")   # doctest: +SKIP
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
    key = (scheme, parsed.netloc)
    with _FS_CACHE_LOCK:
        fs = _FS_CACHE.get(key)
        if fs is None:
            fs = _FS_CACHE[key] = HdfsFileSystem(scheme, parsed.netloc)
        return fs


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
