"""MultiWorkerMirroredStrategy input from HDFS: two local worker processes.

Each worker's dataset_fn gets its InputContext, reads only its files, and the
union over workers is every record once.
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

JOB = Path(__file__).with_name("_mwms_job.py")


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    yield from hdfs_dir()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_mwms_workers_read_disjoint_shards(base: str) -> None:
    # 4 equal shards of 50: each worker gets 100 records = 10 batches of 10.
    write_tfrecord_shards(
        base + "/mwms", [str(i).encode() for i in range(200)], shards=4
    )
    cluster = {"worker": [f"127.0.0.1:{_port()}", f"127.0.0.1:{_port()}"]}
    procs = []
    for index in range(2):
        env = dict(
            os.environ,
            TF_CONFIG=json.dumps(
                {"cluster": cluster, "task": {"type": "worker", "index": index}}
            ),
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(JOB), base + "/mwms/part-*"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=240)
            assert p.returncode == 0, err[-3000:]
            outs.append(out)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    seen = []
    for out in outs:
        line = next(ln for ln in out.splitlines() if ln.startswith("RECORDS "))
        seen.append([int(v) for v in line.split(" ", 1)[1].split(",")])
    assert len(seen[0]) == len(seen[1]) == 100
    assert not set(seen[0]) & set(seen[1])  # no record read twice
    assert sorted(seen[0] + seen[1]) == list(range(200))  # none skipped
