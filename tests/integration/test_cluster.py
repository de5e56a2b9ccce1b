"""The local cluster is a real Hadoop cluster: HDFS, YARN, logs, GPUs, lifecycle.

Tests here use only Hadoop's command lines and plain skein (no tfyarn job
code), so a failure points at the cluster. Lifecycle tests run a second
cluster in a temporary base dir on other ports and never touch the shared one.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import skein
from _stopped import describe, identities, left_running

from tfyarn.cluster import (
    ClusterSettings,
    LocalCluster,
    _daemon_archive,
    _driver_archive,
    _hadoop,
    _probe,
    _process,
    _render,
)
from tfyarn.errors import ClusterError

pytestmark = [pytest.mark.yarn, pytest.mark.hdfs]


def run(*argv: str, timeout: float = 120) -> str:
    """Run a Hadoop command line from PATH; its stdout, or a failure with stderr."""
    proc = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert proc.returncode == 0, (
        f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-3000:]}"
    )
    return proc.stdout


def wait_for_end(client: Any, app_id: str, timeout: float = 180) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = client.application_report(app_id)
        if report.state in ("FINISHED", "FAILED", "KILLED"):
            return report
        time.sleep(1)
    client.kill_application(app_id)
    pytest.fail(f"{app_id} did not end within {timeout} s (killed it)")


def aggregated_logs(app_id: str, needle: str, timeout: float = 90) -> str:
    """``yarn logs -applicationId`` once aggregation has uploaded ``needle``."""
    deadline = time.monotonic() + timeout
    text = ""
    while time.monotonic() < deadline:
        proc = subprocess.run(
            ["yarn", "logs", "-applicationId", app_id],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        text = proc.stdout
        if needle in text:
            return text
        time.sleep(3)
    pytest.fail(
        f"{needle!r} never appeared in `yarn logs -applicationId {app_id}`:\n"
        f"{text[-2000:]}"
    )


# -- HDFS ------------------------------------------------------------------


@pytest.fixture
def hdfs_tmp() -> Iterator[str]:
    path = f"/tmp/tfyarn-cluster-test/{uuid.uuid4().hex[:10]}"
    run("hdfs", "dfs", "-mkdir", "-p", path)
    yield path
    subprocess.run(
        ["hdfs", "dfs", "-rm", "-r", "-f", "-skipTrash", path],
        capture_output=True,
        timeout=120,
        check=False,
    )


def test_file_round_trips_through_hdfs_cli_and_hdfs_native(
    tmp_path: Path, hdfs_tmp: str
) -> None:
    import hdfs_native

    # More than one 16 MiB block, so the DataNode really stores several blocks.
    payload = os.urandom(20 * 2**20 + 123)
    local = tmp_path / "in.bin"
    local.write_bytes(payload)
    run("hdfs", "dfs", "-put", str(local), f"{hdfs_tmp}/a.bin")
    assert f"{hdfs_tmp}/a.bin" in run("hdfs", "dfs", "-ls", hdfs_tmp)

    client = hdfs_native.Client()  # fs.defaultFS from $HADOOP_CONF_DIR
    with client.read(f"{hdfs_tmp}/a.bin") as reader:
        assert reader.read() == payload

    with client.create(f"{hdfs_tmp}/b.txt") as writer:
        writer.write(b"written by hdfs-native\n")
    assert run("hdfs", "dfs", "-cat", f"{hdfs_tmp}/b.txt") == "written by hdfs-native\n"


def test_dfsadmin_reports_one_live_datanode() -> None:
    report = run("hdfs", "dfsadmin", "-report")
    assert "Live datanodes (1)" in report
    assert "Safe mode is ON" not in report


# -- YARN ------------------------------------------------------------------


def test_yarn_node_list_shows_the_node_with_its_resources(
    local_cluster: LocalCluster,
) -> None:
    settings = local_cluster.settings()
    out = run("yarn", "node", "-list", "-showDetails")
    assert "Total Nodes:1" in out
    assert "RUNNING" in out
    expected = f"<memory:{settings.memory_mb}, vCores:{settings.vcores}"
    if settings.gpus:
        expected += f", yarn.io/gpu: {settings.gpus}>"
    assert expected in out, out


def test_status_reports_daemons_node_and_hdfs(local_cluster: LocalCluster) -> None:
    status = local_cluster.status()
    assert status.state == "running"
    assert all(d.pid and Path(f"/proc/{d.pid}").exists() for d in status.daemons)
    settings = local_cluster.settings()
    assert status.nodes and status.nodes[0].state == "RUNNING"
    assert status.nodes[0].memory_mb == settings.memory_mb
    assert status.nodes[0].gpus == settings.gpus
    assert status.hdfs is not None and status.hdfs.ready
    text = status.format()
    for daemon in status.daemons:
        assert str(daemon.pid) in text


def test_yarn_classpath_glob_lists_the_conf_dir_and_real_jars(
    local_cluster: LocalCluster,
) -> None:
    entries = run("yarn", "classpath", "--glob").strip().split(":")
    # The configuration last: one driver archive fits every local cluster.
    assert entries[-1] == str(local_cluster.conf_dir)
    jars = entries[:-1]
    assert len(jars) > 100
    assert all(jar.endswith(".jar") and Path(jar).is_file() for jar in jars)
    assert any("hadoop-yarn-client" in jar for jar in jars)


def test_plain_skein_app_succeeds_and_its_output_is_in_yarn_logs(
    skein_client: Any,
) -> None:
    marker = f"tfyarn-marker-{uuid.uuid4().hex[:8]}"
    script = (
        f"echo {marker}\n"
        "python3 -c \"import sys, tfyarn; print('python=' + sys.executable)\"\n"
    )
    spec = skein.ApplicationSpec(
        name="cluster-test-plain",
        master=skein.Master(resources=skein.Resources(memory="256 MiB", vcores=1)),
        services={
            "echo": skein.Service(
                resources=skein.Resources(memory="256 MiB", vcores=1), script=script
            )
        },
    )
    app_id = skein_client.submit(spec)
    report = wait_for_end(skein_client, app_id)
    assert (report.state, str(report.final_status)) == ("FINISHED", "SUCCEEDED"), (
        report.diagnostics
    )
    logs = aggregated_logs(app_id, marker)
    # Containers run the client's Python (the NodeManager's PATH), tfyarn importable.
    assert f"python={Path(sys.executable).parent}" in logs

    listed = run("yarn", "application", "-list", "-appStates", "FINISHED")
    assert app_id in listed
    assert "SUCCEEDED" in run("yarn", "application", "-status", app_id)


def test_yarn_application_kill_ends_a_running_app(skein_client: Any) -> None:
    spec = skein.ApplicationSpec(
        name="cluster-test-kill",
        master=skein.Master(
            resources=skein.Resources(memory="256 MiB", vcores=1), script="sleep 600"
        ),
    )
    app_id = skein_client.submit(spec)
    deadline = time.monotonic() + 120
    while skein_client.application_report(app_id).state != "RUNNING":
        assert time.monotonic() < deadline, f"{app_id} never reached RUNNING"
        time.sleep(1)
    run("yarn", "application", "-kill", app_id)
    report = wait_for_end(skein_client, app_id, timeout=60)
    assert report.state == "KILLED"


def _gpu_app(gpus: int) -> skein.ApplicationSpec:
    return skein.ApplicationSpec(
        name=f"cluster-test-gpu-{gpus}",
        master=skein.Master(resources=skein.Resources(memory="256 MiB", vcores=1)),
        services={
            "gpu": skein.Service(
                resources=skein.Resources(memory="256 MiB", vcores=1, gpus=gpus),
                script="echo granted-gpus",
            )
        },
    )


@pytest.mark.gpu
def test_gpu_request_within_what_is_advertised_is_granted(
    local_cluster: LocalCluster, skein_client: Any
) -> None:
    gpus = local_cluster.settings().gpus
    if gpus < 1:
        pytest.skip("the running cluster advertises no GPUs (start it with --gpus 2)")
    app_id = skein_client.submit(_gpu_app(gpus))
    report = wait_for_end(skein_client, app_id)
    assert str(report.final_status) == "SUCCEEDED", report.diagnostics
    aggregated_logs(app_id, "granted-gpus")


@pytest.mark.gpu
def test_gpu_request_beyond_what_is_advertised_is_not_granted(
    local_cluster: LocalCluster, skein_client: Any
) -> None:
    gpus = local_cluster.settings().gpus
    app_id = skein_client.submit(_gpu_app(gpus + 1))
    report = wait_for_end(skein_client, app_id)
    assert str(report.final_status) == "FAILED"
    assert "yarn.io/gpu" in report.diagnostics
    assert "maximum allowed allocation" in report.diagnostics
    logs = aggregated_logs(app_id, "application.master.log")
    assert "granted-gpus" not in logs


# -- Lifecycle, on a second cluster ----------------------------------------

# Far from the shared cluster's ports (Hadoop's defaults) and below the
# ephemeral range.
SECOND_OFFSET = 11000


@pytest.fixture
def second_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(tmp_path_factory.mktemp("second-cluster"))
    yield cluster
    cluster.stop(wipe=True)
    assert not _process.strays(cluster.base_dir)


def _own_processes(base_dir: Path) -> list[int]:
    return _process.strays(base_dir)


@contextlib.contextmanager
def skein_client_for(cluster: LocalCluster) -> Iterator[Any]:
    """A skein client whose driver talks to ``cluster``, not the shared one."""
    saved = dict(os.environ)
    os.environ.update(cluster.env_vars())
    try:
        client = skein.Client()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    with client:
        yield client


def test_skein_drivers_map_the_class_data_archive_start_made(
    local_cluster: LocalCluster,
) -> None:
    env = local_cluster.env_vars()
    archive = _driver_archive.archive_path(
        Path(env["JAVA_HOME"]), local_cluster.settings().hadoop_version
    )
    log = local_cluster.base_dir / "logs" / "skein-driver-archive.out"
    deadline = time.monotonic() + 300  # made in the background after start
    while not archive.is_file():
        assert time.monotonic() < deadline, f"no {archive}; {log} says: " + (
            log.read_text() if log.exists() else "(no log)"
        )
        time.sleep(2)
    with skein_client_for(local_cluster) as client:
        assert client.get_applications(states=["RUNNING"]) is not None
        maps = Path(f"/proc/{client._proc.pid}/maps").read_text()
    assert str(archive) in maps, "the driver did not map the archive"


def test_a_hadoop_jvm_keeps_its_classes_at_a_normal_exit_and_the_next_maps_them(
    local_cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemons' archive cycle with the real JDK and Hadoop's jars, on a
    one-shot Hadoop class: the first life writes its classes as it exits, the
    stop keeps them, the next life maps them (and behaves the same)."""
    java_home = _hadoop.find_java_home()
    version = local_cluster.settings().hadoop_version
    classpath = _hadoop.daemon_classpath(tmp_path / "conf", version)
    monkeypatch.setenv("TFYARN_CACHE_DIR", str(tmp_path / "cache"))  # a fresh cache

    def life() -> tuple[list[str], str]:
        options = _daemon_archive.launch_options(
            java_home, version, "VersionInfo", tmp_path, "version"
        )
        java = str(java_home / "bin" / "java")
        main = "org.apache.hadoop.util.VersionInfo"
        out = subprocess.run(
            [java, *options, "-Xlog:class+load=info", "-cp", classpath, main],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
        return options, out

    first, out = life()
    assert first[0].startswith("-XX:ArchiveClassesAtExit="), first
    assert f"Hadoop {version}" in out and "shared objects file (top)" not in out
    assert _daemon_archive.keep(tmp_path, "version")
    second, out = life()
    archive = _daemon_archive.archive_path(java_home, version, "VersionInfo")
    assert second[0] == f"-XX:SharedArchiveFile={archive}"
    assert f"Hadoop {version}" in out
    assert "VersionInfo source: shared objects file (top)" in out, out[-2000:]


def test_a_command_lines_first_run_keeps_its_classes_for_the_next(
    local_cluster: LocalCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The local ``yarn`` command with the real JDK: its first run of a class
    leaves an archive, the next maps it and prints the same."""
    java_home = _hadoop.find_java_home()
    version = local_cluster.settings().hadoop_version
    lib_dir = _hadoop.lib_dir(version)
    monkeypatch.setenv("TFYARN_CACHE_DIR", str(tmp_path / "cache"))  # a fresh cache
    bin_dir = _render.write_wrappers(
        base_dir=tmp_path, java_home=java_home, lib_dir=lib_dir, module_flags=()
    )
    env = {**os.environ, "JAVA_HOME": str(java_home)}
    env["HADOOP_CLIENT_OPTS"] = "-Xlog:class+load=info"  # where each class came from

    def version_run() -> str:
        done = subprocess.run(
            [str(bin_dir / "yarn"), "version"],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
            env=env,
        )
        assert f"Hadoop {version}" in done.stdout
        return done.stdout

    assert "shared objects file (top)" not in version_run()
    (archive,) = (tmp_path / "cache" / "cds").glob("VersionInfo-*.jsa")
    assert "VersionInfo source: shared objects file (top)" in version_run()
    assert archive.is_file()


def test_the_running_daemons_map_their_archive_or_will_write_it(
    local_cluster: LocalCluster,
) -> None:
    java_home = _hadoop.find_java_home()
    version = local_cluster.settings().hadoop_version
    for daemon in local_cluster.status().daemons:
        if daemon.pid is None:
            continue
        main_class = _process.DAEMONS_BY_NAME[daemon.name].main_class
        role = _daemon_archive.role_of(main_class)
        archive = _daemon_archive.archive_path(java_home, version, role)
        maps = Path(f"/proc/{daemon.pid}/maps").read_text()
        assert str(archive) in maps or _daemon_archive.writes_at_exit(daemon.pid), (
            f"the {daemon.name} neither maps {archive} nor will write one"
        )


@pytest.mark.slow
def test_second_cluster_start_is_idempotent_and_stop_leaves_nothing(
    second_cluster: LocalCluster, tmp_path: Path
) -> None:
    settings = ClusterSettings(
        memory_mb=2048, vcores=4, gpus=1, port_offset=SECOND_OFFSET
    )
    first = second_cluster.start(settings, timeout=180)
    assert first.running and not first.already_running
    assert first.nodes and first.nodes[0].memory_mb == 2048
    assert first.nodes[0].vcores == 4 and first.nodes[0].gpus == 1
    pids = {d.name: d.pid for d in first.daemons}

    again = second_cluster.start(timeout=60)
    assert again.already_running
    assert {d.name: d.pid for d in again.daemons} == pids

    # A daemon that died is restarted alone; the others keep their pids.
    os.kill(pids["datanode"], signal.SIGKILL)
    deadline = time.monotonic() + 10
    while not _process.is_gone(pids["datanode"]):
        assert time.monotonic() < deadline, "SIGKILLed DataNode still there"
        time.sleep(0.1)
    assert second_cluster.status().state == "partial"
    repaired = second_cluster.start(timeout=120)
    assert repaired.running and not repaired.already_running
    # Back means registered: the NameNode still counted the killed one live.
    dn_web = next(d for d in repaired.daemons if d.name == "datanode").ports
    assert _probe.datanode_registered(dn_web["datanode_http"])
    new_pids = {d.name: d.pid for d in repaired.daemons}
    assert new_pids["datanode"] != pids["datanode"]
    assert {k: v for k, v in new_pids.items() if k != "datanode"} == {
        k: v for k, v in pids.items() if k != "datanode"
    }
    pids = new_pids
    started = identities(
        [p for p in pids.values() if p]
    )  # pids wrap within minutes here

    # Asking a running cluster for other settings is refused, not ignored.
    with pytest.raises(ClusterError, match="other settings"):
        second_cluster.start(settings.replace(memory_mb=4096))

    # A third cluster on the same ports: the port is named, nothing is left over.
    third = LocalCluster(tmp_path / "third")
    with pytest.raises(ClusterError) as info:
        third.start(settings, timeout=60)
    message = str(info.value)
    assert f"port {8020 + SECOND_OFFSET}" in message
    assert "--port-offset" in message
    assert not _own_processes(third.base_dir)

    # A container still running when the cluster stops must not outlive it.
    with skein_client_for(second_cluster) as client:
        app_id = client.submit(
            skein.ApplicationSpec(
                name="cluster-test-stray",
                master=skein.Master(
                    resources=skein.Resources(memory="256 MiB", vcores=1),
                    script="sleep 600",
                ),
            )
        )
        deadline = time.monotonic() + 120
        while client.application_report(app_id).state != "RUNNING":
            assert time.monotonic() < deadline, f"{app_id} never reached RUNNING"
            time.sleep(1)
    daemons = set(pids.values())
    containers = [
        p for p in _own_processes(second_cluster.base_dir) if p not in daemons
    ]
    assert containers, "the running container's processes were not found"

    assert sorted(second_cluster.stop()) == sorted(
        ["NameNode", "DataNode", "ResourceManager", "NodeManager"]
    )
    # Stopped on SIGTERM, a daemon in its first life left its classes behind.
    java_home = _hadoop.find_java_home()
    version = second_cluster.settings().hadoop_version
    for name in ("namenode", "datanode", "resourcemanager", "nodemanager"):
        role = _daemon_archive.role_of(_process.DAEMONS_BY_NAME[name].main_class)
        archive = _daemon_archive.archive_path(java_home, version, role)
        assert archive.is_file(), f"no archive of the {role} after its stop"
    assert not _own_processes(second_cluster.base_dir)
    assert not left_running(started, second_cluster.base_dir), describe(started)
    assert second_cluster.status().state == "stopped"
    assert (second_cluster.data_dir / "namenode").is_dir()  # kept without --wipe

    second_cluster.stop(wipe=True)
    assert not second_cluster.data_dir.exists()


@pytest.mark.slow
def test_a_daemon_dying_during_start_is_named_with_its_log(
    second_cluster: LocalCluster,
) -> None:
    settings = ClusterSettings(memory_mb=2048, vcores=4, port_offset=SECOND_OFFSET)
    # A real failure of a real daemon: a corrupt NameNode storage directory.
    name_dir = second_cluster.data_dir / "namenode" / "current"
    name_dir.mkdir(parents=True)
    (name_dir / "VERSION").write_text("this is not a NameNode VERSION file\n")
    with pytest.raises(ClusterError) as info:
        second_cluster.start(settings, timeout=120)
    message = str(info.value)
    assert "NameNode exited during start" in message
    assert str(_process.log_file(second_cluster.base_dir, "namenode")) in message
    assert "--wipe" in message
    assert not _own_processes(second_cluster.base_dir)


def test_port_taken_error_names_port_and_holder(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        cluster = LocalCluster(tmp_path / "c")
        settings = ClusterSettings(port_offset=SECOND_OFFSET, ports={"rm_web": port})
        with pytest.raises(ClusterError) as info:
            cluster.start(settings, timeout=60)
    message = str(info.value)
    assert f"port {port}" in message and "ResourceManager web UI" in message
    assert f"pid {os.getpid()}" in message
    assert not _own_processes(cluster.base_dir)
    shutil.rmtree(tmp_path / "c", ignore_errors=True)
