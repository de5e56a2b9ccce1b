"""Fresh HDFS delegation tokens, obtained with the job's keytab (jobs on secure clusters).

Python has no Hadoop client that can ask a NameNode for delegation tokens
(hdfs-native only uses them), so ``FetchTokens.java`` does it: Hadoop's own
``UserGroupInformation.loginUserFromKeytabAndReturnUGI`` and
``FileSystem.addDelegationTokens``, run by the JDK's source launcher on the
classpath of skein's ApplicationMaster, exactly as ``am/unregister.py`` runs
``Unregister.java``.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from am.unregister import java_command, jvm_classpath
from tfyarn.contract.tokens import TokenFile

JAVA_SOURCE = Path(__file__).with_name("FetchTokens.java")
# Compile, log in at the KDC, one round trip per NameNode: ~3-10 s here.
TIMEOUT = 120.0


@dataclass(frozen=True)
class Fetched:
    """The new tokens, and when each expires unless renewed (epoch s, by service)."""

    tokens: TokenFile
    expires: dict[str, float]


def fetch(
    principal: str,
    keytab: str,
    namenodes: Sequence[str] = (),
    *,
    timeout: float = TIMEOUT,
    classpath: str | None = None,
) -> Fetched:
    """Log in as ``principal`` from ``keytab``; tokens for fs.defaultFS and ``namenodes``.

    Raises
    ------
    LookupError, OSError, subprocess.SubprocessError
        No JDK or classpath, a refused login, a NameNode that said no, too
        slow: the caller keeps the tokens it has and tries again later.
    """
    command = java_command(classpath or jvm_classpath(), JAVA_SOURCE)
    # Only the keytab's login: no token of the container's own may stand in.
    env = {k: v for k, v in os.environ.items() if k != "HADOOP_TOKEN_FILE_LOCATION"}
    with tempfile.TemporaryDirectory(prefix="tfyarn-tokens-") as tmp:
        out = Path(tmp) / "tokens"
        done = subprocess.run(
            [*command, principal, keytab, str(out), *namenodes],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
        if done.returncode != 0 or not out.is_file():
            raise subprocess.CalledProcessError(
                done.returncode, "FetchTokens.java", done.stdout, done.stderr[-3000:]
            )
        tokens = TokenFile.read(out)
    return Fetched(tokens=tokens, expires=expiries(done.stdout))


def expiries(stdout: str) -> dict[str, float]:
    """``service -> expiry`` (epoch s) from FetchTokens' ``token KIND SERVICE MS`` lines.

    Examples
    --------
    >>> expiries("token HDFS_DELEGATION_TOKEN 10.0.0.1:8020 1795500222891\\nnoise")
    {'10.0.0.1:8020': 1795500222.891}
    """
    found = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[0] == "token" and parts[3].isdigit():
            found[parts[2]] = int(parts[3]) / 1000.0
    return found
