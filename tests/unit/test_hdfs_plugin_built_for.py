"""The plugin is loaded only into the TensorFlow minor version it was built for.

Its record (``libtfyarn_hdfs.json`` beside the library, written by the build
hook) is compared with the running TensorFlow before registering: a mismatch
is one line and the fallback route, never TensorFlow loading a library whose
tables may not match its own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tfyarn import hdfs
from tfyarn.contract import hdfs_plugin as built


def test_the_record_names_the_minor_version_and_a_mismatch_is_one_line(
    tmp_path: Path,
) -> None:
    lib = tmp_path / built.LIBRARY
    lib.write_bytes(b"")
    assert built.mismatch(lib, "2.21.0") is None  # no record: trusted, as before
    assert built.write_built_for(lib, "2.21") == tmp_path / built.BUILT_FOR
    assert built.mismatch(lib, "2.21.3") is None
    said = built.mismatch(lib, "2.22.0")
    assert said is not None and "\n" not in said
    assert "built for TensorFlow 2.21, this is TensorFlow 2.22.0" in said
    assert built.FALLBACK in said
    assert built.tensorflow_minor("tensorflow-cpu>=2.21,<2.22") == "2.21"
    assert built.tensorflow_minor("tensorflow-cpu") is None


def test_the_hook_records_what_pyproject_requires() -> None:
    """The record's version is the one tfyarn requires of TensorFlow, written once."""
    import tomllib

    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    deps = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    (tf,) = [d for d in deps if d.startswith("tensorflow")]
    import tensorflow as real

    assert built.tensorflow_minor(tf) == ".".join(real.__version__.split(".")[:2])


def test_real_tensorflow_refuses_a_plugin_built_for_another_minor(
    tmp_path: Path,
) -> None:
    """The real library and TensorFlow, in a process of their own: enable()
    raises one line and the helpers take the fallback; nothing crashes."""
    if not hdfs.LIBRARY.is_file() and os.environ.get("CI") != "true":
        pytest.skip("the plugin is not built here (no cargo at install)")
    lib = tmp_path / built.LIBRARY
    shutil.copy(hdfs.LIBRARY, lib)
    built.write_built_for(lib, "2.9")
    script = textwrap.dedent(
        """
        import logging, sys
        from tfyarn import hdfs
        from tfyarn.data import _hdfs_route
        from tfyarn.errors import HdfsError
        try:
            hdfs.enable()
        except HdfsError as exc:
            print("refused:", exc)
        log = logging.getLogger("probe")
        logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
        print("plugin route:", _hdfs_route.use_plugin(
            "hdfs://127.0.0.1:1/x", what="probe", fallback="copied", log=log))
        import tensorflow as tf
        print("hdfs registered:", "hdfs" in tf.io.gfile.get_registered_schemes())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={"PATH": "/usr/bin:/bin", "TFYARN_HDFS_PLUGIN": str(lib),
             "HADOOP_CONF_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [ln for ln in done.stdout.splitlines() if ln]
    assert lines[0].startswith(f"refused: tfyarn's HDFS plugin {lib} was built for "
                               "TensorFlow 2.9, this is TensorFlow 2.")  # fmt: skip
    assert lines[1].startswith("probe: copied: tfyarn's HDFS plugin")
    assert lines[2:] == ["plugin route: False", "hdfs registered: False"]
