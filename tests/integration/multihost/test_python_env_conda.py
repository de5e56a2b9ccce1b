"""``--python_env`` with a real conda environment, packed by conda-pack.

No conda channel is reachable from here (only PyPI, crates.io, npm, Maven and
Debian), so the test makes a channel of its own and a conda environment from
it with the conda ecosystem's own tools from PyPI (dev dependencies):

- two conda packages, built with rattler-build's ``assemble_package``:
  ``python`` (this session's base CPython, its library path made relative with
  patchelf, as conda's own python has it) and ``tfyarn-runtime`` (tfyarn as its
  wheel lays it out, and the distributions the master and the runtime import,
  copied from this session's environment by their RECORDs; no TensorFlow);
- a local channel indexed by rattler, and an environment solved and installed
  from it by rattler (the library pixi is built on): a prefix with
  ``conda-meta/`` records, nothing of the session's venv in it.

Then ``--python_env PREFIX`` has tfyarn pack it with conda-pack, upload it and
run a job from it on hosts that lack the client's environment
(``tests/integration/jobs/env_probe.py`` checks the interpreter and packages
came from the container's directory). Skipped when the base Python is not a
self-contained install (``sys.base_prefix`` is ``/usr``).
"""

from __future__ import annotations

import asyncio
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO, run_cli

from tfyarn.cluster import LocalCluster

from . import _closure

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs]

PROBE = str(REPO / "tests" / "integration" / "jobs" / "env_probe.py")
PY = f"python{sys.version_info.major}.{sys.version_info.minor}"
APP_ID = re.compile(r"Submitted (application_\d+_\d+)")


def _stage_python(base: Path, stage: Path) -> None:
    """The base interpreter, its shared library and standard library."""
    (stage / "bin").mkdir(parents=True)
    shutil.copy2(base / "bin" / PY, stage / "bin" / PY)
    for link in ("python", "python3"):
        (stage / "bin" / link).symlink_to(PY)
    (stage / "lib").mkdir()
    for lib in (base / "lib").glob("libpython*.so*"):
        shutil.copy2(lib, stage / "lib" / lib.name, follow_symlinks=False)
    shutil.copytree(
        base / "lib" / PY,
        stage / "lib" / PY,
        symlinks=True,
        ignore=shutil.ignore_patterns(
            "test", "site-packages", "__pycache__", "idlelib", "tkinter", "turtledemo"
        ),
    )
    (stage / "lib" / PY / "site-packages").mkdir()
    patchelf = Path(sys.executable).parent / "patchelf"
    subprocess.run(
        [str(patchelf), "--set-rpath", "$ORIGIN/../lib", str(stage / "bin" / PY)],
        check=True,
    )


def _stage_runtime(stage: Path) -> None:
    """tfyarn and the installed files of its (small) closure, in site-packages."""
    site = stage / "lib" / PY / "site-packages"
    _closure.tfyarn_sources(site)
    for dist in _closure.distributions():
        for file in dist.files or ():
            if file.parts[0] in ("..", "/") or file.suffix == ".pyc":
                continue  # scripts in bin/, caches
            target = site / file
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(dist.locate_file(file), target)


def _make_environment(work: Path) -> Path:
    import rattler
    import rattler_build
    from rattler import index

    channel = work / "channel"
    (channel / "noarch").mkdir(parents=True)
    staged = {"python": work / "stage-python", "tfyarn-runtime": work / "stage-rt"}
    _stage_python(Path(sys.base_prefix), staged["python"])
    _stage_runtime(staged["tfyarn-runtime"])
    version = {"python": platform.python_version(), "tfyarn-runtime": "0.1"}
    depends = {"python": [], "tfyarn-runtime": [f"python {PY[6:]}.*"]}
    for name, stage in staged.items():
        rattler_build.assemble_package(
            name=name,
            version=version[name],
            target_platform="linux-64",
            build_string="local_0",
            output_dir=str(channel / "linux-64"),
            files_dir=str(stage),
            depends=depends[name],
            compression_level=1,
        )
    prefix = work / "conda-env"

    async def install() -> None:
        await index.index_fs(channel)
        records = await rattler.solve(
            sources=[channel.as_uri()],
            specs=["tfyarn-runtime"],
            platforms=["linux-64", "noarch"],
            virtual_packages=rattler.VirtualPackage.detect(),
        )
        await rattler.install(records, target_prefix=prefix)

    asyncio.run(install())
    return prefix


@pytest.mark.slow
def test_a_conda_environment_runs_the_job(
    local_cluster: LocalCluster, tmp_path: Path
) -> None:
    base = Path(sys.base_prefix)
    if base == Path("/usr") or not list((base / "lib").glob("libpython*.so*")):
        pytest.skip(f"the base Python ({base}) is not a self-contained install")
    began = time.monotonic()
    prefix = _make_environment(tmp_path)
    made = time.monotonic() - began
    records = sorted(p.name for p in (prefix / "conda-meta").glob("*.json"))
    assert [r.split("-")[0] for r in records] == ["python", "tfyarn"], records
    print(f"conda environment made in {made:.1f} s: {records}")

    # Its own Python runs from it: the library by $ORIGIN, the prefix its own.
    own = subprocess.run(
        [str(prefix / "bin" / "python"), "-c", "import sys, tfyarn; print(sys.prefix)"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin"},
    )
    assert own.stdout.strip() == str(prefix), own.stdout + own.stderr

    began = time.monotonic()
    done = run_cli(
        "submit", "--python_env", str(prefix), "--python_env_compression", "0",
        "--no_preimport", "--num_worker", "2", "--worker_memory", "1g",
        "--am_memory", "512m", "--max_am_attempts", "1", PROBE,
        timeout=900,
    )  # fmt: skip
    out = done.stdout + done.stderr
    took = time.monotonic() - began
    assert done.returncode == 0, out[-4000:]
    assert "packing conda" in out, out[-3000:]  # conda-pack, not venv-pack
    app_id = APP_ID.search(out)
    assert app_id, out[-2000:]
    logs = run_cli("logs", app_id.group(1), "--task", "worker:1", timeout=300)
    assert "env_probe OK" in logs.stdout, logs.stdout[-3000:] + logs.stderr[-2000:]
    print(f"first submit (pack, upload, localize, run) to the end: {took:.1f} s")
