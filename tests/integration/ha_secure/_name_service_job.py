"""A task that uses ``hdfs://tfyarn`` with its delegation token alone, before
and after the NameNodes change roles.

``python _name_service_job.py BASE``, BASE an ``hdfs://tfyarn/...`` directory:
prints the services of its HDFS tokens, writes ``BASE/before.txt``, waits
(at most ``WAIT_S``) for ``BASE/go``, which the test makes once it has failed
the NameNodes over, then reads ``before.txt`` back and writes
``BASE/after.txt`` in this process (its connection fails over) and
``BASE/after-new.txt`` in a new one (a new connection, whose token must hold
against whichever NameNode is active).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tfyarn.contract.tokens import HDFS_KIND, TokenFile
from tfyarn.data import fs

WAIT_S = 300
CHILD = """
import sys
from tfyarn.data import fs
src, dst = sys.argv[1], sys.argv[2]
data = b"".join(fs.resolve(src).read_chunks(src))
with fs.resolve(dst).open_output(dst) as out:
    out.write(data)
print("new connection copied", len(data), "bytes", flush=True)
"""


def say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def main() -> None:
    base = sys.argv[1].rstrip("/")
    tokens = TokenFile.read(os.environ["HADOOP_TOKEN_FILE_LOCATION"])
    say("HDFS tokens for: " + ", ".join(t.service for t in tokens.of_kind(HDFS_KIND)))
    hdfs = fs.resolve(base)
    with hdfs.open_output(f"{base}/before.txt") as out:
        out.write(b"written before the failover\n")
    say("wrote before.txt")
    deadline = time.monotonic() + WAIT_S
    while not hdfs.exists(f"{base}/go"):
        if time.monotonic() > deadline:
            sys.exit(f"no {base}/go within {WAIT_S} s")
        time.sleep(1)
    data = b"".join(hdfs.read_chunks(f"{base}/before.txt"))
    with hdfs.open_output(f"{base}/after.txt") as out:
        out.write(data)
    say(f"same connection copied {len(data)} bytes")
    subprocess.run(
        [sys.executable, "-c", CHILD, f"{base}/before.txt", f"{base}/after-new.txt"],
        check=True,
    )


if __name__ == "__main__":
    main()
