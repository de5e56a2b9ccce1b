"""Sleep a while and exit 0 (no TensorFlow): a cheap task for the gang-allocation test.

``--fail_first``: worker 0 of the first cluster (``TFYARN_RESTART`` 0) exits 3
at once instead, so the job restarts its cluster. ``--deaf``: this task index
ignores SIGTERM, so the master kills its container only after ``stop_grace``;
the restart's containers then come free one by one. ``--slow``: this task
index exits ``--slow_seconds`` after SIGTERM (a checkpoint being written).
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
    parser.add_argument("--fail_after", type=float, default=2.0)
    parser.add_argument("--deaf", type=int, default=-1)
    parser.add_argument("--slow", type=int, default=-1)
    parser.add_argument("--slow_seconds", type=float, default=5.0)
    args = parser.parse_args()
    index = int(os.environ.get("TFYARN_TASK_INDEX", "0"))
    restart = int(os.environ.get("TFYARN_RESTART", "0"))
    print(f"start index={index} restart={restart}", flush=True)
    if index == args.deaf:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if index == args.slow:

        def slow_exit(signum: int, frame: object) -> None:
            time.sleep(args.slow_seconds)
            sys.exit(0)

        signal.signal(signal.SIGTERM, slow_exit)
    if args.fail_first and restart == 0 and index == 0:
        time.sleep(args.fail_after)  # the other tasks' containers are held
        print("failing on purpose", file=sys.stderr, flush=True)
        sys.exit(3)
    time.sleep(args.seconds)
    print("done", flush=True)


if __name__ == "__main__":
    main()
