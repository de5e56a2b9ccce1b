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
import difflib
import importlib
import os
import sys
from collections.abc import Iterator, Sequence
from typing import Any, NoReturn

from tfyarn.errors import JobFailedError, TfyarnError

# Modules that each define add_commands(subparsers). Imported when the parser
# is built, not when this module is; a missing one is a bug and fails loudly
# (tests/unit/test_cli.py checks that each imports and adds commands).
_COMMAND_MODULES = (
    "tfyarn.client.cli",
    "tfyarn.client.servers_cli",
    "tfyarn.cluster.cli",
    "tfyarn.data.cli",
    "tfyarn.image.cli",
)

EXIT_ERROR = 1
EXIT_KILLED = 3


class _Parser(argparse.ArgumentParser):
    """argparse, naming the option a mistyped one was probably meant to be."""

    def error(self, message: str) -> NoReturn:
        prefix = "unrecognized arguments: "
        if message.startswith(prefix):
            known = sorted(set(_option_strings(self)))
            for word in message[len(prefix) :].split():
                if word.startswith("--"):
                    name = word.split("=")[0]
                    close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
                    if close:
                        message += f" (did you mean {close[0]}?)"
        super().error(message)

    def parse_known_args(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        namespace: argparse.Namespace | None = None,
    ) -> tuple[argparse.Namespace, list[str]]:
        # A command's parser reports its own unknown options, with its own
        # usage (`tfyarn submit ...`), instead of leaving them to the top level.
        ns, extras = super().parse_known_args(args, namespace)
        if extras and " " in self.prog:
            self.error("unrecognized arguments: " + " ".join(extras))
        return ns, extras


def _option_strings(parser: argparse.ArgumentParser) -> Iterator[str]:
    # Every option of the parser and of its subcommands: the top-level parser
    # reports the unknown ones, whichever command they were meant for.
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue  # a hidden alias (--base-dir): suggest the shown spelling
        yield from (o for o in action.option_strings if o.startswith("--"))
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _option_strings(sub)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="tfyarn", description="Run distributed TensorFlow on Hadoop YARN."
    )
    parser.add_argument(
        "--version",
        action=_VersionAction,
        help="print the versions of tfyarn, TensorFlow, skein, Python and the "
        "Hadoop client, and whether the hdfs:// plugin is installed, then exit",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in _COMMAND_MODULES:
        importlib.import_module(name).add_commands(subparsers)
    return parser


class _VersionAction(argparse.Action):
    """``--version``: computed only when asked (it runs ``yarn version``)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kw: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, **kw)

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from tfyarn._version import report

        print(report(), flush=True)
        parser.exit()


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
