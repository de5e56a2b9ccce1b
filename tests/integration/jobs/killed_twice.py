"""A script that waits to be SIGKILLed, twice, then succeeds (transient failures).

Before waiting it writes the same line to stderr at every start: were a
signal taken for the script's own error, the second kill would repeat "its
error" and end the job. Attempt 2 (after two restarts) exits 0.
"""

from __future__ import annotations

import os
import sys
import time

attempt = int(os.environ["TFYARN_ATTEMPT"])
print(f"start attempt={attempt}", flush=True)
if attempt >= 2:
    print("done", flush=True)
    sys.exit(0)
print("RuntimeError: waiting to be killed", file=sys.stderr, flush=True)
deadline = time.monotonic() + 600
while time.monotonic() < deadline:
    time.sleep(0.2)
sys.exit(3)  # never killed: a different failure, so the test would see it
