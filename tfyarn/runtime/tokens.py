"""Fresh delegation tokens from the master, into this container's token file.

The master of a job submitted with a keytab sends new HDFS delegation tokens
before the old ones end (``Credentials`` on WatchCluster; ``am/tokens.py``).
They replace the tokens of the same kind and service in the file
``HADOOP_TOKEN_FILE_LOCATION`` names, written atomically: the script (and its
pre-started interpreter) inherited that path, and hdfs-native reads the file
for every new NameNode connection. Connections open already keep working
after their token ends (measured on Hadoop 3.4: the NameNode checks a token
when a connection is made).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping

from tfyarn._proto import master_pb2 as pb
from tfyarn.contract.tokens import TokenFile, TokenFileError, write_atomically

log = logging.getLogger("tfyarn.runtime")


def apply(credentials: pb.Credentials, env: Mapping[str, str] | None = None) -> bool:
    """Merge the fresh tokens into the container's token file; False if it could not."""
    path = (os.environ if env is None else env).get("HADOOP_TOKEN_FILE_LOCATION")
    if not path:
        log.warning(
            "fresh delegation tokens arrived, but this container has no token file"
        )
        return False
    try:
        fresh = TokenFile.from_bytes(credentials.tokens)
        try:
            current = TokenFile.read(path)
        except FileNotFoundError:
            current = TokenFile()
        write_atomically(path, current.merged(fresh).to_bytes())
    except (OSError, TokenFileError) as exc:
        log.warning("could not write the fresh delegation tokens to %s: %s", path, exc)
        return False
    until = time.strftime("%H:%M:%S UTC", time.gmtime(credentials.ends))
    log.info(
        "fresh HDFS delegation tokens #%d (%s) written to %s; valid until %s",
        credentials.version,
        ", ".join(t.service for t in fresh.tokens),
        path,
        until,
    )
    return True
