"""Every way a local cluster start can fail gives one actionable paragraph.

Missing tools and an unreachable Maven Central are simulated with PATH and a
fake ``mvn``; ports with a real listening socket; no JVM is started.
"""

from __future__ import annotations

import os
import shutil
import socket
import struct
import subprocess
import threading
import time
from collections import namedtuple
from pathlib import Path

import pytest

from tfyarn.cli import main
from tfyarn.cluster import LocalCluster, _hadoop, _messages, _prepare, _process, _ready
from tfyarn.cluster._process import DAEMONS_BY_NAME
from tfyarn.cluster._settings import ClusterSettings
from tfyarn.errors import ClusterError


def fake_tool(directory: Path, name: str, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def test_no_java_says_install_or_set_java_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ClusterError) as info:
        _hadoop.find_java_home()
    message = str(info.value)
    assert "no Java found" in message
    assert "JAVA_HOME" in message and "tfyarn cluster start" in message


def test_java_home_without_java_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nojdk"))
    with pytest.raises(ClusterError, match=r"JAVA_HOME=.*nojdk has no bin/java"):
        _hadoop.find_java_home()


def test_java_8_gets_no_add_opens_flags(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_tool(
        tmp_path / "jdk8" / "bin", "java", "echo 'java version \"1.8.0_392\"' >&2\n"
    )
    assert _hadoop.java_major_version(tmp_path / "jdk8") == 8
    assert _hadoop.java_module_flags(tmp_path / "jdk8") == ()
    assert _hadoop.java_module_flags(tmp_path / "jdk8", "3.1.1") == ()


def test_hadoop_3_1_gets_the_jdk_kerberos_internals_on_java_9_and_newer(
    tmp_path: Path,
) -> None:
    fake_tool(
        tmp_path / "jdk17" / "bin", "java", "echo 'openjdk version \"17.0.9\"' >&2\n"
    )
    jdk = tmp_path / "jdk17"
    krb5 = "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED"
    jgss = "--add-exports=java.security.jgss/sun.security.jgss=ALL-UNNAMED"
    for version in ("3.1.1", "3.1.4"):
        flags = _hadoop.java_module_flags(jdk, version)
        assert flags[: len(_hadoop.ADD_OPENS)] == _hadoop.ADD_OPENS
        assert krb5 in flags and jgss in flags, version
    # Later lines read the realm through javax.security.auth.kerberos.
    for version in ("3.4.3", "3.3.6", "3.2.4"):
        assert _hadoop.java_module_flags(jdk, version) == _hadoop.ADD_OPENS


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("TFYARN_CACHE_DIR", str(cache))
    return cache


def test_no_maven_says_install_it(
    fresh_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(ClusterError) as info:
        _hadoop.fetch_hadoop(log=lambda _: None)
    message = str(info.value)
    assert "no `mvn` on PATH" in message
    assert "apt-get install maven" in message


def test_unreachable_maven_central_names_the_log_and_the_cure(
    fresh_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_tool(
        tmp_path / "bin",
        "mvn",
        'echo "[ERROR] Failed to execute goal on project x: Could not transfer '
        "artifact org.apache.hadoop:hadoop-common:pom:3.4.3 from/to central: "
        'Unknown host repo.example"\nexit 1\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    with pytest.raises(ClusterError) as info:
        _hadoop.fetch_hadoop(log=lambda _: None)
    message = str(info.value)
    assert "unreachable" in message
    assert str(_hadoop.install_dir() / "mvn.log") in message
    assert "Could not transfer artifact" in message
    assert not _hadoop.is_fetched()
    # No half-fetched jars are left to be mistaken for a complete download.
    assert not _hadoop.lib_dir().exists()


def test_real_maven_with_a_dead_repository_is_reported_unreachable(
    fresh_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Real Maven, empty local repository, every download sent to a closed port
    # on loopback: what a machine without network sees.
    mvn = shutil.which("mvn")
    if mvn is None:
        pytest.skip("no Maven on this machine")
    settings = tmp_path / "settings.xml"
    settings.write_text(
        "<settings><mirrors><mirror><id>dead</id><mirrorOf>*</mirrorOf>"
        "<url>http://127.0.0.1:1/maven2</url></mirror></mirrors></settings>"
    )
    fake_tool(tmp_path / "bin", "mvn", f'exec {mvn} -s {settings} "$@"\n')
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:{os.environ['PATH']}")
    monkeypatch.setenv("MAVEN_OPTS", f"-Dmaven.repo.local={tmp_path / 'repo'}")
    with pytest.raises(ClusterError) as info:
        _hadoop.fetch_hadoop(log=lambda _: None, timeout=120)
    message = str(info.value)
    assert "unreachable" in message
    assert "mvn.log" in message


def test_other_maven_failure_is_not_blamed_on_the_network(
    fresh_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_tool(
        tmp_path / "bin",
        "mvn",
        'echo "[ERROR] Non-resolvable parent POM"\nexit 1\n',
    )
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    with pytest.raises(ClusterError) as info:
        _hadoop.fetch_hadoop(log=lambda _: None)
    assert "unreachable" not in str(info.value)
    assert "Non-resolvable parent POM" in str(info.value)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_taken_port_names_port_purpose_holder_and_way_out() -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        # The NodeManager's other ports: free ones, whatever else runs here.
        ports = {name: free_port() for name in ("nm", "nm_localizer")}
        ports["nm_web"] = port
        with pytest.raises(ClusterError) as info:
            _process.check_ports_free(DAEMONS_BY_NAME["nodemanager"], ports)
    message = str(info.value)
    assert f"port {port}" in message
    assert "NodeManager web UI" in message
    assert f"pid {os.getpid()}" in message
    assert "--port-offset" in message and "--port nm_web=PORT" in message


def test_a_free_port_is_free() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert not _process.port_in_use(port)


def test_full_disk_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(
        _prepare.shutil, "disk_usage", lambda _: usage(10 << 30, 10 << 30, 100 << 20)
    )
    with pytest.raises(ClusterError) as info:
        LocalCluster(tmp_path).start(ClusterSettings())
    message = str(info.value)
    assert "only 100 MiB free" in message
    assert "--base-dir" in message


def test_namenode_safe_mode_for_low_disk_is_explained(tmp_path: Path) -> None:
    from tfyarn.cluster._probe import HdfsHealth

    cluster = LocalCluster(tmp_path)
    hdfs = HdfsHealth(
        "Resources are low on NN. Please add or free up more resources then turn "
        "off safe mode manually.",
        1,
        0,
        0,
    )
    assert _ready.LOW_RESOURCES in hdfs.safe_mode
    message = _messages.disk_full(cluster.base_dir, cluster.data_dir, hdfs)
    assert "too full" in message
    assert str(_process.log_file(tmp_path, "namenode")) in message
    assert "--base-dir" in message


def test_daemon_death_shows_only_this_starts_errors(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path)
    log = _process.log_file(tmp_path, "resourcemanager")
    log.parent.mkdir(parents=True)
    log.write_text("2026 ERROR old: an error from yesterday's run\n")
    cluster._log_offsets["resourcemanager"] = _process.log_size(log)
    with open(log, "a") as stream:
        stream.write(
            "2026 INFO starting\n2026 ERROR rm: Error starting ResourceManager\n"
        )
    since = cluster._log_offsets["resourcemanager"]
    message = _messages.daemon_died(
        tmp_path, DAEMONS_BY_NAME["resourcemanager"], None, since=since
    )
    assert "ResourceManager exited during start" in message
    assert "Error starting ResourceManager" in message
    assert "yesterday" not in message
    assert str(log) in message


def test_not_ready_in_time_names_what_is_missing_and_the_logs(tmp_path: Path) -> None:
    from tfyarn.cluster._probe import HdfsHealth, NodeReport

    cluster = LocalCluster(tmp_path)
    hdfs = HdfsHealth("Safe mode is ON. Resources are low", 1, 0, 0)
    nodes = [NodeReport("localhost:8041", "UNHEALTHY", 1, 1, 0, 0, 0, "disks bad")]
    message = _messages.not_ready(cluster.base_dir, 30, hdfs, nodes)
    assert "not ready after 30 s" in message
    assert "Safe mode is ON" in message
    assert "UNHEALTHY" in message and "disks bad" in message
    assert str(_process.log_file(tmp_path, "nodemanager")) in message


# -- the command line --------------------------------------------------------


def test_status_of_a_cluster_never_started_exits_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cluster", "status", "--base-dir", str(tmp_path)]) == 1
    assert "stopped" in capsys.readouterr().out


def test_env_before_any_start_is_an_error_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cluster", "env", "--base-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: no local cluster has been set up")


def test_stop_with_nothing_running_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cluster", "stop", "--base-dir", str(tmp_path)]) == 0
    assert "No local cluster was running" in capsys.readouterr().out


def test_bad_port_option_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as info:
        main(["cluster", "start", "--base-dir", str(tmp_path), "--port", "web=1"])
    assert info.value.code == 2


def test_strays_finds_nothing_for_an_unused_base_dir(tmp_path: Path) -> None:
    assert _process.strays(tmp_path) == []
    shutil.rmtree(tmp_path, ignore_errors=True)


def test_base_dir_hadoop_cannot_carry_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="choose another with `--base-dir`"):
        LocalCluster(tmp_path / "my cluster,1").start(ClusterSettings())


def test_strays_finds_a_container_process_and_terminate_ends_it(
    tmp_path: Path,
) -> None:
    # What a NodeManager killed hard leaves behind: a process whose working
    # directory is a container directory under the cluster's nm-local dir.
    container_dir = tmp_path / "data" / "nm-local" / "usercache" / "u" / "c1"
    container_dir.mkdir(parents=True)
    proc = subprocess.Popen(["sleep", "300"], cwd=container_dir)
    try:
        assert _process.strays(tmp_path) == [proc.pid]
        assert _process.terminate([proc.pid], grace=5) == []
        assert proc.poll() is not None
        assert _process.strays(tmp_path) == []
    finally:
        proc.kill()
        proc.wait()


def _held_by_a_connection() -> tuple[int, socket.socket, socket.socket]:
    """A port nothing listens on any more, held by an accepted connection: as a
    killed daemon's port is while its connections close."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = server.accept()
    return port, accepted, client


def _reset(sock: socket.socket) -> None:
    """Close with a reset: the socket is gone at once, nothing lingers."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def test_a_port_held_by_closing_connections_is_waited_for() -> None:
    port, accepted, client = _held_by_a_connection()
    try:
        assert _process.port_in_use(port)
        threading.Timer(1.0, _reset, [accepted]).start()
        began = time.monotonic()
        _process.check_ports_free(
            DAEMONS_BY_NAME["nodemanager"],
            {"nm": port, "nm_localizer": free_port(), "nm_web": free_port()},
            closing_wait=30,
        )
        assert 0.9 < time.monotonic() - began < 10
    finally:
        client.close()


def test_a_port_still_held_after_the_wait_is_named_as_such() -> None:
    port, accepted, client = _held_by_a_connection()
    try:
        with pytest.raises(ClusterError, match=r"connections still closing after 1 s"):
            _process.check_ports_free(
                DAEMONS_BY_NAME["nodemanager"],
                {"nm": port, "nm_localizer": free_port(), "nm_web": free_port()},
                closing_wait=1,
            )
    finally:
        _reset(accepted)
        client.close()
