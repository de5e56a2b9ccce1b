"""The ClusterSpec on the wire: addresses in, addresses out.

The master sends every task the whole cluster, so its size is paid once per
task. ``ClusterSpec`` therefore names each host once and lists tasks as
(host index, port) pairs, which protobuf packs into a few bytes each (see
proto/tfyarn/_proto/master.proto). These two functions are the only code that
knows that layout.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tfyarn._proto import master_pb2 as pb


def encode(
    jobs: Mapping[str, Sequence[tuple[str, int]]], *, generation: int, restart: int
) -> pb.ClusterSpec:
    """Build the ClusterSpec for ``{job: [(host, port), ...]}`` (by task index).

    Examples
    --------
    >>> spec = encode({"ps": [("a", 1)], "worker": [("b", 2), ("a", 3)]},
    ...               generation=1, restart=0)
    >>> list(spec.hosts), list(spec.jobs["worker"].host)
    (['a', 'b'], [1, 0])
    """
    hosts: dict[str, int] = {}
    spec = pb.ClusterSpec(generation=generation, restart=restart)
    for job, tasks in jobs.items():
        entry = spec.jobs[job]
        entry.host.extend(hosts.setdefault(host, len(hosts)) for host, _ in tasks)
        entry.port.extend(port for _, port in tasks)
    spec.hosts.extend(hosts)  # dicts keep insertion order: index i is hosts[i]
    return spec


def decode(spec: pb.ClusterSpec) -> dict[str, list[str]]:
    """``{job: ["host:port", ...]}`` in task-index order: TF_CONFIG's ``cluster``.

    Examples
    --------
    >>> decode(encode({"worker": [("b", 2), ("a", 3)]}, generation=1, restart=0))
    {'worker': ['b:2', 'a:3']}
    """
    hosts = list(spec.hosts)
    cluster: dict[str, list[str]] = {}
    for job, tasks in spec.jobs.items():
        if len(tasks.host) != len(tasks.port):
            raise ValueError(
                f"malformed ClusterSpec: job {job!r} has {len(tasks.host)} hosts "
                f"and {len(tasks.port)} ports"
            )
        try:
            pairs = zip(tasks.host, tasks.port, strict=True)
            cluster[job] = [f"{hosts[h]}:{p}" for h, p in pairs]
        except IndexError:
            raise ValueError(
                f"malformed ClusterSpec: job {job!r} refers to a host index beyond "
                f"the {len(hosts)} hosts it names"
            ) from None
    return cluster
