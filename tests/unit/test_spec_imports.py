"""tfyarn.spec is the job alone: the master and every task import it, never
the client's compilation to skein, its packing or its fit check."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import tfyarn.spec

# Top-level names spec.py must not import, even inside a function.
FORBIDDEN = ("skein", "zipfile", "tfyarn.client")


def _imported(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every import statement in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def _forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def test_spec_py_imports_no_skein_zipfile_or_client() -> None:
    path = Path(tfyarn.spec.__file__)
    wrong = [
        f"spec.py:{line} imports {n}" for line, n in _imported(path) if _forbidden(n)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_check_sees_imports_inside_functions(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    import skein\n    from tfyarn.client import fit\n")
    names = [n for _, n in _imported(sample)]
    assert names == ["skein", "tfyarn.client.fit"]
    assert all(_forbidden(n) for n in names)


def test_importing_the_spec_loads_no_client_and_no_skein() -> None:
    # A fresh interpreter: this session has long imported all of them.
    probe = (
        "import json, sys, tfyarn.spec; "
        "print(json.dumps(sorted(m for m in sys.modules "
        "if m.split('.')[0] in ('skein', 'zipfile') "
        "or m.startswith('tfyarn.client'))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []
