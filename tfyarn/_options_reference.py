"""``conf/README.md``: the options reference, generated from the schema.

Every option of ``tfyarn submit`` is a key of ``conf/tfyarn-schema.yaml``
(type, bounds, help) with its shipped default in ``conf/tfyarn.yaml``. The
reference is rendered from those two files, so it cannot drift from them;
``tests/unit/test_options_reference.py`` fails when the committed file is
stale. Regenerate it with::

    python -m tfyarn._options_reference

``--check`` only compares (exit code 1 when stale); ``--output PATH`` writes
elsewhere.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tfyarn import _options, _paths

COMMAND = "python -m tfyarn._options_reference"
FILENAME = "README.md"

# The groups of `tfyarn submit --help`, in its order, then the client's keys.
GROUPS = (
    ("layout", "Layout", "How many tasks of each TensorFlow role."),
    (
        "resources",
        "Resources per task",
        "What YARN grants each task of a role, and the application master.",
    ),
    (
        "docker",
        "Docker",
        "YARN's Docker runtime for the tasks; the master always runs on the node.",
    ),
    ("job", "The job", "Placement, the job's Python, the script, recovery."),
    (
        "client",
        "The client",
        "What the client does with a job; never part of the job sent to YARN.",
    ),
)

_TYPE_WORDS = {
    "int": "whole number",
    "number": "number",
    "bool": "true / false",
    "string": "string",
    "memory": "memory",
    "mapping": "K=V mapping",
    "list": "list",
}


def group_of(key: str, rule: Mapping[str, Any]) -> str:
    """The section a key belongs in, as ``tfyarn submit --help`` groups it.

    >>> group_of("num_ps", {"type": "int"})
    'layout'
    >>> group_of("worker_memory", {"type": "memory"})
    'resources'
    >>> group_of("poll_interval", {"type": "number", "client": True})
    'client'
    """
    if rule.get("client"):
        return "client"
    if key.startswith("num_"):
        return "layout"
    if key.rsplit("_", 1)[-1] in ("memory", "vcores", "gpus"):
        return "resources"
    if "docker" in key:
        return "docker"
    return "job"


def type_text(rule: Mapping[str, Any]) -> str:
    """The type with its inclusive bounds, in words.

    >>> type_text({"type": "int", "minimum": 0, "maximum": 1})
    'whole number, 0 to 1'
    >>> type_text({"type": "memory", "minimum": 128})
    'memory, at least 128 MiB'
    >>> type_text({"type": "string"})
    'string'
    """
    kind = rule["type"]
    words = _TYPE_WORDS.get(kind, kind)
    unit = " MiB" if kind == "memory" else ""
    lo, hi = rule.get("minimum"), rule.get("maximum")
    if lo is not None and hi is not None:
        return f"{words}, {lo} to {hi}{unit}"
    if lo is not None:
        return f"{words}, at least {lo}{unit}"
    if hi is not None:
        return f"{words}, at most {hi}{unit}"
    return words


def default_text(value: Any) -> str:
    """A shipped default as it reads in ``tfyarn.yaml``.

    >>> default_text("")
    '*(empty)*'
    >>> default_text(["tensorflow"])
    '`[tensorflow]`'
    >>> default_text(False)
    '`false`'
    >>> default_text("2 GiB")
    '`2 GiB`'
    """
    if value is None or value == "":
        return "*(empty)*"
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, list):
        text = "[" + ", ".join(str(v) for v in value) + "]"
    elif isinstance(value, dict):
        text = "{" + ", ".join(f"{k}: {v}" for k, v in value.items()) + "}"
    else:
        text = str(value)
    return f"`{text}`"


def flag_text(key: str, rule: Mapping[str, Any]) -> str:
    """The key and how it is spelled on the command line.

    >>> flag_text("legacy_flags", {"type": "bool"})
    '`legacy_flags`<br>`--legacy_flags` / `--no_legacy_flags`'
    >>> flag_text("files", {"type": "list"})
    '`files`<br>`--files PATH` (repeatable)'
    """
    kind = rule["type"]
    if kind == "bool":
        flags = f"`--{key}` / `--no_{key}`"
    elif kind == "list":
        flags = f"`--{key} {_LIST_METAVARS.get(key, 'PATH')}` (repeatable)"
        if key == "preimport":
            flags += ", `--no_preimport`"
    elif kind == "mapping":
        flags = f"`--{key} K=V` (repeatable)"
    else:
        flags = f"`--{key} {_metavar(key, kind)}`"
    return f"`{key}`<br>{flags}"


# As tfyarn/client/cli.py names them in `tfyarn submit --help`.
_LIST_METAVARS = {
    "preimport": "MODULE",
    "retry_exit_codes": "CODE",
    "hdfs_namenodes": "URL",
    "docker_mount": "SRC:DST[:ro|rw]",
}


def _metavar(key: str, kind: str) -> str:
    if kind in ("int", "number", "memory"):
        return {"int": "N", "number": "SECONDS", "memory": "MEM"}[kind]
    return "IMAGE" if key.endswith("docker_image") else "VALUE"


def _cell(text: str) -> str:
    # A table cell is one line, `|` would end it, and `<you>` would be read as
    # an HTML tag and vanish.
    text = " ".join(text.split()).replace("|", "\\|")
    return text.replace("<", "&lt;").replace(">", "&gt;")


_INTRO = """\
<!-- Generated file: do not edit. Edit tfyarn-schema.yaml or tfyarn.yaml, then run `{command}`. -->

