"""One answer to "which Hadoop configuration": only tfyarn.contract.hadoop_conf
reads ``$HADOOP_CONF_DIR`` or ``$HADOOP_HOME`` or finds the local cluster's
configuration directory; every other module of tfyarn and of the master asks it.

Each file's syntax tree is searched for a read of either variable, by name or
through ``CONF_DIR_ENV``/``HADOOP_HOME_ENV``: ``environ.get(...)``, ``getenv(...)``,
``environ[...]`` read, and ``... in environ``. Setting the variable for a
child process (the local cluster's daemons) is not reading it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

from _parsed import parsed

REPO = Path(__file__).resolve().parents[2]
THE_READER = REPO / "tfyarn" / "contract" / "hadoop_conf.py"
VARIABLES = {"HADOOP_CONF_DIR", "HADOOP_HOME"}
CONSTANTS = {"CONF_DIR_ENV", "HADOOP_HOME_ENV"}
# The cluster package writes the configuration it then runs with.
WRITERS = REPO / "tfyarn" / "cluster"


def _names_the_variable(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return node.value in VARIABLES
    if isinstance(node, ast.Name):
        return node.id in CONSTANTS
    return isinstance(node, ast.Attribute) and node.attr in CONSTANTS


def _reads(tree: ast.AST) -> list[int]:
    """Lines reading either variable."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else getattr(func, "id", "")
            )
            if name in ("get", "getenv", "pop") and _names_the_variable(node.args[0]):
                found.append(node.lineno)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            if _names_the_variable(node.slice):
                found.append(node.lineno)
        elif (
            isinstance(node, ast.Compare)
            and _names_the_variable(node.left)
            and any(isinstance(op, (ast.In, ast.NotIn)) for op in node.ops)
        ):
            found.append(node.lineno)
    return found


def _finds_the_local_conf(tree: ast.AST) -> list[int]:
    """Lines asking tfyarn.contract.local_cluster for the cluster's conf dir,
    or using hadoop_conf's own step of the rule (``local_cluster_conf_dir``:
    whether it applies depends on ``$HADOOP_CONF_DIR``, hadoop_conf's to say)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            name = node.attr
            owner = node.value.id if isinstance(node.value, ast.Name) else ""
        elif isinstance(node, ast.Name):
            name, owner = node.id, ""
        else:
            continue
        if name == "local_cluster_conf_dir" or (
            name == "conf_dir" and owner == "local_cluster"
        ):
            found.append(node.lineno)
    return found


@functools.cache
def _sources() -> dict[Path, ast.Module]:
    """Every module of tfyarn and the master, parsed (once for both tests)."""
    paths = sorted([*(REPO / "tfyarn").rglob("*.py"), *(REPO / "am").rglob("*.py")])
    return {path: parsed(path) for path in paths}


def test_only_hadoop_conf_reads_the_configuration_variables() -> None:
    wrong = [
        f"{path.relative_to(REPO)}:{line}"
        for path, tree in _sources().items()
        if path != THE_READER
        for line in _reads(tree)
    ]
    assert not wrong, (
        "read $HADOOP_CONF_DIR/$HADOOP_HOME through tfyarn.contract.hadoop_conf "
        f"(conf_dir, explicit_conf_dir, local_fallback_conf_dir): {wrong}"
    )
    # The reader itself is seen by the search.
    assert _reads(ast.parse(THE_READER.read_text()))


def test_only_hadoop_conf_finds_the_local_clusters_configuration() -> None:
    wrong = [
        f"{path.relative_to(REPO)}:{line}"
        for path, tree in _sources().items()
        if path != THE_READER and WRITERS not in path.parents
        for line in _finds_the_local_conf(tree)
    ]
    assert not wrong, wrong
    assert _finds_the_local_conf(ast.parse(THE_READER.read_text()))


def test_the_search_sees_each_form_of_read() -> None:
    reads = [
        'os.environ.get("HADOOP_CONF_DIR")',
        'os.getenv("HADOOP_HOME", "")',
        "os.environ[hadoop_conf.CONF_DIR_ENV]",
        "CONF_DIR_ENV in os.environ",
        'env.pop("HADOOP_CONF_DIR", None)',
    ]
    for code in reads:
        assert _reads(ast.parse(code)) == [1], code
    writes = [
        'env["HADOOP_CONF_DIR"] = "/c"',
        '{"HADOOP_CONF_DIR": "/c"}',
        'os.environ.get("HADOOP_USER_NAME")',
    ]
    for code in writes:
        assert _reads(ast.parse(code)) == [], code
