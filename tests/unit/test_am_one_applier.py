"""One applier: only am/state.py changes the job's state or a task's.

Every other module of the master decides (returns am/decisions.py's values)
or reads. This test reads every ``am/*.py`` with ``ast`` and fails on:

- **a write to the job or a task**, outside am/state.py: an assignment,
  augmented assignment or ``del`` whose target is ``X.attr`` or
  ``X.attr[...]``, or a call ``X.attr.append(...)`` (or another mutating
  method of a list, set or dict), where ``attr`` is a field of
  :class:`am.model.Task` or an attribute :class:`am.state.JobState` sets on
  itself, and ``X`` is anything but ``self`` inside a class other than
  ``Task`` (a module's own object may name its attributes as it likes; a task
  may not change itself). The rule goes by name: a module's object with a
  field named like one of the job's is flagged too, and is renamed;
- **a call of the applier's moves** (``X.mark(``, ``X.move_to(``,
  ``X.next_attempt(``) outside am/state.py;
- **an import of am.state** (``import am.state``, ``from am.state import``,
  ``from am import state``) anywhere but ``am/__main__.py``, which builds the
  job; ``TYPE_CHECKING`` imports count.

What it does not see: writes through an alias (``tasks = state.tasks;
tasks[k] = v``), ``setattr``, and methods of the job's parts other than the
ones above (``task.tell_stop`` closes a task's streams; the reconcile loop
calls it as the job ends).
"""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from am.model import Task

AM = Path(__file__).resolve().parents[2] / "am"
APPLIER = "state.py"
BUILDS_THE_JOB = "__main__.py"

# JobState's attributes that are not facts about the job: the asyncio.Event
# the reconcile loop sleeps on (``poke`` sets it, the loop clears it).
SIGNALS = frozenset({"wakeup"})

MUTATING_METHODS = frozenset(
    {
        "append",
        "extend",
        "insert",
        "add",
        "discard",
        "remove",
        "pop",
        "popitem",
        "clear",
        "update",
        "setdefault",
        "sort",
        "reverse",
    }
)
APPLIER_MOVES = frozenset({"mark", "move_to", "next_attempt"})


def _state_attributes() -> frozenset[str]:
    """What JobState sets on itself (``self.x = ...`` anywhere in its class)."""
    tree = ast.parse((AM / APPLIER).read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "JobState":
            for sub in ast.walk(node):
                for target in _targets(sub):
                    if (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == "self"
                    ):
                        names.add(target.attr)
    return frozenset(names)


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        found = list(node.targets)
    elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        found = [node.target]
    elif isinstance(node, ast.Delete):
        found = list(node.targets)
    else:
        return []
    flat: list[ast.expr] = []
    while found:
        target = found.pop()
        if isinstance(target, (ast.Tuple, ast.List)):
            found.extend(target.elts)
        elif isinstance(target, ast.Starred):
            found.append(target.value)
        else:
            flat.append(target)
    return flat


JOB_FIELDS = (
    frozenset(f.name for f in dataclasses.fields(Task)) | _state_attributes()
) - SIGNALS


def _own(base: ast.expr, cls: str | None) -> bool:
    """``self`` of a class that is not a task: that object's own attribute."""
    return (
        isinstance(base, ast.Name) and base.id == "self" and cls not in (None, "Task")
    )


def _job_attribute(node: ast.expr, cls: str | None) -> str | None:
    """``X.attr`` or ``X.attr[...]`` naming the job's or a task's field, else None."""
    while isinstance(node, ast.Subscript):
        node = node.value
    if not isinstance(node, ast.Attribute) or node.attr not in JOB_FIELDS:
        return None
    return None if _own(node.value, cls) else ast.unparse(node)


def writes(source: str) -> list[str]:
    """Every write to the job's state or a task's in ``source``: "line: what"."""
    found: list[str] = []

    def visit(node: ast.AST, cls: str | None) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child.name if isinstance(child, ast.ClassDef) else cls
            for target in _targets(child):
                what = _job_attribute(target, cls)
                if what:
                    found.append(f"{child.lineno}: {what} = ...")
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute):
                func = child.func
                if func.attr in MUTATING_METHODS:
                    what = _job_attribute(func.value, cls)
                    if what:
                        found.append(f"{child.lineno}: {what}.{func.attr}(...)")
                elif func.attr in APPLIER_MOVES and not _own(func.value, cls):
                    found.append(f"{child.lineno}: {ast.unparse(func)}(...)")
            visit(child, inner)

    visit(ast.parse(source), None)
    return found


def imports_state(source: str) -> list[str]:
    """Every import of am.state in ``source`` (TYPE_CHECKING ones too)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [
                f"{node.lineno}: import {a.name}"
                for a in node.names
                if a.name == "am.state"
            ]
        elif isinstance(node, ast.ImportFrom):
            names = {a.name for a in node.names}
            if node.module == "am.state" or (node.module == "am" and "state" in names):
                found.append(f"{node.lineno}: from {node.module} import ...")
    return found


MODULES = sorted(p.name for p in AM.glob("*.py"))


@pytest.mark.parametrize("module", [m for m in MODULES if m != APPLIER])
def test_only_the_applier_changes_the_job(module: str) -> None:
    found = writes((AM / module).read_text())
    assert not found, f"{module} changes the job outside am/state.py: {found}"


@pytest.mark.parametrize("module", [m for m in MODULES if m != BUILDS_THE_JOB])
def test_no_module_imports_the_state(module: str) -> None:
    found = imports_state((AM / module).read_text())
    assert not found, f"{module} imports am.state: {found}"


# The rule itself, on small sources: what it catches and what it lets be.
@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ("state.outcome = (1, 'x')", True),
        ("self.state.outcome = (1, 'x')", True),
        ("task.attempt += 1", True),
        ("task.container_id = task.node = None", True),
        ("a, task.retiring = 1, None", True),
        ("state.disrupted[task] = 'preempted'", True),
        ("del state.disrupted[task]", True),
        ("task.failures.append('x')", True),
        ("state.relaunch.discard(task)", True),
        ("state.mark(task, s, 'why')", True),
        ("state.move_to(p)", True),
        ("class Task:\n    def f(self):\n        self.state = 1", True),
        ("class Gang:\n    def f(self):\n        self.state = 1", False),
        ("class Gang:\n    def f(self):\n        self.rounds += 1", False),
        ("drain.noticed[task] = 1", False),
        ("x = state.outcome", False),
        ("state.apply([d])", False),
        ("out.append(d)", False),
    ],
)
def test_the_rule(source: str, caught: bool) -> None:
    assert bool(writes(source)) is caught


@pytest.mark.parametrize(
    ("source", "caught"),
    [
        ("from am.state import JobState", True),
        ("import am.state", True),
        ("from am import state", True),
        ("if TYPE_CHECKING:\n    from am.state import JobState", True),
        ("from am import policy", False),
        ("from am.view import JobView", False),
    ],
)
def test_the_import_rule(source: str, caught: bool) -> None:
    assert bool(imports_state(source)) is caught
