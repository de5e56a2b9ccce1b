"""Import skein without setuptools' copy of distutils: the master and the runtime.

skein imports ``distutils.version`` for one version check. With setuptools
installed, its import hook answers ``import distutils`` with setuptools' own
copy, which imports much of setuptools: 0.06 CPU-s per process on a quiet
machine, 0.13 s while six tasks import TensorFlow on two cores (measured
while a 2 ps + 4 worker cluster formed). Where the standard library still has distutils (Python
< 3.12), this loads that one instead, as Python would without the hook.

Only for processes that never import setuptools themselves (it would replace
distutils again, with a warning): the master and the task runtime.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
import sysconfig
import warnings
from types import ModuleType


def import_skein() -> ModuleType:
    """skein, with the standard library's distutils where there is one."""
    if "skein" not in sys.modules and "distutils" not in sys.modules:
        _load_stdlib_distutils()
    return importlib.import_module("skein")


def _load_stdlib_distutils() -> None:
    # PathFinder over the standard library's directory only: the meta path,
    # where setuptools' hook sits, is not asked. Its submodules are then found
    # through the package's own path, as for any package.
    stdlib = sysconfig.get_paths()["stdlib"]
    spec = importlib.machinery.PathFinder.find_spec("distutils", [stdlib])
    if spec is None or spec.loader is None:  # Python >= 3.12: skein gets setuptools'
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["distutils"] = module
    try:
        with warnings.catch_warnings():
            # "The distutils package is deprecated": skein's use, not the user's.
            warnings.simplefilter("ignore", DeprecationWarning)
            spec.loader.exec_module(module)
            importlib.import_module("distutils.version")
    except Exception:  # noqa: BLE001 -- a broken stdlib copy: setuptools' is still there
        for name in [n for n in sys.modules if n.partition(".")[0] == "distutils"]:
            del sys.modules[name]
