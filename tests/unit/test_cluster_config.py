"""The local cluster's settings, rendered configuration and command wrappers.

No Hadoop here: a fake ``java`` that prints its arguments stands in for the JVM.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tfyarn.cli import main
from tfyarn.cluster import ClusterSettings, LocalCluster, default_base_dir
from tfyarn.cluster._render import (
    TEMPLATES,
    render_text,
    write_config,
    write_wrappers,
)
from tfyarn.cluster._settings import PORTS, load_settings, save_settings
from tfyarn.cluster._status import instances
from tfyarn.cluster.cli import parse_memory
from tfyarn.contract import hadoop_conf
from tfyarn.errors import ClusterError

FAKE_JAVA = """#!/bin/sh
if [ "$1" = "-version" ]; then
  echo 'openjdk version "17.0.2" 2022-01-18' >&2
  exit 0
fi
for arg in "$@"; do echo "$arg"; done
"""


def properties(path: Path) -> dict[str, str]:
    """What Hadoop reads from one rendered configuration file."""
    return dict(hadoop_conf.read_site(path))


@pytest.fixture
def fake_java_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(FAKE_JAVA)
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(home))
    return home


@pytest.fixture
def lib_dir(tmp_path: Path) -> Path:
    lib = tmp_path / "lib"
    lib.mkdir()
    for name in ("b-2.jar", "a-1.jar"):
        (lib / name).write_bytes(b"")
    return lib


# -- settings --------------------------------------------------------------


def test_defaults_fit_a_twelve_task_job_and_use_hadoop_ports() -> None:
    settings = ClusterSettings()
    assert settings.memory_mb == 16384 and settings.vcores == 16
    assert settings.min_allocation_mb == 128
    assert settings.am_max_attempts >= 4
    ports = settings.resolved_ports()
    assert ports["namenode_rpc"] == 8020 and ports["rm_web"] == 8088
    assert set(ports) == set(PORTS)


def test_port_offset_and_explicit_ports() -> None:
    settings = ClusterSettings(port_offset=100, ports={"rm_web": 18088})
    ports = settings.resolved_ports()
    assert ports["namenode_rpc"] == 8120
    assert ports["rm_web"] == 18088


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"memory_mb": 0}, "memory_mb must be a positive integer"),
        ({"memory_mb": 512}, "at least 1024 MiB"),
        ({"vcores": -1}, "vcores must be a positive integer"),
        ({"gpus": -2}, "gpus must be 0 or more"),
        ({"ports": {"nodemanger": 1}}, "unknown port name(s) nodemanger"),
        ({"ports": {"rm": 8088}}, "are both 8088"),
        ({"port_offset": 60000}, "outside 1-65535"),
        ({"max_am_resource_percent": 0}, "max_am_resource_percent"),
    ],
)
def test_bad_settings_say_what_is_wrong(kwargs: dict, fragment: str) -> None:
    with pytest.raises(ClusterError, match=re.escape(fragment)):
        ClusterSettings(**kwargs)


def test_settings_round_trip_through_the_base_dir(tmp_path: Path) -> None:
    assert load_settings(tmp_path) is None
    settings = ClusterSettings(memory_mb=4096, gpus=2, ports={"rm_web": 18088})
    save_settings(tmp_path, settings)
    assert load_settings(tmp_path) == settings


def test_corrupt_settings_file_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "cluster.json").write_text("{not json")
    with pytest.raises(ClusterError, match=r"cluster\.json"):
        load_settings(tmp_path)


def test_base_dir_follows_tfyarn_cluster_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TFYARN_CLUSTER_HOME", str(tmp_path / "c"))
    assert default_base_dir() == tmp_path / "c"
    assert LocalCluster().base_dir == tmp_path / "c"


@pytest.mark.parametrize(
    ("text", "mib"),
    [("16384", 16384), ("16g", 16384), ("16 GiB", 16384), ("512MiB", 512)],
)
def test_memory_sizes(text: str, mib: int) -> None:
    assert parse_memory(text) == mib


# -- rendered configuration ------------------------------------------------


def test_every_template_renders_to_well_formed_config(
    tmp_path: Path, lib_dir: Path
) -> None:
    conf = write_config(
        ClusterSettings(gpus=3, port_offset=7),
        base_dir=tmp_path,
        lib_dir=lib_dir,
    )
    for name in TEMPLATES:
        text = (conf / name).read_text()
        assert "{{" not in text, name
        if name.endswith(".xml"):
            properties(conf / name)  # raises on malformed XML ("--" in comments...)


def test_rendered_config_carries_what_a_one_node_cluster_needs(
    tmp_path: Path, lib_dir: Path
) -> None:
    settings = ClusterSettings(memory_mb=8192, vcores=6, gpus=3, port_offset=7)
    conf = write_config(settings, base_dir=tmp_path, lib_dir=lib_dir)
    core = properties(conf / "core-site.xml")
    hdfs = properties(conf / "hdfs-site.xml")
    yarn = properties(conf / "yarn-site.xml")
    capacity = properties(conf / "capacity-scheduler.xml")
    node = properties(conf / "node-resources.xml")
    types = properties(conf / "resource-types.xml")

    assert core["fs.defaultFS"] == "hdfs://127.0.0.1:8027"
    assert hdfs["dfs.namenode.rpc-address"] == "127.0.0.1:8027"
    assert hdfs["dfs.namenode.name.dir"] == f"{tmp_path}/data/namenode"
    assert hdfs["dfs.namenode.safemode.extension"] == "0"
    assert hdfs["dfs.namenode.resource.du.reserved"] == "0"
    assert hdfs["dfs.blocksize"] == "16m"
    assert yarn["yarn.resourcemanager.webapp.address"] == "127.0.0.1:8095"
    assert yarn["yarn.nodemanager.resource.memory-mb"] == "8192"
    assert yarn["yarn.nodemanager.resource.cpu-vcores"] == "6"
    assert yarn["yarn.scheduler.maximum-allocation-mb"] == "8192"
    assert yarn["yarn.scheduler.minimum-allocation-mb"] == "128"
    assert int(yarn["yarn.resourcemanager.am.max-attempts"]) >= 4
    assert yarn["yarn.nodemanager.vmem-check-enabled"] == "false"
    assert yarn["yarn.nodemanager.disk-health-checker.enable"] == "false"
    assert (
        yarn[
            "yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage"
        ]
        == "100"
    )
    assert (
        yarn["yarn.nodemanager.disk-health-checker.min-free-space-per-disk-mb"] == "0"
    )
    assert yarn["yarn.log-aggregation-enable"] == "true"
    assert "JDK_JAVA_OPTIONS" in yarn["yarn.nodemanager.env-whitelist"].split(",")
    assert "PATH=$PATH" in yarn["yarn.nodemanager.admin-env"]
    assert yarn["yarn.application.classpath"] == f"{tmp_path}/conf,{lib_dir}/*"
    assert float(capacity["yarn.scheduler.capacity.maximum-am-resource-percent"]) >= 0.5
    assert (
        "DominantResourceCalculator"
        in capacity["yarn.scheduler.capacity.resource-calculator"]
    )
    assert types["yarn.resource-types"] == "yarn.io/gpu"
    assert node["yarn.nodemanager.resource-type.yarn.io/gpu"] == "3"


@pytest.mark.parametrize("ha", [False, True])
def test_every_port_a_daemon_binds_is_in_the_config(tmp_path: Path, ha: bool) -> None:
    settings = ClusterSettings(ha=ha, port_offset=3)
    conf = write_config(settings, base_dir=tmp_path, lib_dir=tmp_path / "lib")
    text = "".join(path.read_text() for path in sorted(conf.iterdir()))
    daemons = {i.daemon.name for i in instances(settings, None)}
    for name, (_, daemon, _) in PORTS.items():
        if daemon in daemons:
            port = settings.resolved_ports()[name]
            assert re.search(rf"[:=]{port}\b|>{port}<", text), f"{name} unset"


def test_unknown_placeholder_is_an_error_not_a_blank() -> None:
    with pytest.raises(ClusterError, match="unknown placeholder"):
        render_text("<value>{{nope}}</value>", {}, source="x.xml")
    assert render_text("${user.name}:{{a}}", {"a": 1}) == "${user.name}:1"


# -- yarn / hdfs / hadoop wrappers ------------------------------------------


def run_wrapper(bin_dir: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HADOOP_CONF_DIR"}
    return subprocess.run(
        [str(bin_dir / argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
        env=env,
    )


@pytest.fixture
def bin_dir(tmp_path: Path, fake_java_home: Path, lib_dir: Path) -> Path:
    return write_wrappers(
        base_dir=tmp_path, java_home=fake_java_home, lib_dir=lib_dir, module_flags=()
    )


def test_classpath_glob_spells_out_every_jar(
    bin_dir: Path, tmp_path: Path, lib_dir: Path
) -> None:
    out = run_wrapper(bin_dir, "yarn", "classpath", "--glob").stdout.strip()
    # The configuration last: skein's driver maps a class-data archive made
    # on another cluster (tfyarn/cluster/_driver_archive.py).
    assert out.split(":") == [
        str(lib_dir / "a-1.jar"),
        str(lib_dir / "b-2.jar"),
        str(tmp_path / "conf"),
    ]
    plain = run_wrapper(bin_dir, "hadoop", "classpath").stdout.strip()
    assert plain == f"{tmp_path / 'conf'}:{lib_dir}/*"


@pytest.mark.parametrize(
    ("argv", "main_class", "args"),
    [
        (
            ("yarn", "application", "-list"),
            "org.apache.hadoop.yarn.client.cli.ApplicationCLI",
            ["application", "-list"],
        ),
        (
            ("yarn", "container", "-list", "x"),
            "org.apache.hadoop.yarn.client.cli.ApplicationCLI",
            ["container", "-list", "x"],
        ),
        (
            ("yarn", "logs", "-applicationId", "application_1_0001"),
            "org.apache.hadoop.yarn.client.cli.LogsCLI",
            ["-applicationId", "application_1_0001"],
        ),
        (
            ("yarn", "node", "-list"),
            "org.apache.hadoop.yarn.client.cli.NodeCLI",
            ["-list"],
        ),
        (
            ("hdfs", "dfs", "-put", "a b", "/x"),
            "org.apache.hadoop.fs.FsShell",
            ["-put", "a b", "/x"],
        ),
        (
            ("hdfs", "dfsadmin", "-report"),
            "org.apache.hadoop.hdfs.tools.DFSAdmin",
            ["-report"],
        ),
        (("hadoop", "fs", "-ls"), "org.apache.hadoop.fs.FsShell", ["-ls"]),
    ],
)
def test_wrappers_run_hadoops_own_classes(
    bin_dir: Path,
    lib_dir: Path,
    argv: tuple[str, ...],
    main_class: str,
    args: list[str],
) -> None:
    proc = run_wrapper(bin_dir, *argv)
    assert proc.returncode == 0, proc.stderr
    printed = proc.stdout.splitlines()
    position = printed.index(main_class)
    assert printed[position + 1 :] == args
    # The jars first, the configuration last: a class-data archive never checks it.
    assert printed[printed.index("-cp") + 1] == f"{lib_dir}/*:{bin_dir.parent / 'conf'}"


# A JDK 17 whose java prints its arguments, writes the file it is asked to
# archive its classes to (as a JVM does at exit), echoes its standard input
# when asked, and exits with $FAKE_EXIT.
ARCHIVING_JAVA = """#!/bin/sh
for arg in "$@"; do
  echo "$arg"
  case "$arg" in -XX:ArchiveClassesAtExit=*) echo classes > "${arg#*=}" ;; esac
