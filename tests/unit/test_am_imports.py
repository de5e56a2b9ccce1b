"""The master depends on tfyarn's contract, never on the client's or runtime's insides.

``am`` is shipped into the AM container and talks to the other two programs only
through what they agree on (tfyarn/contract, the spec, the errors, the protos).
Every import statement of every module in ``am/`` is read here, including those
inside functions, so a new one cannot slip past.
"""

from __future__ import annotations

import ast
from pathlib import Path

AM = Path(__file__).resolve().parents[2] / "am"

ALLOWED = ("tfyarn.contract", "tfyarn.spec", "tfyarn.errors", "tfyarn._proto")
# The one exception, and why: the marker files a later master attempt reads
# (launcher.marker_url) live on HDFS, written through tfyarn's public HDFS
# helpers with their deadlines and error mapping, imported only when used.
# Likewise the TensorBoard mirror (tensorboard.py) reads the job's log dir on HDFS.
EXCEPTIONS = {("launcher.py", "tfyarn.data.fs"), ("tensorboard.py", "tfyarn.data.fs")}


def tfyarn_imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of everything from ``tfyarn`` the file imports.

    ``from a.b import c`` counts as ``a.b.c``: ``c`` may be a module
    (``from tfyarn import runtime``).
    """
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [(node.lineno, n) for n in names if n.split(".")[0] == "tfyarn"]
    return found


def within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def allowed(name: str) -> bool:
    return any(within(name, module) for module in ALLOWED)


def test_am_imports_only_the_contract_the_spec_the_errors_and_the_protos() -> None:
    files = sorted(AM.glob("*.py"))
    assert AM / "state.py" in files
    wrong = [
        f"am/{path.name}:{line} imports {module}"
        for path in files
        for line, module in tfyarn_imports(path)
        if not allowed(module)
        and not any(path.name == f and within(module, m) for f, m in EXCEPTIONS)
    ]
    assert not wrong, "\n".join(wrong)


def test_the_walk_sees_imports_inside_functions(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from tfyarn.contract import env\n"
        "from tfyarn import runtime\n"
        "def f():\n"
        "    import tfyarn.client.jobs\n"
    )
    modules = [m for _, m in tfyarn_imports(sample)]
    assert modules == ["tfyarn.contract.env", "tfyarn.runtime", "tfyarn.client.jobs"]
    assert [allowed(m) for m in modules] == [True, False, False]
