"""tfyarn as a user on a gateway installs it: from the wheel, or the sdist without Rust.

The artifacts are built once from the checkout and installed into fresh
virtualenvs outside it (conftest.py); every command below runs from those
environments, on a PATH without cargo, against this tier's local cluster.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path

import pytest

from tfyarn.cluster import LocalCluster
from tfyarn.contract.hdfs_plugin import NOT_INSTALLED
from tfyarn.data import resolve

from ._gateway import NO_CARGO, REPO, Dist, Venv, site_packages, user_env

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs]

DATA = "hdfs:///tmp/tfyarn-wheel/digits"
APP_ID = re.compile(r"application_\d+_\d+")
SMALL = ("--num_worker", "1", "--worker_memory", "1 GiB", "--am_memory", "512 MiB")
PLUGIN = "tfyarn/hdfs_plugin/libtfyarn_hdfs.so"
# The one line each task's sitecustomize prints once it registered the plugin.
LOADED = "tfyarn: hdfs:// in TensorFlow through tfyarn's HDFS plugin "


def _user(
    venv: Venv, *argv: str, cwd: Path, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [venv.tfyarn, *argv],
        env=user_env(venv.root),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _logs(venv: Venv, app_id: str, cwd: Path) -> str:
    done = _user(venv, "logs", app_id, "--task", "worker:0", cwd=cwd, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _fresh(url: str) -> None:
    fs = resolve(url)
    if fs.exists(url):
        fs.delete(url, recursive=True)


def _hdfs_names(url: str) -> list[str]:
    return sorted(i.url.rsplit("/", 1)[-1] for i in resolve(url).ls(url))


@pytest.fixture(scope="module")
def digits(wheel_venv: Venv, local_cluster: LocalCluster, tmp_path_factory) -> str:
    done = _user(
        wheel_venv,
        "data", "make-example", DATA, "--shards", "2", "--train", "1024",
        "--test", "256", "--force",
        cwd=tmp_path_factory.mktemp("user"),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return DATA


@dataclass(frozen=True)
class SdistJob:
    venv: Venv
    done: subprocess.CompletedProcess[str]
    ckpt: str
    cwd: Path


@pytest.fixture(scope="module")
def sdist_job(
    sdist_venv_soon: Future[Venv],
    digits: str,
    pool: ThreadPoolExecutor,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Future[SdistJob]]:
    """The sdist's install, then its job, in the background: both wait on
    pip and YARN more than they compute, beside the wheel's job."""
    ckpt = "hdfs:///tmp/tfyarn-wheel/ckpt-sdist"
    _fresh(ckpt)
    cwd = tmp_path_factory.mktemp("sdist-job")
    script = cwd / "helpers_job.py"
    shutil.copy(Path(__file__).with_name("_helpers_job.py"), script)

    def install_and_submit() -> SdistJob:
        venv = sdist_venv_soon.result()
        done = _user(
            venv, "submit", *SMALL, str(script), "--data", digits,
            "--checkpoint_dir", ckpt,
            cwd=cwd,
        )  # fmt: skip
        return SdistJob(venv, done, ckpt, cwd)

    job = pool.submit(install_and_submit)
    yield job
    wait([job])  # not the cluster stopped under it


