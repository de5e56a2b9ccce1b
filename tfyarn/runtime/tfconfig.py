"""What a task's script sees of the cluster: TF_CONFIG, legacy flags, placeholders.

``cluster`` everywhere below is TensorFlow's own layout, ``{"worker": ["h:p", ...],
"ps": [...], "chief": [...]}``, as carried by the master's ClusterSpec. Evaluators
are never part of it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

Cluster = Mapping[str, Sequence[str]]

# The four flags old TF1 tutorials parse (absl / tf.app.flags), in this order.
LEGACY_FLAGS = ("ps_hosts", "worker_hosts", "job_name", "task_index")
PLACEHOLDERS = ("job_name", "task_index", "ps_hosts", "worker_hosts", "chief_host")


def tf_config(cluster: Cluster, role: str, index: int) -> str:
    """``TF_CONFIG`` for one task, in TensorFlow's conventions.

    An evaluator gets the cluster it evaluates but is not listed in it.

    Examples
    --------
    >>> tf_config({"worker": ["a:1", "b:2"]}, "worker", 1)
    '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}'
    """
    jobs = {job: list(addrs) for job, addrs in cluster.items() if addrs}
    return json.dumps({"cluster": jobs, "task": {"type": role, "index": index}})


def _values(cluster: Cluster, role: str, index: int) -> dict[str, str]:
    chief = list(cluster.get("chief", ()))
    return {
        "job_name": role,
        "task_index": str(index),
        "ps_hosts": ",".join(cluster.get("ps", ())),
        "worker_hosts": ",".join(cluster.get("worker", ())),
        "chief_host": chief[0] if chief else "",
    }


def legacy_flags(cluster: Cluster, role: str, index: int) -> list[str]:
    """``--ps_hosts=… --worker_hosts=… --job_name=… --task_index=…``, exactly these."""
    values = _values(cluster, role, index)
    return [f"--{name}={values[name]}" for name in LEGACY_FLAGS]


def expand_placeholders(
    args: Sequence[str], cluster: Cluster, role: str, index: int
) -> list[str]:
    """Replace ``{job_name}``, ``{task_index}``, ``{ps_hosts}``, ``{worker_hosts}``
    and ``{chief_host}`` in each argument.

    Only these five are touched (plain text replacement, not ``str.format``), so
    other braces in arguments, such as JSON, pass through unchanged.
    """
    values = _values(cluster, role, index)
    out = []
    for arg in args:
        for name in PLACEHOLDERS:
            arg = arg.replace("{" + name + "}", values[name])
        out.append(arg)
    return out


def script_args(
    args: Sequence[str], cluster: Cluster, role: str, index: int, *, legacy: bool
) -> list[str]:
    """The script's final argument list: placeholders expanded, legacy flags last."""
    out = expand_placeholders(args, cluster, role, index)
    if legacy:
        out += legacy_flags(cluster, role, index)
    return out
