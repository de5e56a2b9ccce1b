"""The local cluster on other Hadoop versions: the table, the per-version fetch,
the settings and the command line, and what differs between Hadoop lines.

No JVM and no Maven run: a fake ``mvn`` records its arguments and lays out the
jars as Maven would.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tfyarn.cli import main
from tfyarn.cluster import LocalCluster, _hadoop, _probe, _status, _versions
from tfyarn.cluster._settings import (
    ClusterSettings,
    describe_settings,
    load_settings,
    save_settings,
)
from tfyarn.cluster.cli import _requested_settings, _status_dict, add_commands
from tfyarn.errors import ClusterError

POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


# -- the table ----------------------------------------------------------------


def test_the_default_is_the_version_the_pom_pins_and_is_known() -> None:
    assert _hadoop.pinned_version() == _versions.DEFAULT_VERSION
    assert _versions.DEFAULT_VERSION in _versions.KNOWN
    assert ClusterSettings().hadoop_version == _versions.DEFAULT_VERSION


def test_every_line_a_production_distribution_ships_is_known() -> None:
    lines = {v.line for v in _versions.KNOWN.values()}
    # CDP 7.1 / HDP 3.1 ship 3.1.1; EMR 7 and Dataproc 2.3 ship 3.3.6.
    assert {"3.1", "3.2", "3.3", "3.4"} <= lines
    assert "3.1.1" in _versions.KNOWN and "3.3.6" in _versions.KNOWN
    for entry in _versions.KNOWN.values():
        assert entry.version.startswith(entry.line + ".")
        assert entry.java_tested, entry.version


def test_an_unknown_version_is_refused_naming_those_that_work() -> None:
    with pytest.raises(ClusterError) as info:
        _versions.lookup("2.10.2")
    message = str(info.value)
    assert "'2.10.2'" in message
    for version in _versions.KNOWN:
        assert version in message


def test_every_profile_the_table_names_is_in_the_pom() -> None:
    root = ET.parse(_hadoop.pom_path()).getroot()
    ids = {p.text for p in root.findall("m:profiles/m:profile/m:id", POM_NS)}
    named = {p for v in _versions.KNOWN.values() for p in v.maven_profiles}
    assert named and named <= ids


def test_hadoop_3_1_gets_javax_activation_and_newer_lines_do_not() -> None:
    # Hadoop 3.1's YARN web apps need javax.activation, gone from Java 11's JDK.
    root = ET.parse(_hadoop.pom_path()).getroot()
    (profile,) = [
        p
        for p in root.findall("m:profiles/m:profile", POM_NS)
        if p.findtext("m:id", namespaces=POM_NS) == _versions.JAVAX_ACTIVATION
    ]
    artifacts = [
        a.text for a in profile.findall(".//m:dependency/m:artifactId", POM_NS)
    ]
    assert artifacts == ["javax.activation-api"]
    for version, entry in _versions.KNOWN.items():
        needs = entry.line == "3.1"
        assert (_versions.JAVAX_ACTIVATION in entry.maven_profiles) is needs, version


def test_maven_is_told_the_version_and_its_profiles(tmp_path: Path) -> None:
    old = _hadoop.maven_command("mvn", "3.1.1", tmp_path)
    assert "-Dhadoop.version=3.1.1" in old
    assert f"-P{_versions.JAVAX_ACTIVATION}" in old
    new = _hadoop.maven_command("mvn", "3.3.6", tmp_path)
    assert "-Dhadoop.version=3.3.6" in new
    assert not [arg for arg in new if arg.startswith("-P")]
    assert f"-DoutputDirectory={tmp_path}" in new


def test_a_jdk_the_version_has_not_run_on_gets_a_note_not_a_refusal() -> None:
    assert _versions.java_note("3.4.3", 17) is None
    note = _versions.java_note("3.1.4", 21)
    assert note is not None
    assert "Hadoop 3.1.4" in note and "Java 21" in note and "17" in note


# -- one cache per version ----------------------------------------------------

FAKE_MVN = """#!{python}
# Records its arguments, then lays out what copy-dependencies would: a jar and
# hadoop-hdfs's tests jar carrying webapps/.
import pathlib, sys, zipfile
args = sys.argv[1:]
pathlib.Path({record!r}).open("a").write(" ".join(args) + "\\n")
out = pathlib.Path(next(a for a in args if a.startswith("-DoutputDirectory="))
                   .split("=", 1)[1])
version = next(a for a in args if a.startswith("-Dhadoop.version=")).split("=", 1)[1]
(out / f"hadoop-common-{{version}}.jar").write_bytes(b"jar")
with zipfile.ZipFile(out / f"hadoop-hdfs-{{version}}-tests.jar", "w") as jar:
    jar.writestr("webapps/hdfs/index.html", version)
    jar.writestr("org/apache/hadoop/Test.class", "x")
