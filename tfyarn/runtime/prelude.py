"""Everything done before the script's first line, for both ways it starts.

This is the one place for it. The script starts either

- **pre-started** (``preimport``): :func:`preload_command` runs the bootstrap
  ``_bootstrap/preload.py`` with :func:`spawn_env` as soon as the task holds its
  port; after formation the bootstrap receives :func:`script_args` and
  :func:`formed_env` and runs the script with ``runpy``;
- **plain**: :func:`plain_command` with :func:`spawn_env` and
  :func:`formed_env` together, after formation.

So what every script must see goes into :func:`spawn_env` (known before
formation) or :func:`formed_env` (known after), and code that must run in the
script's interpreter before the script goes into the bootstrap, whose
``_before_script`` is its one spot (stdlib only: it runs with the job's
interpreter, where tfyarn may not be importable).
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from tfyarn.contract import env as _env
from tfyarn.runtime import notice as _notices
from tfyarn.runtime import teardown as _teardown
from tfyarn.runtime import tfconfig as _tfconfig
from tfyarn.runtime.context import TaskContext

# Run by path, with the job's interpreter: tfyarn need not be importable there.
# Alone in its directory, so that directory (sys.path[0] until the bootstrap
# puts the script's there) holds nothing that could shadow a module.
BOOTSTRAP = Path(__file__).parent / "_bootstrap" / "preload.py"

# Its sitecustomize registers the hdfs:// plugin when the script imports
# TensorFlow (both starts run it: Python reads PYTHONPATH at start-up).
SITE = Path(__file__).parent / "_site"

# The task's temporary files go to ./tmp in its container's directory, which
# YARN deletes with the container: TensorFlow's autograph
# (__autograph_generated_file*.py) and tfyarn's checkpoint and TensorBoard
# helpers (tfyarn-ckpt-*, tfyarn-tb-*) use tempfile, whose files in /tmp
# would outlive the job.
TMP_DIR = "tmp"


def task_tmpdir(workdir: Path) -> Path:
    """The container's ``./tmp`` (YARN usually made it already), created."""
    path = workdir / TMP_DIR
    path.mkdir(exist_ok=True)
    return path


def use_tmpdir(tmpdir: Path, ctx: TaskContext) -> None:
    """This process's temporary files in ``tmpdir`` too (``TMPDIR`` and
    ``tempfile.tempdir``), unless the job's ``--env`` sets ``TMPDIR``."""
    if "TMPDIR" in ctx.spec.env:
        return
    os.environ["TMPDIR"] = str(tmpdir)
    tempfile.tempdir = str(tmpdir)


def spawn_env(
    base_env: Mapping[str, str],
    port: int,
    ctx: TaskContext,
    *,
    tmpdir: Path | None = None,
    gpus: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The script's environment as far as it is known before formation.

    ``TF_GRPC_REUSE_PORT`` is read when TensorFlow creates its server and may
    be read at import, so it must be there when the interpreter starts. The
    task's index and attempt are there from the start too (a declared
    container's env lacks them): tools that find a task's script by its
    ``/proc/<pid>/environ`` see them. ``TMPDIR`` is ``tmpdir`` (see
    :data:`TMP_DIR`), unless the job's ``--env`` sets it; the attempt's stop
    notice file is there too (:mod:`tfyarn.runtime.notice`). ``gpus``: the
    task's CUDA variables (:func:`tfyarn.runtime.gpus.script_env`), there
    before CUDA loads.
    """
    env = dict(base_env)
    if tmpdir is not None and "TMPDIR" not in ctx.spec.env:
        env["TMPDIR"] = str(tmpdir)
    if tmpdir is not None:  # where this attempt's stop notice will be
        env.update(_notices.script_env(tmpdir, ctx.attempt, ctx.spec.stop_grace))
        # and where the bootstrap says its script returned
        env.update(_teardown.script_env(tmpdir, ctx.attempt))
    env.update(
        {
            _env.TASK_INDEX: str(ctx.index),
            _env.ATTEMPT: str(ctx.attempt),
            # TensorFlow binds its port with SO_REUSEPORT, next to our
            # reservation (tfyarn/runtime/ports.py).
            "TF_GRPC_REUSE_PORT": "1",
            "PYTHONUNBUFFERED": "1",
            _env.PORT: str(port),
        }
    )
    env.update(hdfs_plugin_env(env))
    env.update(gpus or {})
    return env


def hdfs_plugin_env(env: Mapping[str, str]) -> dict[str, str]:
    """``hdfs://`` in TensorFlow from the script's first line, when the plugin
    is installed (tfyarn/hdfs.py); a user's own ``TFYARN_HDFS_PLUGIN`` wins,
    an empty one turns it off."""
    from tfyarn import hdfs

    if _env.HDFS_PLUGIN in env:
        plugin = env[_env.HDFS_PLUGIN]
    elif hdfs.LIBRARY.is_file():
        plugin = str(hdfs.LIBRARY)
    else:
        return {}
    if not plugin:
        return {}
    path = [str(SITE), *filter(None, [env.get("PYTHONPATH")])]
    return {_env.HDFS_PLUGIN: plugin, "PYTHONPATH": os.pathsep.join(path)}


def formed_env(
    ctx: TaskContext, cluster: _tfconfig.Cluster, restart: int
) -> dict[str, str]:
    """What the script's environment gains once the cluster formed: TF_CONFIG
    and the task's identity (a declared container's env lacks most of it)."""
    identity = _env.task_env(
        index=ctx.index,
        attempt=ctx.attempt,
        master_address=ctx.master_address,
        restart=restart,
    )
    return {
        "TF_CONFIG": _tfconfig.tf_config(cluster, ctx.role.value, ctx.index),
        **identity,
    }


def script_args(ctx: TaskContext, cluster: _tfconfig.Cluster) -> list[str]:
    """The script's arguments: placeholders expanded, legacy flags if asked."""
    return _tfconfig.script_args(
        ctx.spec.args,
        cluster,
        ctx.role.value,
        ctx.index,
        legacy=ctx.spec.legacy_flags,
    )


def plain_command(script: Path, args: list[str]) -> list[str]:
    """``python -u SCRIPT ARGS``; sys.executable is the job's interpreter
    (``JobSpec.python`` runs the runtime)."""
    return [sys.executable, "-u", str(script), *args]


def preload_command(
    message_fd: int, script: Path, modules: tuple[str, ...]
) -> list[str]:
    """The bootstrap that imports ``modules`` and then waits on ``message_fd``."""
    return [
        sys.executable,
        "-u",
        str(BOOTSTRAP),
        str(message_fd),
        str(script),
        *modules,
    ]