done
[ "$FAKE_STDIN" = 1 ] && cat
exit "${FAKE_EXIT:-0}"
"""


@pytest.fixture
def archiving_bin(
    tmp_path: Path, lib_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, Path]:
    """Wrappers on a JDK 17, and the directory their archives go to."""
    home = tmp_path / "jdk17"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "java").write_text(ARCHIVING_JAVA)
    (home / "bin" / "java").chmod(0o755)
    (home / "release").write_text('JAVA_VERSION="17.0.15"\n')
    monkeypatch.setenv("JAVA_HOME", str(home.resolve()))
    monkeypatch.setenv("TFYARN_CACHE_DIR", str(tmp_path / "cache"))
    bin_dir = write_wrappers(
        base_dir=tmp_path, java_home=home, lib_dir=lib_dir, module_flags=()
    )
    return bin_dir, tmp_path / "cache" / "cds"


def test_a_commands_first_run_keeps_its_classes_and_later_runs_map_them(
    archiving_bin: tuple[Path, Path],
) -> None:
    bin_dir, cds = archiving_bin
    first = run_wrapper(bin_dir, "yarn", "logs", "-applicationId", "a")
    assert first.returncode == 0, first.stderr
    (archive,) = cds.glob("LogsCLI-*.jsa")
    assert archive.read_text() == "classes\n" and not list(cds.glob("*.tmp"))
    assert any(a.startswith("-XX:ArchiveClassesAtExit=") for a in first.stdout.split())
    second = run_wrapper(bin_dir, "yarn", "logs", "-applicationId", "a")
    printed = second.stdout.splitlines()
    assert f"-XX:SharedArchiveFile={archive}" in printed
    assert "-Xlog:cds=off" in printed
    # The options before the class, Hadoop's arguments after it, unchanged.
    position = printed.index("org.apache.hadoop.yarn.client.cli.LogsCLI")
    assert printed.index(f"-XX:SharedArchiveFile={archive}") < position
    assert printed[position + 1 :] == ["-applicationId", "a"]


def test_a_failed_first_run_keeps_nothing_and_its_exit_and_input_pass_through(
    archiving_bin: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir, cds = archiving_bin
    monkeypatch.setenv("FAKE_EXIT", "3")
    monkeypatch.setenv("FAKE_STDIN", "1")
    done = subprocess.run(
        [str(bin_dir / "hdfs"), "dfs", "-put", "-", "/x"],
        input="from stdin\n",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 3
    assert done.stdout.endswith("from stdin\n")  # the command read its input
    assert not list(cds.glob("*"))  # a run that failed may have written half


def test_wrapper_rejects_an_unknown_command(bin_dir: Path) -> None:
    proc = run_wrapper(bin_dir, "yarn", "frobnicate")
    assert proc.returncode == 1
    assert "unknown command 'frobnicate'" in proc.stderr
    assert "logs" in proc.stderr


def test_shell_exports_put_the_wrappers_on_path_once(
    tmp_path: Path, fake_java_home: Path, bin_dir: Path
) -> None:
    cluster = LocalCluster(tmp_path)
    exports = cluster.shell_exports()
    script = f"{exports}\n{exports}\necho $HADOOP_CONF_DIR\necho $JAVA_HOME\necho $PATH"
    out = subprocess.run(
        ["sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    ).stdout.splitlines()
    assert out[0] == str(tmp_path / "conf")
    assert out[1] == str(fake_java_home)
    assert out[2] == f"{bin_dir}:/usr/bin:/bin"
    assert "--add-opens=java.base/java.lang=ALL-UNNAMED" in exports  # Java 17


def test_env_vars_before_any_start_say_to_start(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match="tfyarn cluster start"):
        LocalCluster(tmp_path).env_vars()


@pytest.mark.parametrize(
    ("down", "said"),
    [
        ({"namenode", "namenode2", "resourcemanager"}, "is not running; start it"),
        ({"namenode2"}, "runs without its namenode2; `tfyarn cluster start` starts"),
        (set(), None),
    ],
)
def test_env_warns_of_a_stopped_or_partly_running_cluster(
    tmp_path: Path,
    bin_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    down: set[str],
    said: str | None,
) -> None:
    pids = {
        k: (None if k in down else 1)
        for k in ("namenode", "namenode2", "resourcemanager")
    }
    monkeypatch.setattr(LocalCluster, "pids", lambda self: pids)
    assert main(["cluster", "env", "--base-dir", str(tmp_path)]) == 0
    out, err = capsys.readouterr()
    assert "export HADOOP_CONF_DIR=" in out
    if said is None:
        assert "Warning" not in err
    else:
        assert said in err, err
