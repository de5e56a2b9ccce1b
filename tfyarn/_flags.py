"""One spelling for every flag: ``--num_worker``, ``--base_dir``, ``--no_detach``.

Most of tfyarn's flags are the config keys themselves, which are Python names
(``worker_memory``), so underscores are the spelling shown in ``--help``. The
dashed spelling (``--base-dir``, and argparse's ``--no-detach``) still works as
a hidden alias, so older commands and muscle memory keep working.
"""

from __future__ import annotations

import argparse
from typing import Any


def add_option(parser: Any, flag: str, **kwargs: Any) -> argparse.Action:
    """``parser.add_argument(flag, ...)`` plus a hidden dashed alias."""
    action: argparse.Action = parser.add_argument(flag, **kwargs)
    _alias(parser, action, [flag], **kwargs)
    return action


def add_switch(parser: Any, flag: str, *, help: str) -> argparse.Action:
    """``--flag`` (True) and ``--no_flag`` (False); left out: ``None``."""
    name = flag.removeprefix("--")
    on = add_option(parser, flag, action="store_true", default=None, help=help)
    off = add_option(
        parser,
        f"--no_{name}",
        dest=on.dest,
        action="store_false",
        default=None,
        help=f"the opposite of {flag}",
    )
    # argparse's BooleanOptionalAction spelled it --no-legacy_flags: keep that.
    _alias(parser, off, [f"--no-{name}"], action="store_false")
    return on


def _alias(
    parser: Any, target: argparse.Action, flags: list[str], **kwargs: Any
) -> None:
    spellings = {f.replace("_", "-") for f in flags} | set(flags)
    hidden = sorted(spellings - set(parser._option_string_actions))
    if hidden:
        kwargs = {**kwargs, "help": argparse.SUPPRESS, "default": argparse.SUPPRESS}
        kwargs.pop("dest", None)
        parser.add_argument(*hidden, dest=target.dest, **kwargs)
