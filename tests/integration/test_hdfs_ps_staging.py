"""ParameterServerStrategy input from HDFS: each worker stages its own shard.

Local processes (no YARN): one ps, two workers, a coordinating chief. Python
generators cannot feed create_per_worker_dataset (TF 2.21 puts the generator on
the coordinator), so this is the path PS jobs use for HDFS data.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from _hdfs import hdfs_dir

from tfyarn.data.writers import write_tfrecord_shards

pytestmark = [pytest.mark.hdfs, pytest.mark.slow]

JOB = Path(__file__).with_name("_ps_staging_job.py")


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    yield from hdfs_dir()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_ps_workers_read_disjoint_staged_shards(base: str, tmp_path) -> None:
    write_tfrecord_shards(base + "/ps", [str(i).encode() for i in range(100)], shards=4)
    cluster = {
        "chief": [f"127.0.0.1:{_port()}"],
        "ps": [f"127.0.0.1:{_port()}"],
        "worker": [f"127.0.0.1:{_port()}", f"127.0.0.1:{_port()}"],
    }
    servers = []
    try:
        for role, index in (("ps", 0), ("worker", 0), ("worker", 1)):
            cwd = tmp_path / f"{role}-{index}"  # each its own "container" dir
            cwd.mkdir()
            env = dict(
                os.environ,
                TF_CONFIG=json.dumps(
                    {"cluster": cluster, "task": {"type": role, "index": index}}
                ),
            )
            servers.append(
                subprocess.Popen(
                    [sys.executable, str(JOB), role, base + "/ps/part-*"],
                    env=env,
                    cwd=cwd,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            )
        env = dict(
            os.environ,
            TF_CONFIG=json.dumps(
                {"cluster": cluster, "task": {"type": "chief", "index": 0}}
            ),
        )
        chief = subprocess.run(
            [sys.executable, str(JOB), "chief", base + "/ps/part-*"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
    finally:
        for p in servers:
            p.kill()
            p.wait(timeout=30)
    assert chief.returncode == 0, chief.stderr[-3000:]
    line = next(ln for ln in chief.stdout.splitlines() if ln.startswith("RESULT"))
    _, n, distinct = line.split()
    # 16 steps x 5 records, every record distinct: no worker read another's files.
    assert (int(n), int(distinct)) == (80, 80)
    for index, files in ((0, ("00000", "00002")), (1, ("00001", "00003"))):
        staged = sorted(
            os.listdir(tmp_path / f"worker-{index}" / "tfyarn_data" / "train")
        )
        assert staged == [f"part-{f}-of-00004.tfrecord" for f in files]
