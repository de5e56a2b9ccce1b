"""tfyarn's modules and packages depend one way: no import loops.

A loop makes a reader learn two modules at once and an import order matter.
Every import of every module under ``tfyarn/`` counts, at any depth (a lazy
import still runs when its function does) and under ``if TYPE_CHECKING:``
too (a type is a dependency for whoever reads the code). Two levels are
checked: files (no module reaches itself through imports), and packages (in
each package, its direct children, modules and subpackages alike, depend one
way: ``tfyarn.client`` may use ``tfyarn.cluster`` or the reverse, not both).
The master (``am/``) is not walked here: test_am_imports.py holds its rules.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterable, Mapping
from pathlib import Path

from _parsed import parsed
from test_am_imports import REPO, modules_of

TFYARN = REPO / "tfyarn"
# Each dotted name resolves to the same modules every time it is seen.
_modules_of = functools.cache(modules_of)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, module: str) -> set[str]:
    """The modules of ours that ``path`` (module ``module``) imports: for
    ``from a.b import c``, ``a.b.c`` if that is a module, else ``a.b``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(parsed(path)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join([*parts, base] if base else parts)
            names = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.split(".")[0] == "tfyarn" and _modules_of(name):
                found.add(_modules_of(name)[-1])
    found.discard(module)
    return found


@functools.cache
def graph(root: Path = TFYARN) -> dict[str, set[str]]:
    """module -> the modules of ours it imports, for every module under ``root``."""
    files = {module_name(p): p for p in sorted(root.rglob("*.py"))}
    return {m: imports_of(p, m) & set(files) for m, p in files.items()}


def loops(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one node (Tarjan's), sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in edges.get(node, ()):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return sorted(found)


def package_edges(edges: Mapping[str, set[str]], package: str) -> dict[str, set[str]]:
    """Between the direct children of ``package``: child -> children it uses
    (through any module inside either)."""

    def child(module: str) -> str | None:
        if not module.startswith(package + "."):
            return None
        return f"{package}.{module[len(package) + 1 :].split('.')[0]}"

    out: dict[str, set[str]] = {}
    for module, targets in edges.items():
        source = child(module)
        if source is None:
            continue
        out.setdefault(source, set())
        for target in targets:
            used = child(target)
            if used is not None and used != source:
                out[source].add(used)
    return out


def test_no_file_imports_itself_through_others() -> None:
    edges = graph()
    assert "tfyarn.data.fs.hdfs" in edges and edges["tfyarn.client.jobs"]
    assert not loops(edges), loops(edges)


def test_in_every_package_the_parts_depend_one_way() -> None:
    edges = graph()
    packages = sorted(module_name(p) for p in TFYARN.rglob("__init__.py"))
    assert "tfyarn" in packages and "tfyarn.data.fs" in packages
    found = {p: loops(package_edges(edges, p)) for p in packages}
    assert not any(found.values()), {p: g for p, g in found.items() if g}


def test_the_walk_sees_lazy_typing_and_relative_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "import tfyarn.client.jobs\n"
        "from . import errors\n"
        "if TYPE_CHECKING:\n"
        "    from tfyarn.cluster._settings import ClusterSettings\n"
        "def f():\n"
        "    from tfyarn.data import fs\n"
    )
    assert imports_of(sample, "tfyarn.sample") == {
        "tfyarn.client.jobs",
        "tfyarn.errors",
        "tfyarn.cluster._settings",
        "tfyarn.data.fs",
    }


def test_loops_are_found_between_files_and_between_packages() -> None:
    assert loops({"x": {"y"}, "y": {"x"}, "z": {"x"}}) == [["x", "y"]]
    assert loops({"x": {"y"}, "y": set()}) == []
    edges = {
        "tfyarn.a.one": {"tfyarn.a.two"},
        "tfyarn.a.two": {"tfyarn.a.one"},
        "tfyarn.b.three": {"tfyarn.a.two"},
        "tfyarn.a.four": {"tfyarn.b.three"},
    }
    assert loops(edges) == [["tfyarn.a.one", "tfyarn.a.two"]]
    # No file loop through b, but the packages a and b use each other.
    assert loops(package_edges(edges, "tfyarn")) == [["tfyarn.a", "tfyarn.b"]]
