"""How a container gets its Python: the launch command and the files it needs.

The master (``-m am``) and every task (``-m tfyarn.runtime``) start through
:meth:`Interpreter.command`. Without a shipped environment that is the
``--python`` interpreter (today's behaviour on the local cluster). With
``--python_env`` YARN unpacks the environment's archive into ``./env`` (and
any code layers, such as the sources of editable installs, into ``./env-1``,
``./env-2``, ...) and the command runs ``./env/bin/python`` with the layers on
``PYTHONPATH``.

The check that the node can run the shipped Python lives in the shell command
itself: when Python cannot start there is no Python runtime to report it. A
venv-pack archive's ``bin/python`` is a symlink to its base interpreter, which
must exist on the node at the same path; the command names the node and the
missing interpreter and exits 127, and YARN puts that line into the
container's diagnostics, which the master and the client show.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Where YARN unpacks the shipped environment in the container's directory.
ENV_DIR = "env"
# The exit code of a node that cannot run the shipped Python (as a shell's
# "command not found"; see tfyarn/contract/exit_codes.py).
MISSING_PYTHON_EXIT = 127


@dataclass(frozen=True)
class Archive:
    """One file YARN localizes for the interpreter (a skein ``File``)."""

    url: str  # hdfs:// URL (or a local path skein uploads per application)
    type: str = "archive"  # YARN unpacks it: .tar.gz, .tgz, .tar, .zip
    # private: the NodeManager keeps it for this user's later jobs, so a
    # cached environment is downloaded and unpacked once per node.
    visibility: str = "private"

    def to_skein(self) -> Any:
        import skein

        return skein.File(source=self.url, type=self.type, visibility=self.visibility)


@dataclass(frozen=True)
class Interpreter:
    """The Python the master and the tasks run with."""

    # An absolute path on the nodes (--python), or None: ./env/bin/python.
    python: str | None = None
    # Resource name in the container -> archive; "env" is the environment.
    files: Mapping[str, Archive] = field(default_factory=dict)
    # Names of unpacked code layers put on PYTHONPATH, first wins.
    pythonpath: tuple[str, ...] = ()
    # What was asked for, for the message of a node that cannot run it.
    origin: str = "--python_env"

    @classmethod
    def local(cls, python: str) -> Interpreter:
        """An interpreter every node has at ``python`` (nothing shipped)."""
        return cls(python=python)

    @property
    def shipped(self) -> bool:
        return self.python is None

    def skein_files(self) -> dict[str, Any]:
        return {name: archive.to_skein() for name, archive in self.files.items()}

    def command(self, module: str) -> str:
        """The container's shell command that runs ``python -u -m module``."""
        if not self.shipped:
            return f"exec {shlex.quote(str(self.python))} -u -m {module}"
        return launch_script(module, pythonpath=self.pythonpath, origin=self.origin)


def launch_script(module: str, *, pythonpath: tuple[str, ...], origin: str) -> str:
    """Check the unpacked environment can run here, then exec its Python.

    ``bin/python`` that does not resolve is either missing from the archive or
    a venv's link to a base interpreter this node lacks: both are named, with
    the node, before anything else runs.
    """
    # Inside the double quotes of echo: no quote, $, ` or \\ may pass.
    what = re.sub(r'["$`\\\\]', "", origin)
    lines = [
        f'py="$PWD/{ENV_DIR}/bin/python"',
        'node="${NM_HOST:-$(hostname)}"',
        'if [ ! -x "$py" ]; then',
        '  if [ -L "$py" ]; then',
        '    base="$(readlink -m "$py")"',
        (
            f'    echo "tfyarn: node $node cannot run the shipped Python ({what}):'
            " its bin/python links to the base interpreter $base, which this node"
            " does not have. A virtualenv archive needs the same Python at the same"
            " path on every node: install it there, or ship a conda environment"
            ' (it brings its own Python)." >&2'
        ),
        "  else",
        (
            f'    echo "tfyarn: node $node: the shipped environment ({what}) has no'
            " bin/python: give --python_env a virtualenv or conda environment, or"
            ' an archive of one (bin/python at its top)." >&2'
        ),
        "  fi",
        f"  exit {MISSING_PYTHON_EXIT}",
        "fi",
    ]
    if pythonpath:
        joined = ":".join(f"$PWD/{name}" for name in pythonpath)
        lines.append(f'export PYTHONPATH="{joined}${{PYTHONPATH:+:$PYTHONPATH}}"')
    lines.append(f'exec "$py" -u -m {module}')
    return "\n".join(lines)
