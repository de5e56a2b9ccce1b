"""`tfyarn cluster start --container_executor`: what is written and checked
before container-executor and the NodeManager ever run (tfyarn.cluster._lce).

Files are made in temporary directories; the binary is a shell script standing
in for container-executor (the real one is exercised by
tests/integration/docker/test_yarn_docker.py when TFYARN_CONTAINER_EXECUTOR
names one).
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from tfyarn.cluster import _lce
from tfyarn.cluster._settings import ClusterSettings
from tfyarn.errors import ClusterError

ROOT = os.geteuid() == 0


def _executor(tmp_path: Path, body: str = "exit 0", mode: int = 0o6050) -> Path:
    path = tmp_path / "hadoop" / "bin" / "container-executor"
    path.parent.mkdir(parents=True)
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(mode)
    return path


def test_the_configuration_is_read_from_etc_hadoop_beside_the_binary(
    tmp_path: Path,
) -> None:
    executor = _executor(tmp_path)
    link = tmp_path / "ce"
    link.symlink_to(executor)
    want = tmp_path / "hadoop" / "etc" / "hadoop" / "container-executor.cfg"
    assert _lce.cfg_path(executor) == want
    assert _lce.cfg_path(link) == want  # resolved, as container-executor does


def test_cfg_allows_the_clusters_dirs_host_network_and_trusted_names() -> None:
    text = _lce.cfg_text(
        "hadoop",
        local_dirs=[Path("/c/data/nm-local")],
        log_dirs=[Path("/c/logs/containers")],
        read_only=[Path("/c/conf")],
        registries=["local", "tfyarn-test"],
    )
    lines = {line.strip() for line in text.splitlines()}
    assert text.startswith(_lce.MARKER)
    assert "yarn.nodemanager.linux-container-executor.group=hadoop" in lines
    assert "min.user.id=1000" in lines  # never root; nobody is 65534
    assert "module.enabled=true" in lines
    assert "docker.allowed.networks=host,bridge,none" in lines
    assert "docker.allowed.rw-mounts=/c/data/nm-local,/c/logs/containers" in lines
    assert (
        "docker.allowed.ro-mounts=/c/conf,/c/data/nm-local,/c/logs/containers" in lines
    )
    assert "docker.trusted.registries=local,tfyarn-test" in lines
    assert "docker.privileged-containers.enabled=false" in lines
    # Every capability YARN asks for by default is allowed, or every Docker
    # launch fails with "Invalid docker capability" (docker error code 62).
    allowed = next(ln for ln in lines if ln.startswith("docker.allowed.capabilities="))
    assert "SYS_CHROOT" in allowed and "NET_BIND_SERVICE" in allowed


def test_yarn_site_asks_for_the_lce_with_docker_as_nobody(tmp_path: Path) -> None:
    props = _lce.yarn_properties(Path("/opt/h/bin/container-executor"), "root")
    assert props["yarn.nodemanager.container-executor.class"] == _lce.LCE
    assert props["yarn.nodemanager.linux-container-executor.path"] == (
        "/opt/h/bin/container-executor"
    )
    assert props["yarn.nodemanager.linux-container-executor.group"] == "root"
    key = "yarn.nodemanager.linux-container-executor.nonsecure-mode"
    assert props[f"{key}.limit-users"] == "true"
    assert props[f"{key}.local-user"] == "nobody"
    assert props["yarn.nodemanager.runtime.linux.allowed-runtimes"] == "default,docker"
    assert props["yarn.nodemanager.runtime.linux.docker.image-update"] == "false"


@pytest.mark.skipif(not ROOT, reason="making files of other owners needs root")
def test_a_good_binary_has_no_problem(tmp_path: Path) -> None:
    executor = _executor(tmp_path)
    os.chown(executor, 0, os.getgid())
    executor.chmod(0o6050)  # chown drops the setuid bit
    assert _lce.binary_problems(executor) == []


@pytest.mark.skipif(not ROOT, reason="making files of other owners needs root")
def test_each_thing_container_executor_refuses_is_one_line(tmp_path: Path) -> None:
    executor = _executor(tmp_path)
    os.chown(executor, 65534, 65534)
    executor.chmod(0o755)
    problems = _lce.binary_problems(executor)
    text = "\n".join(problems)
    assert len(problems) == 4, problems
    assert "must be owned by root" in text
    assert "must be setuid" in text
    assert "must not be writable or executable by others" in text
    assert "belongs to group" in text and "chgrp" in text
    assert all(str(executor) in p for p in problems)


def test_a_missing_binary_is_named(tmp_path: Path) -> None:
    missing = tmp_path / "nope"
    assert _lce.binary_problems(missing) == [
        f"{missing}: no such file (the path of Hadoop's container-executor)"
    ]


def test_a_directory_others_may_write_above_the_cfg_is_refused(
    tmp_path: Path,
) -> None:
    cfg = tmp_path / "etc" / "hadoop" / "container-executor.cfg"
    cfg.parent.mkdir(parents=True)
    (tmp_path / "etc").chmod(0o777)
    problems = _lce.cfg_dir_problems(cfg)
    assert any(p.startswith(f"{tmp_path / 'etc'} ") for p in problems), problems
    assert all("chmod go-w" in p for p in problems)


def test_paths_containers_cannot_read_name_the_blocking_directory() -> None:
    # Under /var/tmp (open to all), not pytest's tmp_path (its root is 0700).
    base = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="tfyarn-lce-test."))
    try:
        base.chmod(0o755)
        closed = base / "closed"
        inner = closed / "lib"
        inner.mkdir(parents=True)
        closed.chmod(0o700)
        problems = _lce.access_problems([inner])
        assert len(problems) == 1 and f"({closed} is mode 700)" in problems[0]
        assert "TFYARN_CACHE_DIR" in problems[0]
        closed.chmod(0o755)
        inner.chmod(0o750)  # enterable, not listable
        assert _lce.hidden_from_others(inner) == inner
        inner.chmod(0o755)
        assert _lce.access_problems([inner]) == []
    finally:
        shutil.rmtree(base)


def test_our_cfg_is_rewritten_atomically_someone_elses_never(tmp_path: Path) -> None:
    cfg = tmp_path / "etc" / "container-executor.cfg"
    text = _lce.MARKER + "\nmin.user.id=1000\n"
    assert _lce.write_cfg(cfg, text) is True
    assert cfg.read_text() == text and stat.S_IMODE(cfg.stat().st_mode) == 0o644
    assert _lce.write_cfg(cfg, text) is False  # already says it
    newer = text + "banned.users=bin\n"
    assert _lce.write_cfg(cfg, newer) is True and cfg.read_text() == newer
    cfg.write_text("min.user.id=500\n")  # a cluster admin's own file
    with pytest.raises(ClusterError, match="was not written by tfyarn"):
        _lce.write_cfg(cfg, text)
    assert cfg.read_text() == "min.user.id=500\n"
    assert [p.name for p in cfg.parent.iterdir()] == ["container-executor.cfg"]


def test_checksetup_refusal_is_shown_in_its_own_words(tmp_path: Path) -> None:
    executor = _executor(
        tmp_path, body='echo "Configuration file must be owned by root" >&2; exit 24'
    )
    executor.chmod(0o755)
    with pytest.raises(ClusterError) as err:
        _lce.checksetup(executor)
    assert "--checksetup refused its setup (exit 24)" in str(err.value)
    assert "Configuration file must be owned by root" in str(err.value)
    ok = _executor(tmp_path / "ok")
    ok.chmod(0o755)
    _lce.checksetup(ok)


def test_a_hanging_checksetup_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = _executor(tmp_path, body="sleep 30")
    executor.chmod(0o755)
    monkeypatch.setattr(_lce, "CHECKSETUP_TIMEOUT_S", 0.5)
    with pytest.raises(ClusterError, match=r"did not answer in [01] s"):
        _lce.checksetup(executor)


def test_prepare_needs_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(ClusterError, match="--container-executor needs root"):
        _lce.prepare(
            _executor(tmp_path),
            local_dirs=[],
            log_dirs=[],
            read_only=[],
            registries=[],
        )


def test_only_a_plain_single_node_cluster_takes_it() -> None:
    ClusterSettings(container_executor="/opt/h/bin/container-executor")
    for other in ({"nodes": 2}, {"secure": True}):
        with pytest.raises(ClusterError, match="--container_executor runs on"):
            ClusterSettings(container_executor="/opt/ce", **other)  # type: ignore[arg-type]
