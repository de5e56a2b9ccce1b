"""Print a marker, then wait (no TensorFlow): a task whose output a test follows live.

Prints ``--marker`` at once, then waits until the test puts ``test.done`` in the
application's key-value store (at most ``--max_wait`` seconds, so a forgotten
job ends by itself), then prints ``<marker> bye`` and exits 0.
"""

from __future__ import annotations

import argparse
import time

import skein


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--marker", required=True)
    parser.add_argument("--max_wait", type=float, default=120.0)
    args = parser.parse_args()
    print(args.marker, flush=True)
    app = skein.ApplicationClient.from_current()
    deadline = time.monotonic() + args.max_wait
    while time.monotonic() < deadline and not app.kv.get("test.done"):
        time.sleep(0.5)
    print(f"{args.marker} bye", flush=True)


if __name__ == "__main__":
    main()
