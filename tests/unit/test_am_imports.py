"""The master and the runtime-side libraries never load the client's code.

``am`` is shipped into the AM container and talks to the other two programs only
through what they agree on (tfyarn/contract, the spec, the errors, the protos).
The libraries a task's script or the runtime imports (``tfyarn.data``,
``tfyarn.runtime``, ``tfyarn.checkpoint`` ...) run in containers too, where the
client (skein's driver, packing, the CLI), the local cluster's tooling and the
image builder have no business: loading them costs start-up time and drags in
their dependencies.

Every import statement of every module is read here by its syntax tree,
including those inside functions (a lazy import still runs when the function
does), and followed from module to module: a chain through any number of
modules cannot slip past. Imports under ``if TYPE_CHECKING:`` are skipped: they
never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
AM = REPO / "am"

ALLOWED = ("tfyarn.contract", "tfyarn.spec", "tfyarn.errors", "tfyarn._proto")
# The one exception, and why: the marker files a later master attempt reads
# (launcher.marker_url) live on HDFS, written through tfyarn's public HDFS
# helpers with their deadlines and error mapping, imported only when used.
# Likewise the TensorBoard mirror (tensorboard.py) reads the job's log dir on HDFS.
EXCEPTIONS = {("launcher.py", "tfyarn.data.fs"), ("tensorboard.py", "tfyarn.data.fs")}

# What no chain of imports may reach from the master, and from the libraries a
# script or the runtime imports.
AM_NEVER = ("tfyarn.client", "tfyarn.cluster", "tfyarn.cli", "tfyarn.image")
RUNTIME_SIDE = (
    "tfyarn.data",
    "tfyarn.runtime",
    "tfyarn.checkpoint",
    "tfyarn.tensorboard",
    "tfyarn.hdfs",
    "tfyarn.progress",
)
RUNTIME_NEVER = ("tfyarn.client", "tfyarn.cluster", "tfyarn.cli")


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runnable_children(node: ast.AST) -> Iterable[ast.AST]:
    if isinstance(node, ast.If) and _is_type_checking(node.test):
        return node.orelse
    return ast.iter_child_nodes(node)


def _import_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under ``node``, at any depth, but none that never runs."""
    for child in _runnable_children(node):
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        yield from _import_nodes(child)


def _package_of(module: str, path: Path) -> str:
    return module if path.name == "__init__.py" else module.rpartition(".")[0]


def imported_names(path: Path, module: str = "") -> list[tuple[int, str]]:
    """(line, dotted name) of everything from ``tfyarn`` or ``am`` the file imports.

    ``from a.b import c`` counts as ``a.b.c``: ``c`` may be a module
    (``from tfyarn import runtime``); :func:`modules_of` sorts that out.
    Relative imports are resolved against ``module``, the file's own name.
    """
    found = []
    for node in _import_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            base = node.module or ""
            if node.level:
                package = _package_of(module, path).split(".")
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            names = [f"{base}.{alias.name}" for alias in node.names]
        found += [
            (node.lineno, n) for n in names if n.split(".")[0] in ("tfyarn", "am")
        ]
    return found


def tfyarn_imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of everything from ``tfyarn`` the file imports."""
    return [(line, n) for line, n in imported_names(path) if n.startswith("tfyarn")]


def module_file(module: str) -> Path | None:
    """The source file of a module of ours (a package's ``__init__.py``), or None."""
    base = REPO.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def modules_of(name: str) -> list[str]:
    """The modules that importing ``name`` runs: it (or, for an attribute, the
    module that holds it) and every package above it."""
    parts = name.split(".")
    while parts and module_file(".".join(parts)) is None:
        parts.pop()  # ``from tfyarn.spec import JobSpec``: JobSpec is no module
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def chains(starts: Iterable[str]) -> dict[str, list[str]]:
    """Every module reachable from ``starts``, with one chain of imports to it."""
    seen: dict[str, list[str]] = {}
    todo = [(m, [m]) for start in starts for m in modules_of(start)]
    while todo:
        module, chain = todo.pop()
        if module in seen:
            continue
        seen[module] = chain
        path = module_file(module)
        assert path is not None, module
        for _, name in imported_names(path, module):
            todo += [(m, [*chain, m]) for m in modules_of(name) if m not in seen]
    return seen


def within(name: str, module: str) -> bool:
    return name == module or name.startswith(module + ".")


def allowed(name: str) -> bool:
    return any(within(name, module) for module in ALLOWED)


def reached(starts: Iterable[str], never: tuple[str, ...]) -> list[str]:
    """The chain of imports to each way into a forbidden module from ``starts``
    (where a chain first enters one; what that module imports in turn is moot)."""

    def banned(module: str) -> bool:
        return any(within(module, b) for b in never)

    return sorted(
        " -> ".join(chain)
        for module, chain in chains(starts).items()
        if banned(module) and not any(banned(m) for m in chain[:-1])
    )


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


def _am_modules() -> list[str]:
    return [f"am.{p.stem}" if p.stem != "__init__" else "am" for p in AM.glob("*.py")]


def test_no_chain_of_imports_leads_from_am_to_the_client_side() -> None:
    wrong = reached(_am_modules(), AM_NEVER)
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("start", RUNTIME_SIDE)
def test_no_chain_of_imports_leads_from_a_runtime_library_to_the_client(
    start: str,
) -> None:
    assert module_file(start) is not None, start
    wrong = reached([start], RUNTIME_NEVER)
    assert not wrong, "\n".join(wrong)


def test_the_walk_sees_imports_inside_functions(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "from tfyarn.contract import env\n"
        "from tfyarn import runtime\n"
        "def f():\n"
        "    import tfyarn.client.jobs\n"
        "if TYPE_CHECKING:\n"
        "    from tfyarn.cluster import LocalCluster\n"
    )
    modules = [m for _, m in tfyarn_imports(sample)]
    assert modules == ["tfyarn.contract.env", "tfyarn.runtime", "tfyarn.client.jobs"]
    assert [allowed(m) for m in modules] == [True, False, False]


def test_the_walk_follows_chains_through_packages_and_lazy_imports() -> None:
    # from tfyarn import runtime: the package, its __init__, and what that imports.
    assert modules_of("tfyarn.spec.JobSpec") == ["tfyarn", "tfyarn.spec"]
    found = chains(["tfyarn.runtime"])
    assert "tfyarn.runtime.task" in found and "tfyarn" in found
    # am/launcher.py imports the HDFS helpers only inside functions.
    assert "tfyarn.data.fs" in chains(["am.launcher"])
    # A chain of several modules is found: the client package reaches its
    # Kerberos checks through the connection.
    chain = reached(["tfyarn.client"], ("tfyarn.client.kerberos",))
    assert chain and chain[0].count(" -> ") >= 2
