"""The per-user cache of environment archives on HDFS.

``hdfs:///user/<you>/.tfyarn/envs/<label>-<key>.<ext>``: the key is the
content's (:mod:`.key`), so an archive is uploaded once and every later job
with the same content names the same file. Uploads go to a temporary name
and are renamed into place (``FileSystem.put_file``), so a name that exists is
a complete archive. YARN localizes it with PRIVATE visibility: each
NodeManager keeps one unpacked copy for this user's later jobs, as long as the
file's timestamp does not change (it never does: a name is written once).
"""

from __future__ import annotations

CACHE_PATH = ".tfyarn/envs"  # under the user's HDFS home


def directory() -> str:
    from tfyarn.data import fs

    return fs.qualify(CACHE_PATH)


def url_of(name: str) -> str:
    return f"{directory().rstrip('/')}/{name}"


def has(name: str) -> bool:
    """Whether a complete archive of this name is in the cache (one RPC)."""
    from tfyarn.data import fs

    url = url_of(name)
    return fs.resolve(url).exists(url)


def upload(local_path: str, name: str) -> str:
    """Put a local archive into the cache under ``name``; its URL."""
    from tfyarn.data import fs

    url = url_of(name)
    target = fs.resolve(url)
    target.mkdirs(directory())
    target.put_file(local_path, url)
    return url
