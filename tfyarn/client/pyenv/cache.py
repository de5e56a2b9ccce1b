"""The per-user caches of job files on HDFS.

``hdfs:///user/<you>/.tfyarn/envs/<label>-<key>.<ext>`` holds environment
archives, ``.tfyarn/am/am-<key>.zip`` the master's code: the key is the
content's (:mod:`.key`, or a hash of the zip), so a file is uploaded once and
every later job with the same content names the same file. Uploads go to a
temporary name and are renamed into place (``FileSystem.put_file``), so a name
that exists is a complete file. YARN localizes it with PRIVATE visibility:
each NodeManager keeps one (unpacked) copy for this user's later jobs, as long
as the file's timestamp does not change (it never does: a name is written once).
"""

from __future__ import annotations

CACHE_PATH = ".tfyarn/envs"  # under the user's HDFS home
MASTER_PATH = ".tfyarn/am"


def directory(path: str = CACHE_PATH) -> str:
    from tfyarn.data import fs

    return fs.qualify(path)


def url_of(name: str, path: str = CACHE_PATH) -> str:
    return f"{directory(path).rstrip('/')}/{name}"


def has(name: str, path: str = CACHE_PATH) -> bool:
    """Whether a complete file of this name is in the cache (one RPC)."""
    from tfyarn.data import fs

    url = url_of(name, path)
    return fs.resolve(url).exists(url)


def upload(local_path: str, name: str, path: str = CACHE_PATH) -> str:
    """Put a local file into the cache under ``name``; its URL."""
    from tfyarn.data import fs

    url = url_of(name, path)
    target = fs.resolve(url)
    target.mkdirs(directory(path))
    target.put_file(local_path, url)
    return url


def ensure(local_path: str, name: str, path: str = CACHE_PATH) -> tuple[str, bool]:
    """The URL of ``name`` in the cache, uploading ``local_path`` first when it
    is not there yet; and whether it was uploaded now."""
    if has(name, path):
        return url_of(name, path), False
    return upload(local_path, name, path), True
