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
must exist on the node at the same path, reachable by the container's user;
the command names the node and the missing (or unreachable) interpreter and
exits 127, and YARN puts that line into the container's diagnostics, which
the master and the client show. Where the NodeManager logs container debug
info, YARN's launch script lists the container's files first and stops at a
link it cannot follow (``find: './env/bin/python3': Permission denied``, exit
1): :mod:`tfyarn.contract.localization` explains that line in the same words.

A ``.pex`` is localized as a file (``./env.pex``) and run the way pex runs a
``--venv`` pex (:func:`pex_launch_script`): the first container on a node has
pex turn it into a virtualenv under ``PEX_ROOT``, which is kept per node and
user beside YARN's own cache of the user's files, so later containers and jobs
there find it (pex locks it while one is made); each container then runs that
venv's ``bin/python``, as for a shipped virtualenv, so the script's own
interpreter (``sys.executable``) sees the pex's packages too.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Where YARN unpacks the shipped environment in the container's directory.
ENV_DIR = "env"
# Where YARN puts a shipped .pex (a file, not unpacked).
PEX_FILE = f"{ENV_DIR}.pex"
# PEX_ROOT of the pexes of jobs, beside the NodeManager's cache of the user's
# files (<local-dir>/usercache/<user>/): the NodeManager deletes neither
# between jobs, and both go when it starts afresh.
PEX_ROOT_DIR = "tfyarn-pex"
# The exit code of a node that cannot run the shipped Python (as a shell's
# "command not found"; see tfyarn/contract/exit_codes.py).
MISSING_PYTHON_EXIT = 127


@dataclass(frozen=True)
class Archive:
    """One file YARN localizes for the interpreter (a skein ``File``)."""

    url: str  # hdfs:// URL (or a local path skein uploads per application)
    # archive: YARN unpacks it (.tar.gz, .tgz, .tar, .zip); file: as it is (.pex)
    type: str = "archive"
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
    # A shipped .pex (./env.pex): the interpreter each node runs it with.
    pex_python: str = ""
    # Its interpreter constraints, for that node's message.
    pex_constraints: tuple[str, ...] = ()

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
        if self.pex_python:
            return pex_launch_script(
                module,
                python=self.pex_python,
                constraints=self.pex_constraints,
                origin=self.origin,
            )
        return launch_script(module, pythonpath=self.pythonpath, origin=self.origin)


def launch_script(module: str, *, pythonpath: tuple[str, ...], origin: str) -> str:
    """Check the unpacked environment can run here, then exec its Python.

    ``bin/python`` that does not resolve is missing from the archive, or a
    venv's link to a base interpreter this node lacks, or one under a
    directory the container's user cannot enter: each is named, with the
    node, before anything else runs.
    """
    what = _echoable(origin)
    venv_needs = (
        "A virtualenv archive needs the same Python at the same path on every"
        " node, readable and executable by the job's user"
    )
    lines = [
        f'py="$PWD/{ENV_DIR}/bin/python"',
        'node="${NM_HOST:-$(hostname)}"',
        'if [ ! -x "$py" ]; then',
        '  if [ -L "$py" ]; then',
        '    base="$(readlink -m "$py")"',
        # The deepest directory on the way that this user can see: one it
        # cannot enter hides the interpreter without its being missing.
        '    dir="$(dirname "$base")"',
        '    while [ "$dir" != / ] && [ ! -e "$dir" ]; do dir="$(dirname "$dir")"; done',
        '    if [ "$dir" != / ] && [ -d "$dir" ] && [ ! -x "$dir" ]; then',
        (
            f'      echo "tfyarn: node $node cannot run the shipped Python ({what}):'
            " its bin/python links to the base interpreter $base, under $dir,"
            " which the container's user ($(id -un 2>/dev/null || echo"
            f' "$USER")) cannot enter (Permission denied). {venv_needs}: fix the'
            " permissions of its directories there, or ship a conda environment"
            ' (it brings its own Python)." >&2'
        ),
        '    elif [ -e "$base" ]; then',
        (
            f'      echo "tfyarn: node $node cannot run the shipped Python ({what}):'
            " its bin/python links to the base interpreter $base, which the"
            f" container's user may not execute. {venv_needs}: fix its"
            ' permissions there, or ship a conda environment." >&2'
        ),
        "    else",
        (
            f'      echo "tfyarn: node $node cannot run the shipped Python ({what}):'
            " its bin/python links to the base interpreter $base, which this node"
            f" does not have. {venv_needs}: install it there, or ship a conda"
            ' environment (it brings its own Python)." >&2'
        ),
        "    fi",
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


def pex_launch_script(
    module: str, *, python: str, constraints: tuple[str, ...], origin: str
) -> str:
    """Find the pex's interpreter, have pex make (or find) its venv, exec it.

    A node without the interpreter, or one pex cannot build the venv for
    (the pex's wheels are for another Python version or platform), is named
    with what it lacks, before anything else runs; exit 127 as for a venv.
    """
    what = _echoable(origin)
    wants = _echoable(python + (f" ({', '.join(constraints)})" if constraints else ""))
    lines = [
        'node="${NM_HOST:-$(hostname)}"',
        f'py="$(command -v {shlex.quote(python)})"',
        'if [ -z "$py" ]; then',
        (
            f'  echo "tfyarn: node $node cannot run the shipped pex ({what}): it'
            f" runs with {wants} (the pex's shebang), which this node does not"
            " have (PATH=$PATH). Install that Python on every node, or build the"
            ' pex with --python-shebang naming a Python the nodes have." >&2'
        ),
        f"  exit {MISSING_PYTHON_EXIT}",
        "fi",
        # The first of YARN's local dirs of this app is
        # <local-dir>/usercache/<user>/appcache/<app>.
        'first="${LOCAL_DIRS%%,*}"',
        'case "$first" in',
        f'  */appcache/*) root="${{first%/appcache/*}}/{PEX_ROOT_DIR}" ;;',
        '  *) root="$PWD/.pex" ;;',
        "esac",
        # pex prints its own error on stderr (the container's log) on failure.
        (
            'out="$(PEX_ROOT="$root" PEX_VENV=1 PEX_INTERPRETER=1 "$py"'
            f' "$PWD/{PEX_FILE}" -c "import sys; print(sys.prefix)")"'
        ),
        'venv="$(printf "%s\\n" "$out" | tail -n 1)"',
        'if [ -z "$venv" ] || [ ! -x "$venv/bin/python" ]; then',
        (
            f'  echo "tfyarn: node $node cannot run the shipped pex ({what}) with'
            " $py: pex could not make its virtualenv (its message is above). Its"
            f" distributions must suit this node's Python ({wants}) and platform:"
            " build the pex for it (pex --python, --platform) or install a"
            ' matching Python." >&2'
        ),
        f"  exit {MISSING_PYTHON_EXIT}",
        "fi",
        f'exec "$venv/bin/python" -u -m {module}',
    ]
    return "\n".join(lines)


def _echoable(text: str) -> str:
    """``text`` without what would end or expand inside echo's double quotes."""
    return re.sub(r'["$`\\\\]', "", text)
