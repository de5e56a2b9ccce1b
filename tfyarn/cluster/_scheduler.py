"""Queues and node labels of a local cluster: the capacity scheduler's and the
ResourceManager's configuration, and the ``rmadmin`` calls that label hosts.

Queues are leaves under ``root`` with a capacity in percent (summing to 100)
and may grow to the whole cluster when the others are idle. Node labels are
non-exclusive partitions: a labelled host runs the containers that ask for its
label and, when it has room, those that ask for none (the application master,
roles without a label), so a cluster with every host labelled still runs
unlabelled jobs. Every queue may use every label, with its own capacity there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from html import escape

from tfyarn.errors import ClusterError

# YARN's own rules: a queue name has no dots; a label starts with a letter or
# digit and holds letters, digits, '-' and '_' (CommonNodeLabelsManager).
_QUEUE = re.compile(r"^[A-Za-z0-9_-]+$")
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,254}$")
DEFAULT_QUEUES: Mapping[str, float] = {"default": 100.0}
_PREFIX = "yarn.scheduler.capacity.root"


def check_queues(queues: Mapping[str, float]) -> None:
    """Names YARN accepts and capacities that share the cluster (sum 100)."""
    for name, capacity in queues.items():
        if not isinstance(name, str) or not _QUEUE.match(name) or name == "root":
            raise ClusterError(
                f"queue name {name!r} is not one YARN accepts: use letters, digits, "
                "'-' and '_' (no dots; not 'root')"
            )
        if isinstance(capacity, bool) or not isinstance(capacity, (int, float)):
            raise ClusterError(
                f"queue {name}: capacity must be a number, got {capacity!r}"
            )
        if not 0 < capacity <= 100:
            raise ClusterError(
                f"queue {name}: capacity {capacity} must be a percentage in (0, 100]"
            )
    total = sum(queues.values())
    if queues and abs(total - 100) > 1e-6:
        given = ", ".join(f"{n}:{c:g}" for n, c in queues.items())
        raise ClusterError(
            f"queue capacities must add up to 100 (percent of the cluster), got "
            f"{total:g} ({given})"
        )


def check_labels(labels: Mapping[str, str], nodes: int) -> None:
    """Labels name hosts of a multi-host cluster (node1..nodeN) and are valid
    YARN label names."""
    if labels and nodes == 0:
        raise ClusterError(
            "node labels are given to hosts of a multi-host cluster: add --nodes N "
            "and label node1..nodeN (the single node on loopback has no name to label)"
        )
    hosts = [f"node{i}" for i in range(1, nodes + 1)]
    for node, label in labels.items():
        if node not in hosts:
            raise ClusterError(
                f"--label {node}={label}: no host {node!r}; this cluster's hosts are "
                f"{', '.join(hosts)}"
            )
        if not isinstance(label, str) or not _LABEL.match(label):
            raise ClusterError(
                f"--label {node}={label}: {label!r} is not a YARN node label (a "
                "letter or digit, then letters, digits, '-' and '_')"
            )


def label_names(labels: Mapping[str, str]) -> list[str]:
    """The distinct labels, sorted."""
    return sorted(set(labels.values()))


def _prop(name: str, value: object) -> str:
    return (
        f"  <property><name>{escape(name)}</name>"
        f"<value>{escape(str(value))}</value></property>"
    )


def queue_properties(queues: Mapping[str, float], labels: Mapping[str, str]) -> str:
    """capacity-scheduler.xml lines: every queue, its capacities (in the
    default partition and in each label's), all labels accessible to all."""
    queues = queues or DEFAULT_QUEUES
    names = label_names(labels)
    lines = [_prop(f"{_PREFIX}.queues", ",".join(queues))]
    if names:
        lines.append(_prop(f"{_PREFIX}.accessible-node-labels", "*"))
        for label in names:
            lines.append(
                _prop(f"{_PREFIX}.accessible-node-labels.{label}.capacity", 100)
            )
    for queue, capacity in queues.items():
        q = f"{_PREFIX}.{queue}"
        lines += [
            _prop(f"{q}.capacity", f"{capacity:g}"),
            # Elastic: a queue alone on the cluster may use all of it.
            _prop(f"{q}.maximum-capacity", 100),
            # One user may take the whole queue (and beyond its share, up to max).
            _prop(f"{q}.user-limit-factor", f"{100 / capacity:g}"),
            _prop(f"{q}.state", "RUNNING"),
        ]
        if names:
            lines.append(_prop(f"{q}.accessible-node-labels", ",".join(names)))
            for label in names:
                lines += [
                    _prop(
                        f"{q}.accessible-node-labels.{label}.capacity", f"{capacity:g}"
                    ),
                    _prop(f"{q}.accessible-node-labels.{label}.maximum-capacity", 100),
                ]
    return "\n".join(lines)


def label_properties(labels: Mapping[str, str], store_uri: str) -> str:
    """yarn-site.xml lines turning node labels on (centrally configured:
    ``rmadmin`` maps hosts to labels, kept in a store of this cluster's own)."""
    if not labels:
        return "  <!-- no node labels -->"
    return "\n".join(
        [
            _prop("yarn.node-labels.enabled", "true"),
            _prop("yarn.node-labels.configuration-type", "centralized"),
            _prop("yarn.node-labels.fs-store.root-dir", store_uri),
        ]
    )


# The capacity scheduler's preemption monitor (hadoop-yarn's
# ProportionalCapacityPreemptionPolicy), quick enough for a test to see: it
# looks every second, asks for containers back, kills them 3 s later, and may
# take back all a queue's excess at once (production defaults: 3 s, 15 s, 10%).
_MONITOR = "yarn.resourcemanager.monitor.capacity.preemption"
PREEMPTION: Mapping[str, object] = {
    "yarn.resourcemanager.scheduler.monitor.enable": "true",
    "yarn.resourcemanager.scheduler.monitor.policies": (
        "org.apache.hadoop.yarn.server.resourcemanager.monitor.capacity."
        "ProportionalCapacityPreemptionPolicy"
    ),
    f"{_MONITOR}.monitoring_interval": 1000,
    f"{_MONITOR}.max_wait_before_kill": 3000,
    f"{_MONITOR}.total_preemption_per_round": 1.0,
    f"{_MONITOR}.natural_termination_factor": 1.0,
}


def preemption_properties(enabled: bool) -> str:
    """yarn-site.xml lines turning the preemption monitor on (``preemption``).

    With it, a queue below its guaranteed capacity gets containers back from
    queues that borrowed beyond theirs (every queue may grow to the whole
    cluster: ``maximum-capacity`` 100); the ResourceManager reads the monitor's
    switch from yarn-site.xml only, never capacity-scheduler.xml.
    """
    if not enabled:
        return "  <!-- no preemption -->"
    return "\n".join(_prop(name, value) for name, value in PREEMPTION.items())


def rmadmin_commands(
    labels: Mapping[str, str], host_of: Mapping[str, str]
) -> list[list[str]]:
    """``yarn rmadmin`` argument lists that create the labels (non-exclusive)
    and put each on its host (``host_of``: node name -> host name)."""
    if not labels:
        return []
    add = ",".join(f"{label}(exclusive=false)" for label in label_names(labels))
    mapping = " ".join(
        f"{host_of[node]}={label}" for node, label in sorted(labels.items())
    )
    return [
        ["rmadmin", "-addToClusterNodeLabels", add],
        ["rmadmin", "-replaceLabelsOnNode", mapping],
    ]


def parse_queue(text: str) -> tuple[str, float]:
    """``NAME:CAPACITY`` (CAPACITY in percent) from the command line."""
    name, sep, value = text.rpartition(":")
    try:
        capacity = float(value)
    except ValueError:
        capacity = -1.0
    if not sep or not name or capacity <= 0:
        raise ClusterError(
            f"expected NAME:CAPACITY with CAPACITY a percentage (e.g. prod:70), got {text!r}"
        )
    return name, capacity


def parse_label(text: str) -> tuple[str, str]:
    """``NODE=LABEL`` from the command line (``NODE=``: no label)."""
    node, sep, label = text.partition("=")
    if not sep or not node:
        raise ClusterError(f"expected NODE=LABEL (e.g. node1=ps), got {text!r}")
    return node, label
