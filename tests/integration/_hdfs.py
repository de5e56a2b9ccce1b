"""Shared fixture code for the HDFS integration tests."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from tfyarn.data import fs as _fs
from tfyarn.errors import HdfsError


def hdfs_dir() -> Iterator[str]:
    """A fresh ``hdfs:///tmp/tfyarn-test/<id>`` on the local cluster, removed after.

    Fails (not skips) when HDFS is not reachable: these tests are the proof.
    """
    try:
        from tfyarn.cluster.local import use_local_cluster

        use_local_cluster()
    except ImportError:
        pass
    if not os.environ.get("HADOOP_CONF_DIR"):
        pytest.fail(
            "HDFS tests need the local cluster: run `tfyarn cluster start` "
            '(and `eval "$(tfyarn cluster env)"`)'
        )
    base = f"hdfs:///tmp/tfyarn-test/{uuid.uuid4().hex[:10]}"
    fs = _fs.resolve(base)
    try:
        fs.mkdirs(base)
    except HdfsError as exc:
        pytest.fail(f"HDFS is not reachable: {exc}")
    yield base
    fs.delete(base, recursive=True)


#: Run a test on both ways tfyarn's helpers reach HDFS (see ``choose_route``).
ROUTES = pytest.mark.parametrize("plugin", [True, False], ids=["plugin", "fallback"])


def choose_route(monkeypatch: pytest.MonkeyPatch, plugin: bool) -> None:
    """Make tfyarn's checkpoint and staging helpers take TensorFlow's way through
    tfyarn's HDFS plugin (``plugin``) or their mirror fallback, in this process
    and in the processes it starts: ``$TFYARN_HDFS_PLUGIN`` naming a missing
    library means no plugin."""
    from tfyarn import hdfs
    from tfyarn.data import _hdfs_route

    if plugin and not hdfs.available():
        pytest.skip("tfyarn's HDFS plugin is not built (no cargo at install)")
    if not plugin:
        monkeypatch.setenv(hdfs.PLUGIN_ENV, "/nonexistent/libtfyarn_hdfs.so")
    monkeypatch.setattr(_hdfs_route, "_said", set())
