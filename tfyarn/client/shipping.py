"""What ``tfyarn.run`` ships: the function and its arguments, pickled, or refused.

cloudpickle pickles a function defined in a notebook or ``__main__`` by value
(its code, with what its closure and globals reach) and an importable one by
reference (module and name, imported again in the task). Some values cannot
cross to another machine and would fail there, or worse, pickle into
something else: an open file, a lock, a TensorFlow tensor, variable or model
(bound to this process's runtime and devices). They are refused here, named
with where they were found, before anything is submitted.
"""

from __future__ import annotations

import io
import socket
import sys
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tfyarn.errors import SpecError

# How deep into lists, dicts and objects the scan looks for what cannot ship.
SCAN_DEPTH = 4
# How many items of one container it looks at (a big list of numbers is fine).
SCAN_ITEMS = 200
_LOCKS = (type(threading.Lock()), type(threading.RLock()))
_TF_MODULES = ("tensorflow", "keras", "tf_keras")
# TensorFlow's classes whose instances are bound to this process (its eager
# runtime, devices, graph): a dtype or a shape pickles fine, these do not.
_TF_BOUND = frozenset(
    {
        "Tensor",
        "Variable",
        "Module",
        "Layer",
        "Operation",
        "DatasetV2",
        "OwnedIterator",
        "Graph",
        "Session",
        "StrategyBase",
    }
)


@dataclass(frozen=True)
class Shipment:
    """The pickled ``(fn, args, kwargs)`` and the modules it imports by reference."""

    body: bytes
    by_reference: tuple[str, ...]  # top-level modules the task must import


def describe(fn: Callable[..., Any]) -> str:
    """``module.qualname`` of a function, for messages."""
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', repr(fn))}"


def problem_of(value: object) -> str:
    """Why ``value`` cannot be shipped to a task, or "" if it can."""
    if isinstance(value, (types.ModuleType, type, types.FunctionType)):
        return ""  # modules, classes and functions pickle by reference or value
    if isinstance(value, io.IOBase) and not value.closed:
        name = getattr(value, "name", None)
        return f"an open file{f' ({name})' if name is not None else ''}"
    if isinstance(value, socket.socket):
        return "an open socket"
    if isinstance(
        value, (*_LOCKS, threading.Condition, threading.Semaphore, threading.Event)
    ):
        return f"a lock ({type(value).__name__})"
    if isinstance(value, threading.Thread):
        return "a thread"
    if _tf_bound(type(value)):
        return (
            f"a TensorFlow object ({type(value).__name__}) of this session: "
            "tensors, variables and models live in this process's runtime; "
            "build them inside the function (pass numbers, arrays or paths)"
        )
    return ""


def _tf_bound(kind: type) -> bool:
    return any(
        (c.__module__ or "").split(".")[0] in _TF_MODULES and c.__name__ in _TF_BOUND
        for c in getattr(kind, "__mro__", ())
    )


