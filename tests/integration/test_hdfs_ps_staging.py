"""ParameterServerStrategy input from HDFS: each worker stages its own shard.

Local processes (no YARN): one ps, two workers, a coordinating chief. Python
generators cannot feed create_per_worker_dataset (TF 2.21 puts the generator on
the coordinator), so this is the path PS jobs use for disjoint shards of HDFS
data: with tfyarn's HDFS plugin each worker lists its files and TensorFlow
reads them from HDFS; without it (the fallback) each worker copies them first.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from _hdfs import ROUTES, choose_route, hdfs_dir

from tfyarn.data.writers import write_tfrecord_shards

pytestmark = [pytest.mark.hdfs, pytest.mark.slow]

JOB = Path(__file__).with_name("_ps_staging_job.py")
# Importing TensorFlow and staging: 5-20 s alone, but CI's lanes keep the two
# cores at a load of about 20 and one run took over 180 s. A server that dies
# is seen at once (proc.poll()), so the bound only ends a hang.
SERVE_WITHIN_S = 600


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    yield from hdfs_dir()


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_serving(address: str, proc: subprocess.Popen[bytes]) -> None:
    host, port = address.rsplit(":", 1)
    deadline = time.monotonic() + SERVE_WITHIN_S
    while True:
        try:
            socket.create_connection((host, int(port)), timeout=2).close()
            return
        except OSError:
            assert proc.poll() is None, f"the server for {address} exited"
            assert time.monotonic() < deadline, f"{address} not serving in time"
            time.sleep(0.5)


@ROUTES
def test_ps_workers_read_disjoint_staged_shards(
    base: str, tmp_path, monkeypatch, plugin: bool
) -> None:
    choose_route(monkeypatch, plugin)  # the processes below inherit it
    # 40 records a file, 80 a worker: as many as all 16 steps of 5 take, since
    # the coordinator gives steps to whichever worker is free (a loaded host
    # gave one worker 11 of them) and the shards are read once, not repeated.
    records = [str(i).encode() for i in range(160)]
    write_tfrecord_shards(base + "/ps", records, shards=4)
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
        # The chief starts once every server serves: this tests the staging,
        # not how the coordinator copes with a worker still copying its shard.
        for address, proc in zip(
            cluster["ps"] + cluster["worker"], servers, strict=True
        ):
            _wait_serving(address, proc)
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
        names = [f"part-{f}-of-00004.tfrecord" for f in files]
        staged = tmp_path / f"worker-{index}" / "tfyarn_data"
        listed = (staged / "train.files").read_text().split("\n")
        assert [f.rsplit("/", 1)[-1] for f in listed] == names
        if plugin:  # read from HDFS: nothing copied
            assert all(f.startswith("hdfs://") for f in listed)
            assert not (staged / "train").exists()
        else:
            assert sorted(os.listdir(staged / "train")) == names
