"""The local cluster's GPUs: the stand-in nvidia-smi and YARN's GPU plugin settings.

The stand-in must print what a real nvidia-smi prints (the H200 fixture in
tests/data/nvidia-h200/), for any number of devices, since YARN's own
discovery parses it.
"""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tfyarn.cluster import ClusterSettings, _gpus
from tfyarn.cluster._daemons import daemon_env, host_env
from tfyarn.cluster._prepare import write_gpu_standins
from tfyarn.cluster._render import write_config
from tfyarn.cluster._status import host_statuses
from tfyarn.contract import hadoop_conf

FIXTURE = Path(__file__).resolve().parents[1] / "data" / "nvidia-h200"
QUERY = (
    "--query-gpu=index,uuid,name,pci.bus_id,memory.total,memory.used,utilization.gpu"
)


def run(executable: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(executable), *args], capture_output=True, text=True, check=False
    )


@pytest.fixture
def fixture_node(tmp_path: Path) -> Path:
    """A stand-in of one device with the fixture's own serial, UUID and clock."""
    executable = _gpus.write_standin(tmp_path, "node0", 1)
    state = _gpus.read_state(tmp_path)
    state["timestamp"] = "Thu Nov 26 03:41:43 2026"
    state["devices"][0].update(
        uuid="GPU-a698443d-ddf1-28e3-cec5-404eb8cc5aa1",
        serial="1653924042666",
        pdi="0x9d08c4481ec61991",
    )
    (_gpus.gpu_dir(tmp_path) / _gpus.STATE).write_text(json.dumps(state))
    return executable


