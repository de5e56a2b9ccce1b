"""Queues and node labels: the local cluster's settings and rendered
configuration, the job's labels, and the client's refusals before submission."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import tfyarn
from tfyarn.client import preflight
from tfyarn.client.compile import to_skein
from tfyarn.client.fit import check_fits
from tfyarn.cluster import ClusterSettings
from tfyarn.cluster import _scheduler as scheduler
from tfyarn.cluster._render import write_config
from tfyarn.cluster.cli import add_commands
from tfyarn.contract import hadoop_conf
from tfyarn.errors import ClusterError, SpecError
from tfyarn.spec import JobSpec, Role, TaskGroup


def properties(path: Path) -> dict[str, str]:
    """What Hadoop reads from one rendered configuration file."""
    return dict(hadoop_conf.read_site(path))


def test_default_cluster_has_one_queue_and_no_labels(tmp_path: Path) -> None:
    conf = write_config(ClusterSettings(), base_dir=tmp_path, lib_dir=tmp_path)
    cs = properties(conf / "capacity-scheduler.xml")
    assert cs["yarn.scheduler.capacity.root.queues"] == "default"
    assert cs["yarn.scheduler.capacity.root.default.capacity"] == "100"
    assert not any("node-labels" in k for k in cs)
    assert "yarn.node-labels.enabled" not in properties(conf / "yarn-site.xml")


def test_queues_and_labels_are_rendered(tmp_path: Path) -> None:
    settings = ClusterSettings(
        nodes=3,
        queues={"default": 70, "prod": 30},
        labels={"node1": "ps", "node2": "work"},
    )
    conf = write_config(settings, base_dir=tmp_path, lib_dir=tmp_path)
    cs = properties(conf / "capacity-scheduler.xml")
    root = "yarn.scheduler.capacity.root"
    assert cs[f"{root}.queues"] == "default,prod"
    assert cs[f"{root}.prod.capacity"] == "30"
    assert cs[f"{root}.prod.maximum-capacity"] == "100"
    assert cs[f"{root}.prod.accessible-node-labels"] == "ps,work"
    for label in ("ps", "work"):
        assert cs[f"{root}.accessible-node-labels.{label}.capacity"] == "100"
        # Each label's capacity is split like the cluster's: 70 + 30.
        assert cs[f"{root}.default.accessible-node-labels.{label}.capacity"] == "70"
        assert cs[f"{root}.prod.accessible-node-labels.{label}.capacity"] == "30"
    site = properties(conf / "yarn-site.xml")
    assert site["yarn.node-labels.enabled"] == "true"
    assert site["yarn.node-labels.configuration-type"] == "centralized"
    # The cluster's own store, not Hadoop's /tmp default every cluster shares.
    assert site["yarn.node-labels.fs-store.root-dir"].startswith(tmp_path.as_uri())


def test_blocks_are_replicated_over_the_hosts(tmp_path: Path) -> None:
    def replication(nodes: int) -> str:
        conf = write_config(
            ClusterSettings(nodes=nodes), base_dir=tmp_path, lib_dir=tmp_path
        )
        return properties(conf / "hdfs-site.xml")["dfs.replication"]

    # One host fewer than there are: a pipeline that loses one finds a spare.
    assert [replication(n) for n in (0, 1, 2, 3, 4, 5)] == [
        "1",
        "1",
        "1",
        "2",
        "3",
        "3",
    ]


def test_rmadmin_labels_the_hosts_non_exclusive() -> None:
    commands = scheduler.rmadmin_commands(
        {"node2": "work", "node1": "ps"}, {"node1": "n1.x.test", "node2": "n2.x.test"}
    )
    assert commands == [
        [
            "rmadmin",
            "-addToClusterNodeLabels",
            "ps(exclusive=false),work(exclusive=false)",
        ],
        ["rmadmin", "-replaceLabelsOnNode", "n1.x.test=ps n2.x.test=work"],
    ]
    assert scheduler.rmadmin_commands({}, {}) == []


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        ({"queues": {"a": 50, "b": 40}}, "add up to 100"),
        ({"queues": {"a.b": 100}}, "no dots"),
        ({"queues": {"a": 0, "b": 100}}, r"percentage in \(0, 100\]"),
        ({"labels": {"node1": "ps"}}, "add --nodes N"),
        ({"nodes": 2, "labels": {"node3": "ps"}}, "hosts are node1, node2"),
        ({"nodes": 2, "labels": {"node1": "p s"}}, "not a YARN node label"),
    ],
)
def test_bad_queues_and_labels_are_refused(
    settings: dict[str, Any], words: str
) -> None:
    with pytest.raises(ClusterError, match=words):
        ClusterSettings(**settings)


def test_settings_keep_queues_and_labels() -> None:
    settings = ClusterSettings(
        nodes=2, queues={"a": 60, "b": 40}, labels={"node1": "x"}
    )
    assert ClusterSettings.from_dict(settings.to_dict()) == settings


def _start_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    return parser.parse_args(["cluster", "start", *argv])


def test_cluster_start_options(tmp_path: Path) -> None:
    from tfyarn.cluster.cli import _requested_settings
    from tfyarn.cluster.local import LocalCluster

    cluster = LocalCluster(tmp_path)
    args = _start_args(
        "--nodes", "2", "--queue", "default:70", "--queue", "prod:30",
        "--label", "node1=ps", "--label", "node2=work", "--label", "node2=",
    )  # fmt: skip
    settings = _requested_settings(args, cluster)
    assert settings.queues == {"default": 70.0, "prod": 30.0}
    assert settings.labels == {"node1": "ps"}  # node2= took node2's away
    with pytest.raises(SystemExit):
        _start_args("--queue", "prod")  # no capacity


def _node(host: str, *labels: str) -> Any:
    return SimpleNamespace(id=f"{host}:8041", labels=set(labels))


class _Yarn:
    def __init__(self, usable: set[str]) -> None:
        self.usable = usable

    def get_queue(self, name: str) -> Any:
        return SimpleNamespace(name=name, state="RUNNING", node_labels=self.usable)


NODES = [_node("n1", "ps"), _node("n2", "work"), _node("n3")]


def _job(**options: Any) -> JobSpec:
    tasks = {"ps": TaskGroup(count=1), "worker": TaskGroup(count=2)}
    return JobSpec(script="train.py", tasks=options.pop("tasks", tasks), **options)


def test_each_role_gets_its_label_or_the_jobs() -> None:
    spec = _job(
        node_label="work",
        tasks={
            "chief": TaskGroup(count=1),
            "ps": TaskGroup(count=1, node_label="ps"),
            "worker": TaskGroup(count=2),
        },
    )
    assert spec.node_label_of(Role.PS) == "ps"
    assert spec.node_label_of(Role.WORKER) == "work"
    services = to_skein(spec, am_source="am.zip").services
    assert {r: s.node_label for r, s in services.items()} == {
        "chief": "work",
        "ps": "ps",
        "worker": "work",
    }
    assert JobSpec.from_env(spec.to_env()) == spec
    with pytest.raises(SpecError, match="not a YARN node label"):
        _job(node_label="a||b")


def test_labels_on_running_nodes_pass() -> None:
    spec = _job(tasks={"ps": {"count": 1, "node_label": "ps"}, "worker": {"count": 1}})
    preflight.check_node_labels(_Yarn({"*"}), spec, NODES)
    preflight.check_node_labels(_Yarn({"ps"}), spec, NODES)


def test_a_label_no_node_has_is_refused_naming_those_there() -> None:
    spec = _job(tasks={"ps": {"count": 1}, "worker": {"count": 1, "node_label": "gpu"}})
    with pytest.raises(
        SpecError,
        match=r"--worker_node_label gpu: no running node has the label 'gpu'.*"
        r"ps \(n1\); work \(n2\)",
    ):
        preflight.check_node_labels(_Yarn({"*"}), spec, NODES)
    inherited = _job(node_label="gpu")
    with pytest.raises(SpecError, match="--node_label gpu"):
        preflight.check_node_labels(_Yarn({"*"}), inherited, NODES)
    with pytest.raises(SpecError, match="no running node has a label"):
        preflight.check_node_labels(_Yarn({"*"}), inherited, [_node("n3")])


def test_a_label_the_queue_may_not_use_is_refused() -> None:
    spec = _job(node_label="work")
    with pytest.raises(
        SpecError, match=r"queue 'default' may not use .*its labels: ps"
    ):
        preflight.check_node_labels(_Yarn({"ps"}), spec, NODES)


def test_submit_with_an_unknown_label_submits_nothing(tmp_path: Path) -> None:
    from _fake_yarn import FakeYarn

    script = tmp_path / "train.py"
    script.write_text("")
    fake = FakeYarn()
    with pytest.raises(SpecError, match="--ps_node_label gpu"):
        tfyarn.submit(
            str(script), num_ps=1, num_worker=1, ps_node_label="gpu", client=fake
        )
    assert fake.submitted == []


# -- a task must fit a node it may be placed on ------------------------------------

# n1 (ps) is big, n2 (work) middling, n3 (no label) small.
SIZES = {"n1:8041": (8192, 8, 0), "n2:8041": (4096, 4, 1), "n3:8041": (2048, 2, 0)}
LABELS = {"n1:8041": {"ps"}, "n2:8041": {"work"}, "n3:8041": set()}


def _fits(spec: JobSpec, *, default_label: str = "") -> None:
    check_fits(spec, SIZES, labels=LABELS, default_label=default_label)


def test_a_labelled_role_must_fit_a_node_with_its_label() -> None:
    _fits(_job(tasks={"ps": TaskGroup(count=1, memory_mib=8192, node_label="ps")}))
    # 6 GiB fits n1 (ps) but no node labelled work: refused, naming the label,
    # the largest node with it, and what was asked.
    spec = _job(
        tasks={"worker": TaskGroup(count=1, memory_mib=6144, node_label="work")}
    )
    with pytest.raises(SpecError) as err:
        _fits(spec)
    text = str(err.value)
    assert "worker_memory=6144 MiB is more than any node with the label 'work'" in text
    assert "the largest, n2:8041, has 4096 MiB memory" in text
    assert "use worker_memory=4096 or less, or another worker_node_label=" in text
    # Unlabelled workers may borrow a labelled node (non-exclusive labels).
    _fits(_job(tasks={"worker": TaskGroup(count=1, memory_mib=6144)}))
    # Without label information: every node, as before.
    check_fits(spec, SIZES)


def test_an_inherited_label_names_node_label() -> None:
    spec = _job(node_label="work", tasks={"worker": TaskGroup(count=1, vcores=6)})
    with pytest.raises(SpecError, match=r"worker_vcores=6 .*another node_label="):
        _fits(spec)


def test_the_master_must_fit_a_node_without_a_label() -> None:
    spec = _job(am_memory_mib=4096, tasks={"worker": TaskGroup(count=1)})
    with pytest.raises(SpecError) as err:
        _fits(spec)
    text = str(err.value)
    assert "am_memory=4096 MiB is more than any node without a label offers" in text
    assert "master only there" in text and "n3:8041, has 2048 MiB" in text
    # With a default node label, the queue's requests go to its nodes.
    _fits(spec, default_label="ps")
    with pytest.raises(SpecError, match="node with the label 'work'"):
        _fits(
            _job(am_memory_mib=8192, tasks={"worker": TaskGroup(count=1)}),
            default_label="work",
        )


def test_no_node_without_a_label_means_no_master() -> None:
    labelled = {n: LABELS[n] or {"spare"} for n in SIZES}
    with pytest.raises(SpecError, match="no running node is a node without a label"):
        check_fits(_job(), SIZES, labels=labelled)


def test_preemption_monitor_is_off_by_default_and_quick_when_on(
    tmp_path: Path,
) -> None:
    monitor = "yarn.resourcemanager.scheduler.monitor.enable"
    policy = "yarn.resourcemanager.monitor.capacity.preemption"
    off = write_config(ClusterSettings(), base_dir=tmp_path / "a", lib_dir=tmp_path)
    assert monitor not in properties(off / "yarn-site.xml")
    settings = ClusterSettings(
        nodes=3, queues={"default": 70, "prod": 30}, preemption=True
    )
    on = write_config(settings, base_dir=tmp_path / "b", lib_dir=tmp_path)
    site = properties(on / "yarn-site.xml")
    assert site[monitor] == "true"
    assert site["yarn.resourcemanager.scheduler.monitor.policies"].endswith(
        ".capacity.ProportionalCapacityPreemptionPolicy"
    )
    assert site[f"{policy}.max_wait_before_kill"] == "3000"
    assert site[f"{policy}.monitoring_interval"] == "1000"
    assert site[f"{policy}.total_preemption_per_round"] == "1.0"
    assert site[f"{policy}.natural_termination_factor"] == "1.0"
    # Borrowing is what gets taken back: every queue may grow to the cluster.
    cs = properties(on / "capacity-scheduler.xml")
    assert cs["yarn.scheduler.capacity.root.default.maximum-capacity"] == "100"
    assert ClusterSettings(preemption=True).to_dict()["preemption"] is True
