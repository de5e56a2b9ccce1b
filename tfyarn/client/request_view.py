"""What ``--dry_run`` shows of a job: the YARN request it would make, per role.

Users debugging a cluster's setup (Docker images refused, a GPU request never
granted, a missing interpreter) need the exact resources, launch environment,
files and command each container would get; this renders them from the
``skein.ApplicationSpec`` that :func:`tfyarn.client.compile.to_skein` compiles, so what is
shown is what a real submit sends.
"""

from __future__ import annotations

from typing import Any

from tfyarn.contract import env as _env
from tfyarn.spec import JobSpec, Role

# Per container, the master adds these when it starts each task.
_PER_TASK = (_env.TASK_INDEX, _env.ATTEMPT, _env.MASTER_ADDRESS, _env.RESTART)


def render(spec: JobSpec, app: Any) -> str:
    """The request of every role of ``spec`` (compiled to ``app``), as text."""
    lines = [f"YARN request (application {app.name!r}, queue {app.queue!r}):"]
    lines += _container("master", app.master, count=None, note="on the node itself")
    for role_name, service in app.services.items():
        role = Role(role_name)
        image = spec.docker_image_of(role)
        note = f"in Docker image {image}" if image else "on the node itself"
        lines += _container(role_name, service, count=spec.count(role), note=note)
    lines.append(
        "Each task's container also gets "
        + ", ".join(_PER_TASK)
        + " from the master when it starts the task."
    )
    lines += _gpu_lines(spec)
    return "\n".join(lines) + "\n"


def _gpu_lines(spec: JobSpec) -> list[str]:
    """Which GPUs each task's script will see (known per task only once YARN
    placed it: the master names them when the task registers)."""
    roles = [r for r in Role if spec.count(r)]
    if not any(spec.group(r).gpus for r in roles):
        return []
    out = ["GPUs (CUDA_VISIBLE_DEVICES in each script's environment):"]
    for role in roles:
        n = spec.group(role).gpus or 0
        tasks = ", ".join(f"{role.value}:{i}" for i in range(spec.count(role)))
        if not n:
            out.append(f'  {tasks}: none (CUDA_VISIBLE_DEVICES="")')
            continue
        out.append(
            f"  {tasks}: {n} each, named by index and UUID when the task "
            "registers: those YARN assigned to its container (Docker's "
            "NVIDIA_VISIBLE_DEVICES or the NodeManager's), else free ones of its "
            "node chosen by the master, disjoint within the job"
        )
    return out


def _container(name: str, part: Any, *, count: int | None, note: str) -> list[str]:
    res = part.resources
    gpus = f", {res.gpus} yarn.io/gpu" if res.gpus else ""
    many = f"{count} x " if count is not None else ""
    out = [f"{name}: {many}{res.memory} MiB, {res.vcores} vcores{gpus} ({note})"]
    out.append(f"  command: {part.script.strip()}")
    out.append("  environment:")
    for key in sorted(part.env):
        value = part.env[key]
        if key == _env.JOB:
            value = f"<the job above, {len(value)} characters of base64 JSON>"
        out.append(f"    {key}={value}")
    out.append("  files:")
    for target, f in sorted(part.files.items()):
        kind = str(getattr(f.type, "value", f.type)).lower()
        out.append(f"    {target} ({kind}) <- {f.source}")
    return out
