"""Sleep a while and exit 0 (no TensorFlow): a cheap task for the gang-allocation test.

``--fail_first``: worker 0 of the first cluster (``TFYARN_RESTART`` 0) exits 3
at once instead, so the job restarts its cluster. ``--deaf``: this task index
ignores SIGTERM, so the master kills its container only after ``stop_grace``;
the restart's containers then come free one by one.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--fail_first", action="store_true")
    parser.add_argument("--deaf", type=int, default=-1)
    args = parser.parse_args()
    index = int(os.environ.get("TFYARN_TASK_INDEX", "0"))
    restart = int(os.environ.get("TFYARN_RESTART", "0"))
    print(f"start index={index} restart={restart}", flush=True)
    if index == args.deaf:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if args.fail_first and restart == 0 and index == 0:
        time.sleep(2)  # the other tasks are up: their containers are held
        print("failing on purpose", file=sys.stderr, flush=True)
        sys.exit(3)
    time.sleep(args.seconds)
    print("done", flush=True)


if __name__ == "__main__":
    main()
