"""Registers tfyarn's hdfs:// plugin the moment a task's script imports TensorFlow.

The task runtime puts this directory first on the script's ``PYTHONPATH`` and
the plugin's path in ``TFYARN_HDFS_PLUGIN`` (tfyarn.runtime.prelude.spawn_env),
so Python runs this file at start-up in both ways a script starts: plain
(``python SCRIPT``) and pre-started (the bootstrap, which then imports
TensorFlow early). Importing TensorFlow here would cost seconds in scripts
that never use it, so an import hook waits for the script's (or the
bootstrap's) own ``import tensorflow`` and registers right after it: a script
with no tfyarn import opens ``hdfs://`` paths from its first line on.

Standard library only (the job's interpreter may not have tfyarn). Then the
environment's own ``sitecustomize``, if any, runs as it would have.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any

_HERE = os.path.dirname(os.path.abspath(__file__))


class _RegisterAfterImport:
    """Finds nothing itself: wraps TensorFlow's loader to register after it.

    A meta path finder needs only ``find_spec``; not deriving from
    ``importlib.abc.MetaPathFinder`` spares every script 20 ms of imports.
    """

    def __init__(self, plugin: str) -> None:
        self.plugin = plugin

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "tensorflow":
            return None
        sys.meta_path.remove(self)  # once; and no recursion in find_spec below
        spec = importlib.util.find_spec(name)
        loader = getattr(spec, "loader", None)
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        plugin, run = self.plugin, loader.exec_module

        def exec_module(module: Any) -> None:
            run(module)
            _register(module, plugin)

        loader.exec_module = exec_module
        return spec


def _register(tf: Any, plugin: str) -> None:
    from pathlib import Path

    try:
        wrong = _contract().mismatch(Path(plugin), getattr(tf, "__version__", ""))
        if wrong:
            print(f"tfyarn: {wrong}", file=sys.stderr, flush=True)
            return
        tf.experimental.register_filesystem_plugin(plugin)
    except Exception as exc:  # noqa: BLE001 - the script runs on without hdfs://
        if "already" not in str(exc).lower():
            first = (str(exc).strip().splitlines() or [""])[0]
            print(
                f"tfyarn: could not register the hdfs:// plugin {plugin} with "
                f"TensorFlow: {first}",
                file=sys.stderr,
                flush=True,
            )
        return
    # The task's log says which route hdfs:// takes (and which library).
    print(
        f"tfyarn: hdfs:// in TensorFlow through tfyarn's HDFS plugin {plugin}",
        file=sys.stderr,
        flush=True,
    )


def _contract() -> Any:
    """tfyarn/contract/hdfs_plugin.py, loaded by path: the script's
    interpreter may not have tfyarn's dependencies (or tfyarn) importable."""
    import importlib.util

    path = os.path.join(_HERE, "..", "..", "contract", "hdfs_plugin.py")
    spec = importlib.util.spec_from_file_location("_tfyarn_hdfs_plugin", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _install() -> None:
    plugin = os.environ.get("TFYARN_HDFS_PLUGIN")
    if plugin and os.path.isfile(plugin) and "tensorflow" not in sys.modules:
        sys.meta_path.insert(0, _RegisterAfterImport(plugin))


def _chain() -> None:
    """Run the sitecustomize this one shadows, and leave sys.path as it was."""
    while _HERE in sys.path:
        sys.path.remove(_HERE)
    me = sys.modules.pop("sitecustomize", None)  # absent when run under another name
    try:
        importlib.import_module("sitecustomize")
    except ImportError:
        # None to chain: the import of this file must find it in sys.modules
        # when it ends, else site.py prints "Error in sitecustomize: KeyError".
        if me is not None:
            sys.modules["sitecustomize"] = me


_install()
_chain()
