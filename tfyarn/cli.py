"""The ``tfyarn`` command line: argv to client calls, nothing else.

Each command group lives beside the code it drives and adds its subcommands
through ``add_commands(subparsers)``; every handler takes the parsed namespace
and returns the exit code.

Exit codes: 0 success; 1 a tfyarn error (bad input, failed job, unreachable
cluster), with ``Error: ...`` on stderr; 2 usage errors (argparse); 3 the job
was KILLED; 130 interrupted.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from tfyarn.errors import JobFailedError, TfyarnError

# Modules that each define add_commands(subparsers).
_COMMAND_MODULES = (
    "tfyarn._job_cli",
    "tfyarn.cluster.cli",
    "tfyarn.data.cli",
)

EXIT_ERROR = 1
EXIT_KILLED = 3


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tfyarn", description="Run distributed TensorFlow on Hadoop YARN."
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in _COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue  # a command group not written yet
        module.add_commands(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except JobFailedError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_KILLED if exc.final_status == "KILLED" else EXIT_ERROR
    except TfyarnError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # Output piped into `head` that stopped reading: not an error. Point
        # stdout at /dev/null so the interpreter's final flush stays quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
