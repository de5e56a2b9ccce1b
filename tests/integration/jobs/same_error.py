"""A script with a bug: the same exception at every start (not a transient failure).

Prints ``start attempt=N restart=M`` to stdout, then fails in a nested call,
so its traceback ends with ``^^^^`` markers under the failing expression and
the exception line: what a real bug in a training script looks like.
"""

from __future__ import annotations

import os


def parse_steps(option: str) -> int:
    return int(option.split("=")[1]) * 2


def main() -> None:
    attempt = os.environ.get("TFYARN_ATTEMPT")
    restart = os.environ.get("TFYARN_RESTART")
    print(f"start attempt={attempt} restart={restart}", flush=True)
    steps = parse_steps("steps=ten") + len(os.environ.get("UNUSED", ""))
    print(f"steps={steps}")


if __name__ == "__main__":
    main()
