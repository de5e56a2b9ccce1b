"""The master's code for a submission: from the user's HDFS cache when it can be.

Every job's master runs ``am/``, the same bytes for every job of one tfyarn
version. Handed to skein as a local zip, it would be uploaded into each
application's directory and localized again on every start; named by content
in ``.tfyarn/am/`` on HDFS (:mod:`tfyarn.client.pyenv.cache`), it is uploaded
once per version and each node keeps it (PRIVATE visibility). Without HDFS at
hand the local zip still works: the cache only saves time, so it never fails
a submission.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import tempfile
import zipfile
from pathlib import Path

from tfyarn._paths import am_dir
from tfyarn.client.pyenv import cache

log = logging.getLogger("tfyarn.client")


def archive_source() -> str:
    """The URL of the cached zip of ``am/`` (uploaded first if missing), or
    the local zip's path when the cache cannot be reached."""
    local = master_zip()
    name = Path(local).name
    try:
        return cache.ensure(local, name, cache.MASTER_PATH)[0]
    except Exception as exc:  # noqa: BLE001 -- a cache, never a reason to fail
        log.debug("the master's code goes with the application: %s", exc)
        return local


def master_zip() -> str:
    """The master's code (``am/``) as a local, content-named zip file."""
    return _zip_dir(am_dir())


def _zip_dir(directory: Path) -> str:
    """Zip a directory's Python sources (no caches) into a content-named file."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(directory.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                info = zipfile.ZipInfo(str(path.relative_to(directory)))
                info.external_attr = 0o644 << 16
                archive.writestr(info, path.read_bytes())
    data = buffer.getvalue()
    # Per user and named by content: a new tfyarn never reuses an old master.
    cache_dir = Path(tempfile.gettempdir()) / f"tfyarn-{os.getuid()}"
    cache_dir.mkdir(mode=0o700, exist_ok=True)
    target = cache_dir / f"am-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if not target.exists():
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        partial.write_bytes(data)
        partial.replace(target)
    return str(target)
