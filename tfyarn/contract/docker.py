"""YARN's Docker runtime: the variables a container asks for it with, and what YARN accepts.

Hadoop 3's NodeManager (with the LinuxContainerExecutor and
``DockerLinuxContainerRuntime``) runs a container in Docker when its launch
environment says so. The names and patterns below are that runtime's
(``DockerLinuxContainerRuntime``/``OCIContainerRuntime`` in Java, and
``docker-util.c`` in container-executor, which checks the image name with the
same expression). Pure: the client checks a job with it before submitting, and
the image tools use the same names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

RUNTIME_TYPE = "YARN_CONTAINER_RUNTIME_TYPE"  # "docker"
IMAGE = "YARN_CONTAINER_RUNTIME_DOCKER_IMAGE"
NETWORK = "YARN_CONTAINER_RUNTIME_DOCKER_CONTAINER_NETWORK"
MOUNTS = "YARN_CONTAINER_RUNTIME_DOCKER_MOUNTS"  # src:dst:mode,src:dst:mode
DOCKER_RUNTIME = "YARN_CONTAINER_RUNTIME_DOCKER_RUNTIME"  # e.g. nvidia
# Which GPUs NVIDIA's Docker runtime puts in a container: YARN's GPU plugin
# (NvidiaDockerV2CommandPlugin) sets it to the assigned devices' indices;
# "all" every device of the node, "void" none and no driver either.
NVIDIA_VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
NVIDIA_RUNTIME = "nvidia"

# TensorFlow's servers and the master talk on the node's own addresses and
# ports, so a task must share the host's network namespace.
HOST_NETWORK = "host"

# Where `tfyarn image build` puts the job's environment inside an image, and so
# the interpreter of tasks that run in one (option docker_python).
IMAGE_PYTHON = "/opt/tfyarn/venv/bin/python"

# DockerLinuxContainerRuntime.DOCKER_IMAGE_PATTERN (docker-util.c spells the tag
# class [a-zA-Z0-9_.-], the same set): [registry[:port]/]path[:tag]. No digests
# (@sha256:...), no upper case in the path.
IMAGE_PATTERN = re.compile(
    r"^(([a-zA-Z0-9.-]+)(:\d+)?/)?([a-z0-9_./-]+)(:[a-zA-Z0-9_.-]+)?$"
)
_RUNTIME_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")
MOUNT_MODES = ("ro", "rw")
DEFAULT_MOUNT_MODE = "ro"


def image_problem(name: str) -> str | None:
    """Why YARN would refuse ``name`` as an image, or None when it would take it."""
    if not IMAGE_PATTERN.match(name):
        hint = ""
        if "@" in name:
            hint = "; YARN takes no digests (@sha256:...), give a tag"
        elif name.lower() != name and IMAGE_PATTERN.match(name.lower()):
            hint = "; the repository path must be lower case"
        return (
            f"{name!r} is not an image name YARN accepts: "
            "[REGISTRY[:PORT]/]PATH[:TAG], PATH of a-z 0-9 _ . / -, TAG of "
            f"letters, digits _ . - (DockerLinuxContainerRuntime's pattern){hint}"
        )
    return None


def parse_mount(text: str) -> str:
    """``SRC:DST[:ro|rw]`` as YARN's ``src:dst:mode`` (mode ``ro`` when left out).

    SRC is an absolute path on the node (or the name of a file the job ships,
    which YARN resolves to its localized copy); DST an absolute path in the
    container. A read-write mount must be one the cluster allows read-write.

    Raises
    ------
    ValueError
        What is wrong with ``text``, in a sentence.
    """
    parts = text.strip().split(":")
    if len(parts) == 2:
        parts.append(DEFAULT_MOUNT_MODE)
    if len(parts) != 3 or not all(parts):
        raise ValueError(
            f"{text!r} is not a mount: give SRC:DST or SRC:DST:ro or SRC:DST:rw "
            "(paths without ':' or ',')"
        )
    src, dst, mode = parts
    if mode not in MOUNT_MODES:
        raise ValueError(f"mount {text!r}: mode must be ro or rw, got {mode!r}")
    if "," in text or "\x00" in text:
        raise ValueError(f"mount {text!r}: paths must not contain ','")
    if not dst.startswith("/"):
        raise ValueError(
            f"mount {text!r}: the destination {dst!r} must be an absolute path "
            "inside the container"
        )
    if not src.startswith("/") and "/" in src:
        raise ValueError(
            f"mount {text!r}: the source must be an absolute path on the node "
            "(or the bare name of a file the job ships)"
        )
    return f"{src}:{dst}:{mode}"


def runtime_problem(name: str) -> str | None:
    """Why ``name`` cannot be a Docker runtime name (``nvidia``, ``runc``), or None."""
    if _RUNTIME_NAME.match(name):
        return None
    return f"{name!r} is not a Docker runtime name (such as nvidia or runc)"


def container_env(
    image: str, mounts: Sequence[str] = (), runtime: str = "", *, gpus: int = 0
) -> dict[str, str]:
    """The launch environment that asks YARN to run a container in ``image``.

    ``mounts`` are already normalized (:func:`parse_mount`); an empty
    ``image`` means no Docker at all (an empty dict). With NVIDIA's runtime
    (``--docker_runtime nvidia``, on clusters without YARN's GPU plugin for
    Docker), the container asks for GPUs as YARN's plugin passes them, in
    ``NVIDIA_VISIBLE_DEVICES``: a task with ``gpus`` gets ``all`` (its node is
    not known when the container is asked for; the master then names its
    devices and the runtime narrows them with ``CUDA_VISIBLE_DEVICES``), one
    without gets ``void`` (a CUDA image's own ``all`` would show it every GPU).
    """
    if not image:
        return {}
    env = {RUNTIME_TYPE: "docker", IMAGE: image, NETWORK: HOST_NETWORK}
    if mounts:
        env[MOUNTS] = ",".join(mounts)
    if runtime:
        env[DOCKER_RUNTIME] = runtime
    if runtime == NVIDIA_RUNTIME:
        env[NVIDIA_VISIBLE_DEVICES] = "all" if gpus else "void"
    return env