@pytest.mark.parametrize(
    ("args", "fixture"),
    [
        (["-q", "-x"], "nvidia-smi-q.xml"),
        ([], "nvidia-smi.txt"),
        ([QUERY, "--format=csv"], "nvidia-smi-query.csv"),
    ],
)
def test_the_stand_in_prints_exactly_what_the_real_one_printed(
    fixture_node: Path, args: list[str], fixture: str
) -> None:
    done = run(fixture_node, *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (FIXTURE / fixture).read_text()


def test_many_devices_are_distinct_and_parse_like_the_fixture(tmp_path: Path) -> None:
    executable = _gpus.write_standin(tmp_path, "node1", 3, seed="a")
    root = ET.fromstring(run(executable, "-q", "-x").stdout)
    real = ET.fromstring((FIXTURE / "nvidia-smi-q.xml").read_text())
    gpus = root.findall("gpu")
    assert root.findtext("attached_gpus") == "3"
    assert root.findtext("driver_version") == real.findtext("driver_version")
    for field in ("minor_number", "uuid", "pci/pci_bus_id", "serial"):
        values = [g.findtext(field) for g in gpus]
        assert len(set(values)) == 3, (field, values)
    assert [g.get("id") for g in gpus] == [g.findtext("pci/pci_bus_id") for g in gpus]
    # Every device carries every element the real one has, in the same order.
    shape = [e.tag for e in real.find("gpu").iter()]  # type: ignore[union-attr]
    assert all([e.tag for e in g.iter()] == shape for g in gpus)
    text = run(executable).stdout
    assert text.count("NVIDIA H200") == 3
    assert {len(line) for line in text.splitlines()[1:] if line} == {91}


def test_another_node_or_cluster_has_other_uuids(tmp_path: Path) -> None:
    one = _gpus.devices("node1", 2, seed="/a")
    assert one == _gpus.devices("node1", 2, seed="/a")
    others = _gpus.devices("node2", 2, seed="/a") + _gpus.devices("node1", 2, seed="/b")
    assert not {d["uuid"] for d in one} & {d["uuid"] for d in others}


def test_query_formats_and_figures_tests_set(tmp_path: Path) -> None:
    executable = _gpus.write_standin(tmp_path, "local", 2)
    _gpus.set_figures(tmp_path, 1, utilization=87, memory_used=4096)
    out = run(
        executable,
        "--query-gpu=index,memory.used,utilization.gpu",
        "--format=csv,noheader,nounits",
    ).stdout
    assert out == "0, 0, 0\n1, 4096, 87\n"
    with_units = run(executable, "--query-gpu=memory.used", "--format=csv").stdout
    assert with_units == "memory.used [MiB]\n0 MiB\n4096 MiB\n"
    xml = ET.fromstring(run(executable, "-q", "-x").stdout)
    busy = xml.findall("gpu")[1]
    assert busy.findtext("utilization/gpu_util") == "87 %"
    assert busy.findtext("fb_memory_usage/used") == "4096 MiB"
    assert busy.findtext("fb_memory_usage/free") == f"{143156 - 4096} MiB"
    one = run(executable, "-i", "1", "--query-gpu=index", "--format=csv,noheader")
    assert one.stdout == "1\n"
    bad = run(executable, "--query-gpu=index,bogus", "--format=csv")
    assert bad.returncode == 2
    assert 'Field "bogus" is not a valid field to query.' in bad.stdout
    with pytest.raises(ValueError, match="no GPU 5"):
        _gpus.set_figures(tmp_path, 5, utilization=1)


def test_a_failing_nvidia_smi_says_why_on_stderr(tmp_path: Path) -> None:
    executable = _gpus.write_standin(tmp_path, "local", 2)
    assert _gpus.probe(tmp_path) == (2, "")
    _gpus.set_failure(tmp_path)
    for args in (["-q", "-x"], [QUERY, "--format=csv"], []):
        done = run(executable, *args)
        assert done.returncode == 9
        assert done.stdout == ""
        assert "couldn't communicate with the NVIDIA driver" in done.stderr
    found, problem = _gpus.probe(tmp_path)
    assert found is None
    assert "exited 9" in problem and "NVIDIA driver" in problem
    _gpus.set_failure(tmp_path, None)
    assert _gpus.probe(tmp_path) == (2, "")


def test_cluster_status_names_a_node_whose_nvidia_smi_fails(tmp_path: Path) -> None:
    settings = ClusterSettings(gpus=2)
    write_gpu_standins(tmp_path, settings, None)
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "nodemanager.log"
    log.write_text(
        "2026-11-26 10:00:00,000 INFO x: started\n"
        "2026-11-26 10:00:03,000 WARN org.apache.hadoop.yarn.server.nodemanager."
        "NodeResourceMonitorImpl: Get Node GPU Utilization error: Failed to "
        "execute GPU device detection script (nvidia-smi) ! Exception message: "
        "ExitCodeException exitCode=9\n"
    )
    (healthy,) = host_statuses(settings, None, {}, None, base_dir=tmp_path)
    assert healthy.gpu_discovery == "nvidia-smi lists 2 GPU(s)"
    _gpus.set_failure(tmp_path)
    (failing,) = host_statuses(settings, None, {}, None, base_dir=tmp_path)
    assert failing.gpu_discovery.startswith("nvidia-smi FAILS: ")
    assert "Get Node GPU Utilization error" in failing.gpu_discovery
    assert (failing.name, failing.host) == ("local", "127.0.0.1")
    (plain,) = host_statuses(ClusterSettings(), None, {}, None, base_dir=tmp_path)
    assert plain.gpu_discovery == ""


def test_gpus_turn_on_yarns_gpu_plugin_with_the_node_stand_in(tmp_path: Path) -> None:
    settings = ClusterSettings(gpus=2)
    conf = write_config(settings, base_dir=tmp_path, lib_dir=tmp_path / "lib")
    yarn = dict(hadoop_conf.read_site(conf / "yarn-site.xml"))
    prefix = "yarn.nodemanager.resource-plugins"
    assert yarn[prefix] == "yarn.io/gpu"
    assert yarn[f"{prefix}.gpu.allowed-gpu-devices"] == "auto"
    # The stand-in's directory: Hadoop 3.3.6 refuses a path ending in nvidia-smi.
    where = Path(yarn[f"{prefix}.gpu.path-to-discovery-executables"])
    assert where == tmp_path / "gpu"
    # The plugin runs with the DefaultContainerExecutor (no cgroups here).
    assert "yarn.nodemanager.container-executor.class" not in yarn
    # Without GPUs, or with the LinuxContainerExecutor: no plugin.
    for other in (ClusterSettings(), ClusterSettings(gpus=2, container_executor="/x")):
        conf = write_config(other, base_dir=tmp_path / "o", lib_dir=tmp_path / "lib")
        assert prefix not in dict(hadoop_conf.read_site(conf / "yarn-site.xml"))


def test_each_node_gets_its_own_stand_in_on_its_daemons_path(tmp_path: Path) -> None:
    write_gpu_standins(tmp_path, ClusterSettings(gpus=2), None)
    assert run(tmp_path / "gpu" / "nvidia-smi", "-L").stdout.startswith(
        "GPU 0: NVIDIA H200 (UUID: GPU-"
    )
    env = daemon_env(tmp_path, tmp_path / "jdk", ())
    assert str(tmp_path / "gpu") in env["PATH"].split(":")
    host = tmp_path / "nodes" / "node2"
    env = host_env(tmp_path, host / "conf", tmp_path / "jdk", ())
    assert str(host / "gpu") in env["PATH"].split(":")
    write_gpu_standins(tmp_path / "none", ClusterSettings(), None)
    assert not (tmp_path / "none" / "gpu").exists()