"""


@pytest.fixture
def fake_maven(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TFYARN_CACHE_DIR", str(tmp_path / "cache"))
    record = tmp_path / "mvn-calls"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text(FAKE_MVN.format(python=sys.executable, record=str(record)))
    mvn.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    return record


def test_each_version_is_fetched_once_into_its_own_cache(fake_maven: Path) -> None:
    lib_old = _hadoop.fetch_hadoop("3.1.1", log=lambda _: None)
    assert _hadoop.is_fetched("3.1.1")
    assert not _hadoop.is_fetched("3.3.6")
    lib_new = _hadoop.fetch_hadoop("3.3.6", log=lambda _: None)
    assert lib_old != lib_new
    assert lib_old == _hadoop.lib_dir("3.1.1")
    assert (lib_old / "hadoop-common-3.1.1.jar").is_file()
    assert (lib_new / "hadoop-common-3.3.6.jar").is_file()
    # Each version's own web apps, and no test classes on a classpath.
    for version in ("3.1.1", "3.3.6"):
        index = _hadoop.resources_dir(version) / "webapps" / "hdfs" / "index.html"
        assert index.read_text() == version
        assert not list(_hadoop.lib_dir(version).glob("*-tests.jar"))
    assert "3.1.1-" in str(_hadoop.install_dir("3.1.1"))
    # Cached: a second start fetches nothing.
    _hadoop.fetch_hadoop("3.1.1", log=lambda _: None)
    calls = fake_maven.read_text().splitlines()
    assert len(calls) == 2
    assert "-Dhadoop.version=3.1.1" in calls[0]
    assert f"-P{_versions.JAVAX_ACTIVATION}" in calls[0]
    assert "-P" not in calls[1]


def test_the_classpath_is_the_versions_own_jars_first(tmp_path: Path) -> None:
    classpath = _hadoop.daemon_classpath(tmp_path, "3.2.4")
    assert classpath.split(":") == [
        f"{_hadoop.lib_dir('3.2.4')}/*",
        str(_hadoop.resources_dir("3.2.4")),
        str(tmp_path),  # the configuration last: an archive never checks it
    ]
    assert str(_hadoop.lib_dir("3.4.3")) not in classpath


# -- settings and the command line ----------------------------------------------


def test_the_version_is_a_setting_checked_and_saved(tmp_path: Path) -> None:
    with pytest.raises(ClusterError, match=r"pick one of 3\.4\.3"):
        ClusterSettings(hadoop_version="3.0.3")
    settings = ClusterSettings(hadoop_version=" 3.1.1 ")
    assert settings.hadoop_version == "3.1.1"
    save_settings(tmp_path, settings)
    assert load_settings(tmp_path) == settings
    assert "Hadoop 3.1.1" in describe_settings(settings)


def test_settings_saved_before_versions_existed_mean_the_pinned_one(
    tmp_path: Path,
) -> None:
    data = ClusterSettings().to_dict()
    del data["hadoop_version"]
    (tmp_path / "cluster.json").write_text(json.dumps(data))
    loaded = load_settings(tmp_path)
    assert loaded is not None
    assert loaded.hadoop_version == _versions.DEFAULT_VERSION


def test_the_cli_option_reaches_the_settings_and_is_kept(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    cluster = LocalCluster(tmp_path)
    args = parser.parse_args(["cluster", "start", "--hadoop_version", "3.3.6"])
    settings = _requested_settings(args, cluster)
    assert settings.hadoop_version == "3.3.6"
    save_settings(tmp_path, settings)
    # Not given again: the previous start's version is kept.
    args = parser.parse_args(["cluster", "start", "--hadoop-version", "3.3.6"])
    assert _requested_settings(args, cluster).hadoop_version == "3.3.6"
    args = parser.parse_args(["cluster", "start"])
    assert _requested_settings(args, cluster).hadoop_version == "3.3.6"


def test_an_unknown_version_on_the_command_line_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as info:
        main(["cluster", "start", "--base_dir", str(tmp_path), "--hadoop_version", "2"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "Hadoop '2' is not a version" in err and "3.1.1" in err
    assert "Traceback" not in err
    assert not (tmp_path / "cluster.json").exists()


def test_switching_a_formatted_cluster_to_another_version_is_refused(
    tmp_path: Path,
) -> None:
    saved = ClusterSettings(hadoop_version="3.4.3").hadoop_version
    # Nothing formatted yet, the same version, or a new cluster: fine.
    _versions.check_switch(tmp_path, saved, "3.1.1")
    _versions.check_switch(tmp_path, None, "3.1.1")
    version_file = tmp_path / "data" / "namenode" / "current" / "VERSION"
    version_file.parent.mkdir(parents=True)
    version_file.write_text("layoutVersion=-66\n")
    _versions.check_switch(tmp_path, saved, "3.4.3")
    with pytest.raises(ClusterError) as info:
        _versions.check_switch(tmp_path, saved, "3.1.1")
    message = str(info.value)
    assert "HDFS data of Hadoop 3.4.3" in message
    assert "tfyarn cluster stop --wipe" in message and "--base_dir" in message


def test_a_start_asking_another_version_of_formatted_data_stops_before_any_jvm(
    tmp_path: Path,
) -> None:
    save_settings(tmp_path, ClusterSettings(hadoop_version="3.4.3"))
    version_file = tmp_path / "data" / "namenode" / "current" / "VERSION"
    version_file.parent.mkdir(parents=True)
    version_file.write_text("layoutVersion=-66\n")
    with pytest.raises(ClusterError, match=r"HDFS data of Hadoop 3\.4\.3"):
        LocalCluster(tmp_path).start(ClusterSettings(hadoop_version="3.3.6"))
    assert not (tmp_path / "logs").exists()


# -- status: the version and the JDK --------------------------------------------


def fake_jdk(path: Path, version: str) -> Path:
    (path / "bin").mkdir(parents=True)
    java = path / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\"' >&2\n")
    java.chmod(0o755)
    (path / "release").write_text(f'IMPLEMENTOR="Test"\nJAVA_VERSION="{version}"\n')
    return path


def test_the_jdk_version_comes_from_its_release_file(tmp_path: Path) -> None:
    jdk = fake_jdk(tmp_path / "jdk", "11.0.13")
    assert _hadoop.java_release(jdk) == "11.0.13"
    assert _hadoop.java_release(tmp_path / "nothing") == ""


def test_status_names_the_hadoop_version_and_the_jdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jdk = fake_jdk(tmp_path / "jdk", "17.0.15")
    monkeypatch.setenv("JAVA_HOME", str(jdk))
    (tmp_path / "c").mkdir()
    save_settings(tmp_path / "c", ClusterSettings(hadoop_version="3.1.1"))
    status = LocalCluster(tmp_path / "c").status()
    text = status.format()
    assert "Hadoop 3.1.1 on JDK 17.0.15" in text
    # Nothing runs: the JDK named is the one the next start would use.
    assert f"({jdk}, for the next start)" in text
    data = _status_dict(status)
    assert data["hadoop_version"] == "3.1.1"
    assert data["jdk"].startswith("17.0.15")


def test_a_running_daemons_jdk_is_read_from_its_process(tmp_path: Path) -> None:
    # A process whose executable is <jdk>/bin/java, as a daemon's JVM is.
    jdk = tmp_path / "jdk"
    (jdk / "bin").mkdir(parents=True)
    shutil.copy("/bin/sleep", jdk / "bin" / "java")
    (jdk / "release").write_text('JAVA_VERSION="11.0.13"\n')
    proc = subprocess.Popen([str(jdk / "bin" / "java"), "30"])
    try:
        assert _hadoop.process_java_home(proc.pid) == jdk
        described = _status.jdk_description({"namenode": None, "datanode": proc.pid})
        assert described == f"11.0.13 ({jdk})"
    finally:
        proc.kill()
        proc.wait()
    # Not a JVM (this test's Python): no JDK is claimed for it.
    assert _hadoop.process_java_home(os.getpid()) is None


# -- the ResourceManager's node report across versions -----------------------------

NODE_3_4 = {
    "id": "localhost:8041",
    "state": "RUNNING",
    "totalResource": {
        "memory": 16384,
        "vCores": 16,
        "resourceInformations": {
            "resourceInformation": [{"name": "yarn.io/gpu", "value": 2}]
        },
    },
    "usedResource": {"memory": 1024, "vCores": 1},
}
# Hadoop 3.1 and 3.2 (as the 3.2.4 and 3.1.4 ResourceManagers answer): no
# totalResource, only what is used and what is available.
NODE_3_2 = {
    "id": "localhost:8041",
    "state": "RUNNING",
    "usedMemoryMB": 1024,
    "availMemoryMB": 15360,
    "usedResource": {
        "memory": 1024,
        "vCores": 1,
        "resourceInformations": {
            "resourceInformation": [{"name": "yarn.io/gpu", "value": 1}]
        },
    },
    "availableResource": {
        "memory": 15360,
        "vCores": 15,
        "resourceInformations": {
            "resourceInformation": [{"name": "yarn.io/gpu", "value": 1}]
        },
    },
}
# Hadoop 3.0: flat fields only.
NODE_3_0 = {
    "id": "localhost:8041",
    "state": "RUNNING",
    "usedMemoryMB": 1024,
    "availMemoryMB": 15360,
    "usedVirtualCores": 1,
    "availableVirtualCores": 15,
}


@pytest.mark.parametrize(
    "node", [NODE_3_4, NODE_3_2, NODE_3_0], ids=["3.4", "3.2", "3.0"]
)
def test_node_totals_are_read_from_every_lines_report(
    node: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_probe, "get_json", lambda *a, **k: {"nodes": {"node": [node]}})
    (report,) = _probe.yarn_nodes(8088) or []
    assert (report.memory_mb, report.vcores) == (16384, 16)
    assert (report.used_memory_mb, report.used_vcores) == (1024, 1)
    assert report.gpus == (0 if node is NODE_3_0 else 2)