# tfyarn options

> **Generated** from [`tfyarn-schema.yaml`](tfyarn-schema.yaml) (types, bounds,
> help) and [`tfyarn.yaml`](tfyarn.yaml) (shipped defaults) by `{command}`.
> Do not edit it by hand: change those files and run the command again (a unit
> test fails while this file is stale).

Every option of `tfyarn submit` is a key of the same name in a YAML file, and
every key is a flag: `worker_memory: 4g` in a file is `--worker_memory 4g` on
the command line. Sources, later ones winning:

1. `tfyarn.yaml` beside this file (the shipped defaults below);
2. `~/.config/tfyarn/config.yaml`, or the file given with `--config FILE`;
3. the command line (tfyarn's options go before the script: everything after
   it is the script's own).

`env` and `files` add up across sources. `tfyarn.JobSpec(...)` and
`tfyarn.submit(...)` in Python take the same keys as keywords, with the same
defaults and bounds. An unknown key or a value out of bounds is refused before
anything is submitted, naming the source and what would be valid.

Types: *memory*: {units}. A *list* is given by repeating the flag or with
commas (`--files a.py,b.txt`), as a YAML list in a file. Bounds are inclusive.
"""


def render(schema: Mapping[str, Mapping[str, Any]], defaults: Mapping[str, Any]) -> str:
    """The whole reference as Markdown.

    Parameters
    ----------
    schema
        ``tfyarn-schema.yaml`` as read: key -> {type, minimum?, maximum?,
        client?, help}.
    defaults
        ``tfyarn.yaml`` as written (memory as "2 GiB", not normalized).
    """
    lines = _INTRO.format(command=COMMAND, units=_options.UNITS_HELP).split("\n")
    keys_by_group: dict[str, list[str]] = {name: [] for name, _, _ in GROUPS}
    for key, rule in schema.items():
        keys_by_group[group_of(key, rule)].append(key)
    for name, title, about in GROUPS:
        keys = keys_by_group[name]
        if not keys:
            continue
        lines += [f"## {title}", "", about, ""]
        lines += [
            "| key and flag | type | default | what it does |",
            "|---|---|---|---|",
        ]
        for key in keys:
            rule = schema[key]
            lines.append(
                "| "
                + " | ".join(
                    [
                        flag_text(key, rule).replace("|", "\\|"),
                        _cell(type_text(rule)),
                        _cell(default_text(defaults.get(key))),
                        _cell(str(rule.get("help", ""))),
                    ]
                )
                + " |"
            )
        lines.append("")
    return "\n".join(lines)


def generate(conf_dir: Path | None = None) -> str:
    """The reference for the schema and defaults in ``conf_dir`` (default: tfyarn's)."""
    conf = conf_dir or _paths.conf_dir()
    schema = _options.read_yaml(conf / _options.SCHEMA_FILE)
    defaults = _options.read_yaml(conf / _options.DEFAULTS_FILE)
    return render(schema, defaults)


def main(argv: Sequence[str] | None = None) -> int:
    """Write (or with ``--check``, compare) ``conf/README.md``; the exit code."""
    parser = argparse.ArgumentParser(
        prog=COMMAND,
        description="Generate conf/README.md, the options reference, from "
        "conf/tfyarn-schema.yaml and conf/tfyarn.yaml.",
    )
    parser.add_argument(
        "--output",
        type=Path,
        help=f"where to write it (default: {FILENAME} in tfyarn's conf directory)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if the file differs from what it would be",
    )
    args = parser.parse_args(argv)
    output = args.output or _paths.conf_dir() / FILENAME
    text = generate()
    if args.check:
        current = output.read_text() if output.is_file() else None
        if current != text:
            print(f"{output} is stale: regenerate it with `{COMMAND}`", file=sys.stderr)
            return 1
        print(f"{output} is up to date")
        return 0
    output.write_text(text)
    print(f"Wrote {output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