def test_artifacts_check_out(dist: Dist) -> None:
    """twine's metadata check, auditwheel's tag, and what is (not) inside."""
    twine = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dist.sdist), str(dist.wheel)],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    assert twine.returncode == 0, twine.stdout + twine.stderr
    assert twine.stdout.count("PASSED") == 2, twine.stdout

    # No Python-version tag (the library is not a Python extension), and the
    # platform tag auditwheel agrees with.
    tags = dist.wheel.name.removesuffix(".whl").split("-")[-3:]
    assert tags[:2] == ["py3", "none"], dist.wheel.name
    show = subprocess.run(
        [sys.executable, "-m", "auditwheel", "show", str(dist.wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert show.returncode == 0, show.stdout + show.stderr
    text = " ".join(show.stdout.split())
    print(f"wheel {dist.wheel.name}, {dist.wheel.stat().st_size / 1e6:.1f} MB")
    print(f"auditwheel show: {text}")
    if tags[2].startswith("manylinux_"):
        assert f'is consistent with the following platform tag: "{tags[2]}"' in text
    else:  # the plain tag, when the library needs more than manylinux allows
        assert "manylinux" not in tags[2] and "libtensorflow" not in text

    names = zipfile.ZipFile(dist.wheel).namelist()
    for wanted in (
        PLUGIN,
        "tfyarn/hdfs_plugin/libtfyarn_hdfs.json",
        "tfyarn/_shipped/am/__main__.py",
        "tfyarn/_shipped/conf/tfyarn.yaml",
        "tfyarn/_proto/master_pb2.py",
        "tfyarn/_proto/master_pb2_grpc.py",
        "tfyarn/runtime/_site/sitecustomize.py",
    ):
        assert wanted in names, f"{wanted} missing from the wheel"
    unwanted = re.compile(
        r"(^|/)(tests|target|__pycache__|src|crc)/|\.(rs|pyc|toml|lock)$"
        r"|hatch_build|cargo_sources"
    )
    assert not [n for n in names if unwanted.search(n) and ".dist-info/" not in n]
    assert not [n for n in names if not n.startswith(("tfyarn/", "tfyarn-"))], names

    # The sdist carries the sources the wheel is built from, no build output.
    with tarfile.open(dist.sdist) as sdist:
        members = sdist.getnames()
    root = members[0].split("/")[0]
    for wanted in (
        "tfyarn/hdfs_plugin/Cargo.toml",
        "tfyarn/hdfs_plugin/Cargo.lock",
        "tfyarn/hdfs_plugin/src/lib.rs",
        "am/__main__.py",
        "conf/tfyarn.yaml",
        "proto/tfyarn/_proto/master.proto",
        "CHANGELOG.md",
    ):
        assert f"{root}/{wanted}" in members, f"{wanted} missing from the sdist"
    assert not [m for m in members if m.endswith(".so") or "/target/" in m]


def test_wheel_installs_without_cargo_and_reports_versions(
    wheel_venv: Venv, local_cluster: LocalCluster, tmp_path: Path
) -> None:
    site = site_packages(wheel_venv.root)
    assert (site / PLUGIN).is_file()
    assert not (site / "tfyarn" / "hdfs_plugin" / "Cargo.toml").exists()
    env = user_env(wheel_venv.root)
    # The venv's own tfyarn, not the checkout's editable install beside the
    # dependencies it was given.
    mine = subprocess.run(
        [wheel_venv.python, "-c", "import tfyarn; print(tfyarn.__file__)"],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert mine.returncode == 0, mine.stderr
    assert mine.stdout.strip() == str(site / "tfyarn" / "__init__.py"), mine.stdout
    # The wheel's declared dependencies (its METADATA) against what it got.
    check = subprocess.run(
        [wheel_venv.python, "-m", "pip", "check"],
        env=env, cwd=tmp_path, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert check.returncode == 0, check.stdout + check.stderr
    done = _user(wheel_venv, "--version", cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    print(done.stdout)
    assert lines[0].startswith("tfyarn ") and str(site) in lines[0]
    assert lines[1].startswith("TensorFlow 2.")
    assert lines[2] == "skein 0.8.2"
    assert lines[3].startswith("Python 3.") and str(wheel_venv.root) in lines[3]
    assert lines[4].startswith("Hadoop client: Hadoop 3."), lines[4]
    assert lines[5] == f"hdfs:// plugin: present ({site / PLUGIN})"


def _submit_wheel_job(
    venv: Venv, digits: str, tmp_path: Path, ckpt: str, *options: str
) -> str:
    """Plain TensorFlow (the example with no tfyarn import) from ``venv``:
    SUCCEEDED, the checkpoint on HDFS; returns the path of the plugin the
    worker's route line names."""
    script = tmp_path / "plain_tf_hdfs.py"
    shutil.copy(REPO / "examples" / "plain_tf_hdfs.py", script)
    _fresh(ckpt)
    done = _user(
        venv, "submit", *options, *SMALL,
        str(script), "--data", digits, "--checkpoint_dir", ckpt, "--steps", "20",
        "--checkpoint_every", "10",
        cwd=tmp_path,
        timeout=1500,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "final status: SUCCEEDED" in out, out[-4000:]
    app_id = APP_ID.search(out)
    assert app_id, out[-2000:]
    logs = _logs(venv, app_id.group(), tmp_path)
    loaded = [ln for ln in logs.splitlines() if LOADED in ln]
    assert loaded, logs[-4000:]
    assert "accuracy=" in logs and "steps=20" in logs, logs[-3000:]
    names = _hdfs_names(ckpt)
    assert "checkpoint" in names and "ckpt-20.index" in names, names
    return loaded[0].split(LOADED, 1)[1].strip()


@pytest.mark.slow
def test_wheel_job_reads_and_checkpoints_hdfs_through_its_plugin(
    wheel_venv: Venv, digits: str, sdist_job: Future[SdistJob], tmp_path: Path
) -> None:
    """The job from the wheel-installed venv, no ``--python_env``: the tasks
    run that venv's interpreter, and load the plugin the wheel installed.
    (``sdist_job``: started first, so the sdist's install and job overlap
    this one.)"""
    path = _submit_wheel_job(
        wheel_venv, digits, tmp_path, "hdfs:///tmp/tfyarn-wheel/ckpt-wheel"
    )
    assert path == str(site_packages(wheel_venv.root) / PLUGIN), path


@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_wheel_job_ships_its_venv_with_python_env_auto(
    full_wheel_venv: Venv, digits: str, tmp_path: Path
) -> None:
    """The wheel's full install shipped with ``--python_env auto``: every
    task loads the plugin the wheel installed, from the environment shipped."""
    path = _submit_wheel_job(
        full_wheel_venv, digits, tmp_path, "hdfs:///tmp/tfyarn-wheel/ckpt-shipped",
        "--python_env", "auto", "--python_env_compression", "0",
        # The first job of a fresh 1.7 GB environment: each container waits
        # for YARN to download and unpack it (minutes on a loaded machine).
        "--registration_timeout", "1200",
    )  # fmt: skip
    # The shipped environment's copy of the wheel's library, in the container.
    assert path.endswith(f"site-packages/{PLUGIN}"), path
    assert str(full_wheel_venv.root) not in path and str(REPO) not in path, path
    assert "/appcache/" in path or "/filecache/" in path, path


def test_sdist_without_cargo_installs_and_jobs_take_the_fallback(
    sdist_job: Future[SdistJob], tmp_path: Path
) -> None:
    job = sdist_job.result()
    sdist_venv = job.venv
    # Said once at install, in one line (pip shows it with -v).
    assert sdist_venv.install_output.count(NO_CARGO) == 1, sdist_venv.install_output[
        -4000:
    ]
    said = next(ln for ln in sdist_venv.install_output.splitlines() if NO_CARGO in ln)
    assert "pip install tfyarn-*.whl" in said and "copy through local disk" in said
    site = site_packages(sdist_venv.root)
    assert not (site / PLUGIN).exists()
    version = _user(sdist_venv, "--version", cwd=tmp_path, timeout=120)
    assert version.returncode == 0, version.stderr
    assert "hdfs:// plugin: absent: tfyarn's HDFS plugin" in version.stdout
    assert str(site) in version.stdout.splitlines()[0]  # the sdist's tfyarn

    out = job.done.stdout + job.done.stderr
    assert job.done.returncode == 0 and "final status: SUCCEEDED" in out, out[-4000:]
    app_id = APP_ID.search(out)
    assert app_id, out[-2000:]
    logs = _logs(sdist_venv, app_id.group(), tmp_path)
    assert LOADED not in logs
    # The helpers' first hdfs:// use says which route, and how to get the plugin.
    for helper in (
        "each worker copies its files to local disk",
        "checkpoints are saved locally, then copied to HDFS",
    ):
        route = f"{helper}: {NOT_INSTALLED}"
        assert logs.count(route) == 1, logs[-4000:]
    ckpt = job.ckpt
    assert "records=1024" in logs and f"saved={ckpt}/ckpt-1" in logs, logs[-3000:]
    assert "ckpt-1.index" in _hdfs_names(ckpt)
