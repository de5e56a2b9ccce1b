"""Source files parsed once per test session: several tests read the syntax
trees of every module (import graph, configuration reads)."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def parsed(path: Path) -> ast.Module:
    """``path``'s syntax tree (do not modify it: it is shared)."""
    return ast.parse(path.read_text(), str(path))
