"""A Docker engine and images for the tests of tasks run in Docker images.

No image registry is reachable here: the base image is Debian bookworm made
with ``debootstrap --variant=minbase`` (plus python3, the client's 3.11) and
``docker import``. Images are named by what they are built from, so a second
session (and a second test in a CI run) reuses them: the base by its recipe,
the job image by the client's sources and installed distributions.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from tfyarn import _paths
from tfyarn.image import build as image_build
from tfyarn.image._engine import image_exists

WORK = Path(os.environ.get("TFYARN_TEST_DIR", "/var/tmp/tfyarn-tests"))
SUITE = "bookworm"
BASE_RECIPE = ["debootstrap", "--variant=minbase", "--include=python3", SUITE]
BASE_PYTHON = "3.11"  # bookworm's python3
ENGINE_WAIT_S = 60
DEBOOTSTRAP_TIMEOUT_S = 900
SBIN = ("/usr/sbin", "/sbin")


def system_command(name: str, where: tuple[str, ...] = SBIN) -> str:
    """``name``'s path, looked up on PATH and then in ``where`` (Debian puts
    dockerd and debootstrap in /usr/sbin, which a user's PATH may not reach);
    else a test failure naming the command and where it was looked for."""
    path = os.environ.get("PATH", "")
    found = shutil.which(name, path=os.pathsep.join([path, *where]))
    if found is None:
        also = f" nor in {', '.join(where)}" if where else ""
        pytest.fail(
            f"no `{name}` command on PATH ({path}){also}: install it "
            "(tests/system-packages.sh) or add its directory to PATH"
        )
    return found


def _engine_answers() -> bool:
    result = subprocess.run(
        ["docker", "version", "--format", "{{.Server.Version}}"],
        capture_output=True,
        timeout=30,
        check=False,
    )
    return result.returncode == 0


@pytest.fixture(scope="session")
def docker_engine() -> Iterator[None]:
    """A Docker engine that answers; started (and later stopped) if none runs."""
    system_command("docker", where=())  # tfyarn runs it from PATH
    dockerd = system_command("dockerd")
    if _engine_answers():
        yield
        return
    if os.getuid() != 0:
        pytest.fail("dockerd is not running and only root may start it: start it")
    WORK.mkdir(parents=True, exist_ok=True)
    log = (WORK / "dockerd.log").open("ab")
    proc = subprocess.Popen([dockerd], stdout=log, stderr=log, start_new_session=True)
    deadline = time.monotonic() + ENGINE_WAIT_S
    while not _engine_answers():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(
                f"dockerd did not come up within {ENGINE_WAIT_S} s "
                f"(exit {proc.poll()}); see {WORK / 'dockerd.log'}"
            )
        time.sleep(1)
    try:
        yield
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="session")
def base_image(docker_engine: None) -> str:
    """Debian bookworm with its python3, imported from a debootstrap root."""
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if here != BASE_PYTHON:
        pytest.skip(f"the test base has Python {BASE_PYTHON}, this client {here}")
    recipe = hashlib.sha256(" ".join(BASE_RECIPE).encode()).hexdigest()[:12]
    tag = f"tfyarn-test/{SUITE}-python:{recipe}"
    if image_exists(tag):
        return tag
    debootstrap = system_command("debootstrap")
    WORK.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=WORK, prefix="rootfs-") as root:
        subprocess.run(
            [debootstrap, *BASE_RECIPE[1:], root],
            check=True,
            capture_output=True,
            timeout=DEBOOTSTRAP_TIMEOUT_S,
        )
        tar = subprocess.Popen(["tar", "-C", root, "-c", "."], stdout=subprocess.PIPE)
        subprocess.run(
            ["docker", "import", "-", tag], stdin=tar.stdout, check=True, timeout=600
        )
        tar.wait(timeout=60)
    return tag


def _job_recipe(base: str) -> str:
    """What the job image is made of: sources, distributions, base."""
    digest = hashlib.sha256(base.encode())
    for name in sorted(image_build.closure(["tfyarn"])):
        digest.update(f"{name}=={metadata.version(name)}\n".encode())
    package = Path(image_build.__file__).resolve().parents[1]
    for top in (package, _paths.am_dir(), _paths.conf_dir()):
        for path in sorted(top.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(str(path.relative_to(top)).encode())
                digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


@pytest.fixture(scope="session")
def job_image(base_image: str) -> str:
    """``tfyarn image build`` of this client's environment on the base."""
    tag = f"tfyarn-test/job:{_job_recipe(base_image)}"
    if not image_exists(tag):
        built = image_build.build(tag, base=base_image)
        _remove_other_job_images(tag, built.environment)
    return tag


def _remove_other_job_images(keep: str, environment: str) -> None:
    """Each change of the sources makes a new job image (a small layer on the
    kept environment's) and of the distributions a new 2 GB environment: keep
    only the newest of each (one a running container still uses stays)."""
    stale = []
    for repository, newest in (
        ("tfyarn-test/job", keep),
        (image_build.ENV_REPOSITORY, environment),
    ):
        listed = subprocess.run(
            ["docker", "image", "ls", repository, "--format", "{{.Repository}}:{{.Tag}}"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        stale += [name for name in listed.stdout.split() if name != newest]
    if stale:
        subprocess.run(
            ["docker", "rmi", *stale], capture_output=True, timeout=300, check=False
        )
