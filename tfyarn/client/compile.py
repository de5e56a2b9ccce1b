"""A validated :class:`~tfyarn.spec.JobSpec` compiled to a ``skein.ApplicationSpec``.

Only the client compiles a job; the master and the tasks read the spec back
from ``TFYARN_JOB`` and never need skein's application model for it.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath
from typing import Any

from tfyarn._launch import Interpreter
from tfyarn.client.master_code import master_zip
from tfyarn.contract import env as _env
from tfyarn.contract import jvm as _jvm
from tfyarn.spec import ROLES, JobSpec


def to_skein(
    spec: JobSpec,
    *,
    am_source: str | None = None,
    interpreter: Interpreter | None = None,
) -> Any:
    """Compile ``spec`` to a ``skein.ApplicationSpec``.

    The master runs ``python -m am`` next to skein's Java AM; each role is a
    skein service with one instance per task, so the initial requests leave
    with the AM's first heartbeat to YARN (the master's own ``add_container``
    calls would wait for skein's next one, up to 5 s). A declared container's
    task index is its skein instance (:mod:`tfyarn.contract.env`). The master
    adds every later container itself (replacements, restarts), with the
    index in its env. Services allow failures and never restart on their
    own: the master decides.

    Parameters
    ----------
    spec
        The job, validated.
    am_source
        The zip of the master's code: a local path or a cluster URL
        (:func:`tfyarn.client.master_code.archive_source`); default: the
        local zip (:func:`tfyarn.client.master_code.master_zip`).
    interpreter
        The shipped Python environment (``--python_env``, prepared by the
        client); default: ``spec.python`` on every node.

    Returns
    -------
    skein.ApplicationSpec
        What ``skein.Client.submit`` takes.
    """
    import skein

    python = interpreter or Interpreter.local(spec.python)
    spec_env = {_env.JOB: spec.to_env()}
    task_files = {spec.script_name: _file_source(spec.script)}
    for f in spec.files:
        task_files[PurePosixPath(f).name] = _file_source(f)
    services = {}
    for role in ROLES:
        group = spec.group(role)
        if not group.count:
            continue
        memory, vcores, gpus = group.resources()
        # A role in Docker runs the image's Python: the image is its
        # environment, so no shipped archive is localized for it.
        role_python = (
            Interpreter.local(spec.docker_python)
            if spec.docker_image_of(role)
            else python
        )
        services[role.value] = skein.Service(
            instances=group.count,
            resources=skein.Resources(memory=memory, vcores=vcores, gpus=gpus),
            files={**task_files, **role_python.skein_files()},
            env={
                **spec.env,
                **spec.docker_env(role),
                **spec_env,
                _env.ROLE: role.value,
            },
            script=role_python.command("tfyarn.runtime"),
            allow_failures=True,
            max_restarts=0,
            node_label=spec.node_label_of(role),
        )
    # The master's code ships as a zip archive that YARN unpacks into ./am:
    # skein uploads a directory resource with file permissions (no x bit),
    # which only an HDFS superuser could traverse when localizing it. One
    # from the user's HDFS cache (tfyarn.client.master_code) is PRIVATE:
    # each node keeps it unpacked for the user's later jobs.
    source = am_source or master_zip()
    am_archive = skein.File(
        source=source,
        type="archive",
        visibility="private" if _remote(source) else "application",
    )
    master = skein.Master(
        resources=skein.Resources(memory=spec.am_memory_mib, vcores=spec.am_vcores),
        files={"am": am_archive, **python.skein_files()},
        # Options for skein's Java AM (tfyarn.contract.jvm); a user's own
        # JAVA_TOOL_OPTIONS in --env wins.
        env={_jvm.TOOL_OPTIONS: _jvm.tool_options(), **spec.env, **spec_env},
        script=python.command("am"),
    )
    return skein.ApplicationSpec(
        name=spec.name,
        queue=spec.queue,
        master=master,
        services=services,
        max_attempts=spec.max_am_attempts,
        tags={"tfyarn"},
        file_systems=list(spec.hdfs_namenodes),
    )


def _file_source(path: str) -> str:
    return path if "://" in path else str(Path(path).resolve())


def _remote(source: str) -> bool:
    """A file on a cluster filesystem (hdfs://, viewfs://), not on this machine."""
    return "://" in source and not source.startswith("file://")
