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

import logging
from pathlib import Path

from tfyarn.client.pyenv import cache
from tfyarn.spec import master_zip

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
