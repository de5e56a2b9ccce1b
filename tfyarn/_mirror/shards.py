"""A worker's input files copied to its container's disk: the fallback without the plugin.

``tfyarn.data.stage_shard`` uses this where tfyarn's HDFS plugin is not
installed: TensorFlow's readers on the parameter-server workers cannot open
``hdfs://`` then, so each worker copies its share of the files (through
hdfs-native) into a directory of its own container, and its dataset reads the
copies.
"""

from __future__ import annotations

import os

from tfyarn.data import fs as _fs


def copy_files(urls: list[str], target: str) -> list[str]:
    """Copy ``urls`` into the local directory ``target`` (created), keeping names.

    Returns
    -------
    list of str
        The local paths, in the order of ``urls``.
    """
    os.makedirs(target, exist_ok=True)
    out = []
    for url in urls:
        local = os.path.join(target, url.rstrip("/").rsplit("/", 1)[-1])
        _fs.resolve(url).get_file(url, local)
        out.append(local)
    return out
