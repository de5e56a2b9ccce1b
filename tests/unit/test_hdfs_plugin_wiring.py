"""How a task's script gets the hdfs:// plugin (no Hadoop, no plugin build needed).

The sitecustomize must register the plugin when the script imports
TensorFlow, not before (scripts that never import it pay nothing), and must
still run the environment's own sitecustomize.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tfyarn import hdfs
from tfyarn.contract import env as _env
from tfyarn.contract import hdfs_plugin as built
from tfyarn.runtime import prelude
from tfyarn.runtime.context import TaskContext
from tfyarn.spec import JobSpec, Role

CTX = TaskContext(
    spec=JobSpec(script="train.py"),
    role=Role.WORKER,
    index=0,
    attempt=0,
    restart=0,
    master_address="",
    host="localhost",
    port=0,
    container_id="worker_0",
    yarn_container_id="",
)


def test_spawn_env_points_the_script_at_the_plugin(monkeypatch, tmp_path) -> None:
    lib = tmp_path / "libtfyarn_hdfs.so"
    lib.write_bytes(b"")
    monkeypatch.setattr(hdfs, "LIBRARY", lib)
    env = prelude.spawn_env({"PYTHONPATH": "/user/lib"}, 1234, CTX)
    assert env[_env.HDFS_PLUGIN] == str(lib)
    assert env["PYTHONPATH"] == os.pathsep.join([str(prelude.SITE), "/user/lib"])
    # An empty TFYARN_HDFS_PLUGIN in the job's environment turns it off.
    off = prelude.spawn_env({_env.HDFS_PLUGIN: ""}, 1234, CTX)
    assert "PYTHONPATH" not in off
    monkeypatch.setattr(hdfs, "LIBRARY", tmp_path / "absent.so")
    assert _env.HDFS_PLUGIN not in prelude.spawn_env({}, 1234, CTX)


def _fake_tensorflow(root: Path, version: str) -> Path:
    """A "tensorflow" package that records registrations."""
    fake = root / "fake"
    (fake / "tensorflow" / "experimental").mkdir(parents=True)
    (fake / "tensorflow" / "__init__.py").write_text(
        f"__version__ = {version!r}\nfrom tensorflow import experimental\n"
    )
    (fake / "tensorflow" / "experimental" / "__init__.py").write_text(
        "registered = []\n"
        "def register_filesystem_plugin(path):\n"
        "    registered.append(path)\n"
    )
    return fake


def test_sitecustomize_registers_after_the_import_and_chains(tmp_path: Path) -> None:
    # A fake "tensorflow" records the registration; the user's own
    # sitecustomize must still run.
    fake = _fake_tensorflow(tmp_path, "2.21.0")
    (fake / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE = 1\n")
    plugin = tmp_path / "libtfyarn_hdfs.so"
    plugin.write_bytes(b"")
    script = textwrap.dedent(
        """
        import builtins, sys
        assert builtins.USER_SITE == 1, "the user's sitecustomize did not run"
        assert "tensorflow" not in sys.modules
        import tensorflow
        print(tensorflow.experimental.registered)
        print(any(p.endswith("_site") for p in sys.path))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script],
        env={
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": os.pathsep.join([str(prelude.SITE), str(fake)]),
            _env.HDFS_PLUGIN: str(plugin),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [f"['{plugin}']", "False"]
    # The task's log says which route hdfs:// takes.
    assert proc.stderr.strip().endswith(f"through tfyarn's HDFS plugin {plugin}")


def test_sitecustomize_refuses_a_plugin_built_for_another_tensorflow(
    tmp_path: Path,
) -> None:
    """Another TensorFlow minor version: one line and no registration, not a
    crash inside TensorFlow."""
    fake = _fake_tensorflow(tmp_path, "2.22.1")
    plugin = tmp_path / "libtfyarn_hdfs.so"
    plugin.write_bytes(b"")
    built.write_built_for(plugin, "2.21")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import tensorflow as t; print(t.experimental.registered)",
        ],
        env={
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": os.pathsep.join([str(prelude.SITE), str(fake)]),
            _env.HDFS_PLUGIN: str(plugin),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "built for TensorFlow 2.21, this is TensorFlow 2.22.1" in lines[0]
    assert "copy through local disk" in lines[0]


def test_sitecustomize_alone_is_silent(tmp_path: Path) -> None:
    """No other sitecustomize to chain to (a venv of a Python without one):
    nothing on stderr (site.py printed "Error in sitecustomize ... KeyError"
    in every task)."""
    plugin = tmp_path / "libtfyarn_hdfs.so"
    plugin.write_bytes(b"")
    proc = subprocess.run(
        [sys.executable, "-c", "import sitecustomize; print(sitecustomize.__file__)"],
        env={
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(prelude.SITE),
            _env.HDFS_PLUGIN: str(plugin),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
