"""``tfyarn image check TAG``: run the image the way YARN's Docker runtime would.

As an unprivileged user, on the host network, with the Hadoop configuration
mounted read-only (``HADOOP_CONF_DIR``), the image's ``docker_python`` runs
:mod:`tfyarn.image.probe`; each check is one line, a failure says what.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from tfyarn.contract import docker as _docker
from tfyarn.contract.hadoop_conf import explicit_conf_dir
from tfyarn.image._engine import (
    ImageError,
    docker,
    image_exists,
    last_line,
    require_engine,
)

# Where the Hadoop configuration appears inside the container.
CONF_IN_CONTAINER = "/etc/hadoop/conf"
NOBODY = "65534:65534"


@dataclass(frozen=True)
class Result:
    name: str
    ok: bool
    detail: str

    def line(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.name}: {self.detail}"


def check(
    tag: str,
    *,
    hadoop_conf: str | None = None,
    python: str = _docker.IMAGE_PYTHON,
    timeout: float = 300,
) -> list[Result]:
    """Run the probe in ``tag``; one :class:`Result` per check.

    Raises
    ------
    ImageError
        No engine, no such image, or the image's Python cannot even start.
    """
    require_engine()
    if not image_exists(tag):
        raise ImageError(
            f"no image {tag} on this machine; build it with "
            f"`tfyarn image build --tag {tag}` (or docker load it)"
        )
    conf = hadoop_conf or explicit_conf_dir() or ""
    args = ["run", "--rm", "--network", _docker.HOST_NETWORK, "--user", _user()]
    args += ["--entrypoint", "", "--workdir", "/tmp"]
    if conf:
        if not Path(conf).is_dir():
            raise ImageError(f"Hadoop configuration {conf} is not a directory")
        args += ["-v", f"{Path(conf).resolve()}:{CONF_IN_CONTAINER}:ro"]
        args += ["-e", f"HADOOP_CONF_DIR={CONF_IN_CONTAINER}"]
    args += [tag, python, "-m", "tfyarn.image.probe"]
    result = docker(args, timeout=timeout, check=False)
    results = []
    for line in result.stdout.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        results.append(Result(item["check"], bool(item["ok"]), str(item["detail"])))
    if not results:
        why = last_line(result)
        if "no such file" in why.lower() or "not found" in why.lower():
            why = (
                f"{python} is not in the image ({why}); build the image with "
                "`tfyarn image build` or give --docker_python its Python"
            )
        raise ImageError(f"image {tag}: the check could not run: {why}")
    return results


def _user() -> str:
    # YARN runs a container as the job's user: never root.
    uid = os.getuid()
    return f"{uid}:{os.getgid()}" if uid else NOBODY
