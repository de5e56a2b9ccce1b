"""Every exception class of the runtime and the script libraries is a
TfyarnError, so ``except tfyarn.TfyarnError`` catches whatever they raise on
purpose, and keeps the builtin base callers' ``except`` clauses rely on."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import tfyarn.data
import tfyarn.runtime
from tfyarn.errors import TfyarnError

PACKAGES = [tfyarn.data, tfyarn.runtime]
MODULES = ["tfyarn.checkpoint", "tfyarn.tensorboard", "tfyarn.progress"]


def _modules() -> list[str]:
    names = list(MODULES)
    for package in PACKAGES:
        names.append(package.__name__)
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            names.append(info.name)
    return names


def _exception_classes() -> list[type[BaseException]]:
    found = []
    for name in _modules():
        module = importlib.import_module(name)
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if issubclass(obj, BaseException) and obj.__module__ == name:
                found.append(obj)
    return found


def test_the_walk_finds_the_known_ones() -> None:
    names = {cls.__name__ for cls in _exception_classes()}
    assert {"CorruptRecordError", "ShardError", "PathNotFoundError"} <= names


@pytest.mark.parametrize("cls", _exception_classes(), ids=lambda c: c.__qualname__)
def test_every_exception_class_is_a_tfyarn_error(cls: type[BaseException]) -> None:
    assert issubclass(cls, TfyarnError), f"{cls.__module__}.{cls.__qualname__}"


def test_builtin_bases_are_kept() -> None:
    from tfyarn.data import fs
    from tfyarn.data._columns import ColumnTypeError
    from tfyarn.data._framing import CorruptRecordError
    from tfyarn.data.fs.deadline import DeadlineError
    from tfyarn.data.sharding import ShardError

    assert issubclass(CorruptRecordError, ValueError)
    assert issubclass(ShardError, ValueError)
    assert issubclass(ColumnTypeError, TypeError)
    assert issubclass(DeadlineError, TimeoutError)
    assert issubclass(fs.PathNotFoundError, FileNotFoundError)
    assert issubclass(fs.HdfsPermissionError, PermissionError)
    assert issubclass(fs.NameNodeUnreachableError, ConnectionError)
