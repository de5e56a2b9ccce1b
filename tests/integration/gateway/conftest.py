"""The wheel tier's artifacts and its fresh environments, made once a session.

``dist``: ``python -m build`` of the checkout (the sdist, then the wheel built
from that sdist, as an index's build would). ``wheel_venv``: a new virtualenv
outside the checkout with the wheel installed by pip (``--no-deps``: its
dependencies are this session's, through a ``.pth`` line; ``pip check`` then
checks the wheel's declared dependencies against them), on a PATH without
cargo. ``sdist_venv_soon``: the same for the sdist, made in the background,
with no cargo anywhere (PATH, and a HOME without ``~/.cargo``), so the
install goes on without the plugin.
``full_wheel_venv`` (the ``heavy`` test's alone): the wheel installed with
its dependencies resolved by pip, a venv ``--python_env auto`` can pack whole.
pip's cache is the user's (warm): TensorFlow is not downloaded again.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

import pytest

from ._gateway import (
    REPO,
    Dist,
    Venv,
    log,
    make_venv,
    pip_cache,
    run,
    session_site_packages,
)


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    out = tmp_path_factory.mktemp("dist")
    log("python -m build (sdist, then the wheel from it) ...")
    began = time.monotonic()
    run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(REPO)],
        env={**os.environ, "PIP_CACHE_DIR": pip_cache()},
        cwd=out,
        timeout=900,
    )
    took = time.monotonic() - began
    (sdist,) = out.glob("tfyarn-*.tar.gz")
    (wheel,) = out.glob("tfyarn-*.whl")
    log(f"built {sdist.name} and {wheel.name} in {took:.0f} s")
    return Dist(sdist, wheel, took)


@pytest.fixture(scope="session")
def wheel_venv(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return make_venv(
        tmp_path_factory.mktemp("gateway") / "wheel-venv",
        dist.wheel,
        deps_in=session_site_packages(),
    )


@pytest.fixture(scope="session")
def full_wheel_venv(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    return make_venv(tmp_path_factory.mktemp("gateway-full") / "wheel-venv", dist.wheel)


@pytest.fixture(scope="session")
def pool() -> Iterator[ThreadPoolExecutor]:
    with ThreadPoolExecutor(max_workers=2) as threads:
        yield threads


@pytest.fixture(scope="session")
def sdist_venv_soon(
    dist: Dist, pool: ThreadPoolExecutor, tmp_path_factory: pytest.TempPathFactory
) -> Future[Venv]:
    """The sdist venv, made in the background (pip builds the sdist's wheel
    first: a minute under load, which the wheel's job overlaps)."""
    base = tmp_path_factory.mktemp("gateway-no-rust")
    home = base / "home"  # no ~/.cargo/bin/cargo, which the build hook would find
    home.mkdir()
    return pool.submit(
        make_venv,
        base / "sdist-venv",
        dist.sdist,
        home=home,
        deps_in=session_site_packages(),
    )
