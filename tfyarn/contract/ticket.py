"""Whether this process holds a Kerberos ticket.

The client refuses to start skein's driver without one on a secure cluster, and
the HDFS layer refuses to let hdfs-native meet an empty ticket cache (its
GSSAPI call can crash the process there instead of failing): both ask here.
"""

from __future__ import annotations

import shutil
import subprocess


def has_ticket() -> bool:
    """Whether the ticket cache holds an unexpired ticket (``klist -s``).

    True without ``klist``: the check is then left to whoever logs in.
    """
    klist = shutil.which("klist")
    if klist is None:
        return True
    done = subprocess.run([klist, "-s"], capture_output=True, timeout=10, check=False)
    return done.returncode == 0
