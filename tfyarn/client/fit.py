"""Whether a job's container requests fit the cluster's nodes, before submitting.

YARN accepts a container request larger than every node it may use and then
never grants it; the job would wait for registration until it times out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tfyarn import _surface
from tfyarn.errors import SpecError
from tfyarn.spec import ROLES, JobSpec, Role

# node id -> (memory MiB, vcores, GPUs) of a node's total resources.
Nodes = Mapping[str, tuple[int, int, int]]


def check_fits(
    spec: JobSpec,
    nodes: Nodes,
    *,
    labels: Mapping[str, Iterable[str]] | None = None,
    default_label: str = "",
) -> None:
    """Refuse requests no node could ever grant.

    Which nodes a request may use depends on node labels (``labels``: node
    id -> its labels; None: not known, every node):

    - a role with a node label: the nodes carrying it;
    - the master: the queue's default partition (``default_label``, the
      queue's default node label; "": nodes without a label), never a
      labelled node by non-exclusive sharing;
    - a role without a label: the queue's default label's nodes if it has
      one, else any node (labelled nodes lend idle resources to it when
      their label is non-exclusive, which skein cannot tell).

    Parameters
    ----------
    spec
        The job.
    nodes
        node id -> (memory MiB, vcores, gpus) of each running node's total
        resources (``skein.Client.get_nodes()``).
    labels
        node id -> its node labels; None when not known.
    default_label
        The queue's default node label ("": none).

    Raises
    ------
    SpecError
        Naming the option, what was asked, the nodes considered (their
        label) and the largest of them.
    """
    if not nodes:
        raise SpecError(
            "the cluster has no running NodeManager, so no task could start; "
            "check `yarn node -list` (or `tfyarn cluster status`)"
        )
    asks: list[tuple[str, str, tuple[int, int, int]]] = [
        ("am", "", (spec.am_memory_mib, spec.am_vcores, 0))
    ]
    for role in ROLES:
        if spec.group(role).count:
            asks.append(
                (role.value, spec.node_label_of(role), spec.group(role).resources())
            )
    for who, label, wanted in asks:
        where, pool = _partition(who, label, nodes, labels, default_label)
        if not pool:
            # check_node_labels names a label no running node carries.
            if who == "am":
                raise SpecError(
                    f"no running node is a {where}, the only kind YARN starts "
                    f"the master on (nodes: {_some(nodes)}), so the job could "
                    "never start; add such a node, or submit to a queue whose "
                    "default node label some node has"
                )
            continue
        for i, (unit, name) in enumerate(
            [(" MiB", "memory"), ("", "vcores"), ("", "gpus")]
        ):
            biggest = max(pool, key=lambda n: pool[n][i])
            if wanted[i] <= pool[biggest][i]:
                continue
            option = f"{who}_{name}"
            asked, fits = (
                _surface.option(option, v) for v in (wanted[i], pool[biggest][i])
            )
            largest = (
                f"the largest node has {pool[biggest][i]}{unit} {name} in total"
                if labels is None
                else f"the largest, {biggest}, has {pool[biggest][i]}{unit} "
                f"{name} in total"
            )
            instead = [f"use {fits} or less"]
            if label:
                own = spec.group(Role(who)).node_label
                flag = f"{who}_node_label" if own else "node_label"
                instead.append(f"another {_surface.option(flag)}")
            if i == 2:
                instead.append("add a node with GPUs")
            master = (
                " (YARN starts the master only there)"
                if who == "am" and labels is not None
                else ""
            )
            raise SpecError(
                f"{asked}{unit} is more than any {where} offers{master}: "
                f"{largest}, so YARN could never grant it; {', or '.join(instead)}"
            )


def _partition(
    who: str,
    label: str,
    nodes: Nodes,
    labels: Mapping[str, Iterable[str]] | None,
    default_label: str,
) -> tuple[str, dict[str, tuple[int, int, int]]]:
    """The nodes a request may be granted on (see :func:`check_fits`), and
    how to name them in a message."""
    if labels is None:
        return "node", dict(nodes)
    if who == "am":
        label = default_label
    elif not label and not default_label:
        return "node", dict(nodes)  # the default partition, and lenders
    label = label or default_label
    if label:
        where = f"node with the label {label!r}"
        return where, {n: r for n, r in nodes.items() if label in labels.get(n, ())}
    where = "node without a label"
    return where, {n: r for n, r in nodes.items() if not set(labels.get(n, ()))}


def _some(names: Iterable[str], most: int = 3) -> str:
    shown = sorted(names)
    return ", ".join(shown[:most]) + (
        f" and {len(shown) - most} more" if len(shown) > most else ""
    )
