"""A script that fails its first attempt (exit 1) and succeeds on the next.

The master restarts it once (in its container); the job then succeeds with
``restarts`` 1 and worker:0 at attempt 1, which its final record must keep.
"""

from __future__ import annotations

import os
import sys

attempt = int(os.environ["TFYARN_ATTEMPT"])
print(f"start attempt={attempt}", flush=True)
if attempt == 0:
    print(
        "RuntimeError: the first attempt fails on purpose", file=sys.stderr, flush=True
    )
    sys.exit(1)
print("done", flush=True)
