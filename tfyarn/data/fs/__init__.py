"""One small filesystem interface over HDFS (hdfs-native) and local disk.

tfyarn's Python code reaches HDFS through ``hdfs-native``: it speaks the HDFS
RPC and data-transfer protocols itself, reads ``$HADOOP_CONF_DIR`` and
understands ``viewfs://`` mount tables, where pyarrow's own HadoopFileSystem
needs libhdfs from a Hadoop tarball. The ``tfyarn.data`` readers and writers,
the CLI and the master use it, and so do the checkpoint, TensorBoard and
staging helpers in their fallback for installs without tfyarn's HDFS plugin.
TensorFlow itself opens ``hdfs://`` only through that plugin (:mod:`tfyarn.hdfs`,
on the same Rust client).

``resolve(url)`` returns a :class:`FileSystem` and the path inside it:

- ``hdfs://nn:8020/p``, ``hdfs:///p`` (the ``fs.defaultFS`` of ``$HADOOP_CONF_DIR``),
  ``viewfs://cluster/p``: :class:`HdfsFileSystem`;
- ``/p``, ``relative/p``, ``file:///p``: :class:`LocalFileSystem`.

Every HDFS failure becomes a :class:`tfyarn.errors.HdfsError` naming the URL and
what to do; the client gives up on a single unreachable NameNode after a few
quick attempts instead of retrying for minutes, rides out the failover of an HA
name service (:mod:`.failover`), and every metadata call has a deadline, so a
wrong address fails fast instead of hanging.

The package, one concept a module: :mod:`.base` (the interface and the
operations composed from it), :mod:`.local`, :mod:`.hdfs`, :mod:`.errors` (the
error classes and the mapping of client errors to them), :mod:`.failover` (how
long the client tries a target's NameNodes), :mod:`.lost_calls` (calls a
failover lost mid-call, made good), :mod:`.deadline` (the bounded
runner behind every metadata call's deadline) and :mod:`.locate`
(``resolve`` and URL helpers). Everything is importable from here.
"""

from tfyarn.data.fs.base import READ_CHUNK, FileInfo, FileSystem
from tfyarn.data.fs.errors import (
    HdfsAuthError,
    HdfsPermissionError,
    NameNodeUnreachableError,
    PathExistsError,
    PathNotFoundError,
    QuotaExceededError,
)
from tfyarn.data.fs.errors import mapped_error as _mapped_error
from tfyarn.data.fs.hdfs import DEFAULT_TIMEOUT, HdfsFileSystem
from tfyarn.data.fs.local import LocalFileSystem
from tfyarn.data.fs.locate import (
    HDFS_SCHEMES,
    default_fs,
    has_magic,
    is_remote,
    join,
    matches,
    qualify,
    resolve,
)
from tfyarn.errors import HdfsError

__all__ = [
    "DEFAULT_TIMEOUT",
    "HDFS_SCHEMES",
    "READ_CHUNK",
    "FileInfo",
    "FileSystem",
    "HdfsAuthError",
    "HdfsError",
    "HdfsFileSystem",
    "HdfsPermissionError",
    "LocalFileSystem",
    "NameNodeUnreachableError",
    "PathExistsError",
    "PathNotFoundError",
    "QuotaExceededError",
    "default_fs",
    "has_magic",
    "is_remote",
    "join",
    "matches",
    "qualify",
    "resolve",
]
