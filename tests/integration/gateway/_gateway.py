"""The wheel tier's gateway: a user's shell, fresh virtualenvs, pip and build."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
# "tfyarn: cargo not found, installing without the hdfs:// plugin (...)"
NO_CARGO = "tfyarn: cargo not found, installing without the hdfs:// plugin"


@dataclass(frozen=True)
class Dist:
    sdist: Path
    wheel: Path
    seconds: float


@dataclass(frozen=True)
class Venv:
    root: Path
    install_output: str
    install_seconds: float

    @property
    def python(self) -> str:
        return str(self.root / "bin" / "python")

    @property
    def tfyarn(self) -> str:
        return str(self.root / "bin" / "tfyarn")


def log(message: str) -> None:
    print(f"[wheel tier] {message}", file=sys.stderr, flush=True)


def run(argv: list[str], *, env: Mapping[str, str], cwd: Path, timeout: float) -> str:
    done = subprocess.run(
        argv,
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(argv)} failed:\n{output[-5000:]}"
    return output


def pip_cache() -> str:
    return os.environ.get("PIP_CACHE_DIR") or str(Path.home() / ".cache" / "pip")


def user_env(venv: Path, *, home: Path | None = None) -> dict[str, str]:
    """A shell of a user of ``venv`` on the gateway: its ``bin`` first, the
    cluster's ``yarn`` and Java kept, no cargo, not this session's venv, no
    PYTHONPATH into the checkout."""
    env = dict(os.environ)
    ours = Path(sys.executable).parent
    keep = [
        p
        for p in env.get("PATH", "").split(os.pathsep)
        if p and Path(p) != ours and not (Path(p) / "cargo").exists()
    ]
    env["PATH"] = os.pathsep.join([str(venv / "bin"), *keep])
    env["VIRTUAL_ENV"] = str(venv)
    env["PIP_CACHE_DIR"] = pip_cache()
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    for name in ("PYTHONPATH", "CARGO_HOME", "RUSTUP_HOME", "CARGO_TARGET_DIR"):
        env.pop(name, None)
    if home is not None:
        env["HOME"] = str(home)
    # --python_env's packs (about 1.8 GB for this venv) go with the venv, not
    # into the user's cache, where each session's fresh venv would add one.
    env["TFYARN_CACHE_DIR"] = str(venv.parent / "tfyarn-cache")
    assert shutil.which("cargo", path=env["PATH"]) is None
    return env


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def session_site_packages() -> Path:
    """This test session's own venv's site-packages (its dependencies are
    tfyarn's, installed by ``pip install -e '.[dev]'``)."""
    return Path(sysconfig.get_paths(vars={"base": sys.prefix})["purelib"])


def make_venv(
    root: Path, artifact: Path, *, home: Path | None = None, deps_in: Path | None = None
) -> Venv:
    """A new venv with ``artifact`` installed by pip, as a user would.

    ``deps_in``: install ``artifact`` alone (``--no-deps``) and take the
    dependencies from that site-packages directory (a ``.pth`` line, after
    this venv's own, so this venv's tfyarn is the one imported; the ``.pth``
    files in that directory, such as the checkout's editable install, are
    not read). Installing TensorFlow's 1 GB into a new venv took 7 minutes on
    the loaded CI machine; tests/benchmarks/wheel_install.py measures that
    full install. ``--no-compile`` spares pip byte-compiling the artifact.
    """
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=120)
    env = user_env(root, home=home)
    pip = [str(root / "bin" / "python"), "-m", "pip", "install", "-v", "--no-compile"]
    if deps_in is not None:
        pip.append("--no-deps")
        # Python 3.11's venv still bundles setuptools 65, which would shadow
        # the newer one of deps_in (grpcio-tools, a dev tool, needs >= 77).
        run(
            [str(root / "bin" / "python"), "-m", "pip", "uninstall", "-y", "-q", "setuptools"],
            env=env,
            cwd=root.parent,
            timeout=300,
        )  # fmt: skip
    began = time.monotonic()
    output = run([*pip, str(artifact)], env=env, cwd=root.parent, timeout=900)
    took = time.monotonic() - began
    if deps_in is not None:
        (site_packages(root) / "_deps_of_another_venv.pth").write_text(f"{deps_in}\n")
    log(f"pip install {artifact.name} into a new venv: {took:.0f} s")
    return Venv(root, output, took)
