"""``hdfs://`` and ``viewfs://`` inside TensorFlow itself.

tfyarn ships a TensorFlow filesystem plugin (Rust, on the hdfs-native client:
no JVM, no libhdfs; sources in ``tfyarn/hdfs_plugin/``). Once it is registered,
``tf.io.gfile``, ``tf.data.TFRecordDataset``, checkpoints, summary writers and
``model.save`` take HDFS URLs like local paths.

Inside tfyarn tasks it is registered before the script's first line (the
moment the script imports TensorFlow). Elsewhere (a notebook, a local test,
TensorBoard's process) call :func:`enable` once::

    import tfyarn
    tfyarn.enable_hdfs()
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from tfyarn.contract import env as _env
from tfyarn.contract import hadoop_conf
from tfyarn.contract import hdfs_plugin as _built
from tfyarn.errors import HdfsError

#: Environment variable naming the plugin library: set by the task runtime for
#: the script (tfyarn/runtime/_site/sitecustomize.py registers it), or by a
#: user who built the library elsewhere.
PLUGIN_ENV = _env.HDFS_PLUGIN

#: Where the install's build hook (tfyarn/hdfs_plugin/hatch_build.py) puts it.
LIBRARY = Path(__file__).parent / "hdfs_plugin" / _built.LIBRARY

_lock = threading.Lock()
_enabled = False


def plugin_path() -> Path:
    """The plugin library: ``$TFYARN_HDFS_PLUGIN`` or the one installed with tfyarn."""
    return Path(os.environ.get(PLUGIN_ENV) or LIBRARY)


def available() -> bool:
    """Whether the plugin library was built and installed."""
    return plugin_path().is_file()


def enable() -> None:
    """Register the ``hdfs`` and ``viewfs`` schemes with TensorFlow (idempotent).

    The NameNode comes from the URL (``hdfs://host:port/path``) or, for
    ``hdfs:///path``, from ``fs.defaultFS`` of ``$HADOOP_CONF_DIR`` (else the
    running local cluster's config, as ``tfyarn.data`` does). Each call may
    take ``$TFYARN_HDFS_TIMEOUT`` seconds (default 60) before it fails.

    Raises
    ------
    HdfsError
        The plugin was not built (no Rust toolchain at install time), was
        built for another TensorFlow minor version, or TensorFlow refused it.

    Examples
    --------
    >>> import tfyarn, tensorflow as tf  # doctest: +SKIP
    >>> tfyarn.enable_hdfs()  # doctest: +SKIP
    >>> tf.io.gfile.listdir("hdfs:///tmp")  # doctest: +SKIP
    """
    global _enabled
    with _lock:
        if _enabled:
            return
        path = plugin_path()
        if not path.is_file():
            raise HdfsError(f"{_built.NOT_INSTALLED} ({path} is missing)")
        _use_local_cluster_config()
        import tensorflow as tf

        wrong = _built.mismatch(path, tf.__version__)
        if wrong:
            raise HdfsError(wrong)
        try:
            tf.experimental.register_filesystem_plugin(str(path))
        except Exception as exc:  # any refusal: the caller takes the fallback
            # Registered already in this process (the task runtime's hook).
            if "already" not in str(exc).lower():
                message = getattr(exc, "message", None) or str(exc)
                first = message.strip().splitlines()[0] if message.strip() else ""
                raise HdfsError(
                    f"TensorFlow refused the HDFS plugin {path}: {first}"
                ) from exc
        _enabled = True


def _use_local_cluster_config() -> None:
    """Without ``HADOOP_CONF_DIR``, ``hdfs:///`` means the running local
    cluster's fs.defaultFS, as in ``tfyarn.data`` (the plugin reads the
    variable itself)."""
    directory = hadoop_conf.local_fallback_conf_dir()
    if directory is not None:
        hadoop_conf.use_conf_dir(directory)