def check_shippable(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> None:
    """Refuse what cannot ship, naming each value and where it was found.

    Raises
    ------
    SpecError
        Every value that cannot ship, and what to do instead.
    """
    if not callable(fn):
        raise SpecError(f"tfyarn.run needs a function to run, got {fn!r}")
    found = list(_scan_function(fn, describe(fn), set(), SCAN_DEPTH))
    for i, value in enumerate(args):
        found += _scan(value, f"argument {i + 1}", set(), SCAN_DEPTH)
    for key, value in kwargs.items():
        found += _scan(value, f"argument {key}=", set(), SCAN_DEPTH)
    if found:
        listed = "; ".join(f"{where} is {what}" for where, what in found)
        raise SpecError(
            f"tfyarn.run cannot ship {describe(fn)} to the job's tasks: {listed}. "
            "Open files, locks and TensorFlow objects do not cross machines: "
            "create them inside the function (or pass what makes them: a path, "
            "numbers, a config)"
        )


def _scan(
    value: object, where: str, seen: set[int], depth: int
) -> Iterator[tuple[str, str]]:
    if id(value) in seen or depth < 0:
        return
    seen.add(id(value))
    why = problem_of(value)
    if why:
        yield where, why
        return
    if isinstance(value, types.FunctionType):
        if _by_value(value):
            yield from _scan_function(value, where, seen, depth - 1)
        return
    if isinstance(
        value, (str, bytes, int, float, bool, type(None), type, types.ModuleType)
    ):
        return
    if isinstance(value, Mapping):
        for i, (k, v) in enumerate(value.items()):
            if i >= SCAN_ITEMS:
                break
            yield from _scan(v, f"{where}[{k!r}]", seen, depth - 1)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for i, v in enumerate(value):
            if i >= SCAN_ITEMS:
                break
            yield from _scan(v, f"{where}[{i}]", seen, depth - 1)
    elif hasattr(value, "__dict__") and not isinstance(
        value, types.BuiltinFunctionType
    ):
        attrs = getattr(value, "__dict__", None)
        if isinstance(attrs, dict):
            for k, v in list(attrs.items())[:SCAN_ITEMS]:
                yield from _scan(v, f"{where}.{k}", seen, depth - 1)


def _scan_function(
    fn: Callable[..., Any], where: str, seen: set[int], depth: int
) -> Iterator[tuple[str, str]]:
    """What a function defined by value reaches: closure, globals it names, defaults."""
    seen.add(id(fn))
    code = getattr(fn, "__code__", None)
    if code is None:
        return
    cells = getattr(fn, "__closure__", None) or ()
    for name, cell in zip(code.co_freevars, cells, strict=False):
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell: not assigned yet
            continue
        yield from _scan(value, f"{where}'s closure variable {name!r}", seen, depth)
    names = _global_names(code)
    globs = getattr(fn, "__globals__", {})
    for name in sorted(names):
        if name in globs:
            yield from _scan(globs[name], f"{where}'s global {name!r}", seen, depth)
    for i, value in enumerate(getattr(fn, "__defaults__", None) or ()):
        yield from _scan(value, f"{where}'s default {i + 1}", seen, depth)
    for name, value in (getattr(fn, "__kwdefaults__", None) or {}).items():
        yield from _scan(value, f"{where}'s default {name}=", seen, depth)


def _global_names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _by_value(fn: types.FunctionType) -> bool:
    """Whether cloudpickle ships ``fn``'s code (not a reference to its module)."""
    return _pickled_by_reference(fn) is False


def _pickled_by_reference(obj: object) -> bool | None:
    """cloudpickle's own decision for a function or class; None: cannot tell."""
    import cloudpickle

    decide = getattr(cloudpickle.cloudpickle, "_should_pickle_by_reference", None)
    if decide is None:
        module = getattr(obj, "__module__", None)
        return module not in (None, "__main__")
    try:
        return bool(decide(obj))
    except Exception:  # noqa: BLE001 -- an odd object: let pickling decide
        return None


def pickle_call(
    fn: Callable[..., Any], args: tuple[Any, ...], kwargs: Mapping[str, Any]
) -> Shipment:
    """Pickle ``(fn, args, kwargs)``; refuse what does not pickle, naming it."""
    import cloudpickle

    refs: set[str] = set()

    class Recording(cloudpickle.CloudPickler):
        def reducer_override(self, obj: Any) -> Any:
            if isinstance(obj, (types.FunctionType, type)) and _pickled_by_reference(
                obj
            ):
                refs.add(str(getattr(obj, "__module__", "") or "").split(".")[0])
            elif isinstance(obj, types.ModuleType):
                refs.add(obj.__name__.split(".")[0])
            why = problem_of(obj)
            if why:
                raise SpecError(
                    f"tfyarn.run cannot ship {describe(fn)}: it reaches {why}; "
                    "create it inside the function instead"
                )
            return super().reducer_override(obj)

    buffer = io.BytesIO()
    try:
        Recording(buffer, protocol=5).dump((fn, tuple(args), dict(kwargs)))
    except SpecError:
        raise
    except Exception as exc:  # noqa: BLE001 -- anything unpicklable, in words
        raise SpecError(
            f"tfyarn.run cannot ship {describe(fn)} and its arguments: {exc}. "
            "Pass plain values (numbers, strings, arrays, paths) and create "
            "files, connections and TensorFlow objects inside the function"
        ) from None
    skip = set(sys.stdlib_module_names) | {"", "builtins", "__main__"}
    return Shipment(buffer.getvalue(), tuple(sorted(refs - skip)))
