"""The compact ClusterSpec layout: what goes in comes out, and bad input is named."""

from __future__ import annotations

import pytest

from tfyarn._proto import master_pb2 as pb
from tfyarn.contract import clusterspec as _clusterspec


def test_round_trip_keeps_order_and_repeated_hosts() -> None:
    jobs = {
        "chief": [("n1.example.com", 4000)],
        "ps": [("n2.example.com", 4001), ("n1.example.com", 4002)],
        "worker": [(f"n{i % 3}.example.com", 5000 + i) for i in range(50)],
    }
    spec = _clusterspec.encode(jobs, generation=3, restart=2)
    parsed = pb.ClusterSpec.FromString(spec.SerializeToString())
    assert parsed.generation == 3 and parsed.restart == 2
    assert len(parsed.hosts) == 3  # each host named once
    assert _clusterspec.decode(parsed) == {
        job: [f"{h}:{p}" for h, p in tasks] for job, tasks in jobs.items()
    }


def test_many_tasks_on_long_host_names_stay_small() -> None:
    hosts = [f"hdp-worker-{i:04d}.prod.dc1.example.com" for i in range(200)]
    jobs = {"worker": [(hosts[i % 200], 30000 + i) for i in range(5000)]}
    wire = _clusterspec.encode(jobs, generation=1, restart=0).SerializeToString()
    as_strings = sum(len(f"{h}:{p}") + 3 for h, p in jobs["worker"])
    assert len(wire) < as_strings / 5, (len(wire), as_strings)


def test_malformed_specs_are_named() -> None:
    spec = pb.ClusterSpec(hosts=["a"])
    spec.jobs["worker"].host.extend([0, 1])
    spec.jobs["worker"].port.extend([1, 2])
    with pytest.raises(ValueError, match="host index beyond the 1 hosts"):
        _clusterspec.decode(spec)
    spec.jobs["worker"].port.append(3)
    with pytest.raises(ValueError, match="2 hosts and 3 ports"):
        _clusterspec.decode(spec)
