"""How the master's registry scales: N tasks register at once until all hold the ClusterSpec.

The master's real gRPC service and state machine (am.servicer + am.state, with
YARN faked) run in a subprocess, with mutual TLS on a throwaway skein-style
certificate (CN skein-internal). This process simulates N tasks over a modest
pool of shared TLS channels: each registers, opens WatchCluster and parses the
ClusterSpec it receives, keeping the stream open as a runtime does. Prints one JSON line: seconds and the master's peak
memory per N.

    .venv/bin/python tests/benchmarks/registry_scale.py [--sizes 100 1000 5000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import grpc

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tfyarn._proto import master_pb2 as pb
from tfyarn._proto import master_pb2_grpc
from tfyarn.contract import clusterspec as _clusterspec
from tfyarn.contract.channel import CHANNEL_OPTIONS, credentials_of

CHANNELS = 128


def _credentials(directory: Path) -> tuple[bytes, bytes]:
    import skein

    security = skein.Security.new_credentials()
    cert, key = credentials_of(security)
    (directory / "cert.pem").write_bytes(cert)
    (directory / "key.pem").write_bytes(key)
    return cert, key


# -- the master side (subprocess) ---------------------------------------------------


async def _serve(tasks: int, directory: Path) -> None:
    from am.__main__ import configure_process
    from am.launcher import FakeLauncher
    from am.servicer import create_server
    from am.state import JobState
    from tfyarn.spec import JobSpec

    spec = JobSpec(
        script="train.py",
        tasks={"worker": {"count": tasks}},
        registration_timeout=600,
        heartbeat_timeout=600,
    )
    cert = (directory / "cert.pem").read_bytes()
    key = (directory / "key.pem").read_bytes()
    configure_process()  # the master's own logging (to a file here) and GC settings
    state = JobState(spec, FakeLauncher())
    server, port = create_server(state, cert, key, "127.0.0.1:0")
    await server.start()
    loop_task = asyncio.create_task(state.run())  # the reconcile loop runs as in a job
    print(port, flush=True)
    # Wait for the parent to say it is done, then report peak memory.
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(
        json.dumps(
            {
                "peak_rss_mib": round(usage.ru_maxrss / 1024, 1),
                "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
            }
        ),
        flush=True,
    )
    loop_task.cancel()
    await server.stop(0)


# -- the tasks side ---------------------------------------------------------------------


def _host(index: int) -> str:
    # Cluster-like names: 200 nodes with fully qualified names.
    return f"hdp-worker-{index % 200:04d}.prod.dc1.example.com"


async def _one_task(
    stub: master_pb2_grpc.MasterStub, index: int, tasks: int
) -> grpc.aio.UnaryStreamCall:
    """Register and wait for the ClusterSpec; return the stream, still open.

    A real runtime keeps its stream for the job's life (Stop events come on
    it), so the simulated tasks close theirs only once all have the spec.
    """
    # As tfyarn.runtime does: register inside the WatchCluster call.
    key = pb.TaskKey(role="worker", index=index)
    register = pb.RegisterTaskRequest(
        task=key, attempt=0, host=_host(index), port=20000 + index
    )
    stream = stub.WatchCluster(
        pb.WatchClusterRequest(task=key, attempt=0, register=register), timeout=120
    )
    async for event in stream:
        # Every task parses its spec; one also builds TF_CONFIG's address
        # list from it (as the runtime does, on its own machine) and checks it.
        spec = event.cluster_spec
        assert spec.generation == 1, event
        assert len(spec.jobs["worker"].port) == tasks
        if index == 0:
            expected = [f"{_host(i)}:{20000 + i}" for i in range(tasks)]
            assert _clusterspec.decode(spec) == {"worker": expected}
        return stream
    raise AssertionError(f"worker:{index} got no ClusterSpec")


async def _run_tasks(port: int, tasks: int, cert: bytes, key: bytes) -> float:
    creds = grpc.ssl_channel_credentials(cert, key, cert)
    channels = [
        grpc.aio.secure_channel(
            f"127.0.0.1:{port}",
            creds,
            options=[*CHANNEL_OPTIONS, ("grpc.channel_id", i)],
        )
        for i in range(min(CHANNELS, tasks))
    ]
    for channel in channels:
        await asyncio.wait_for(channel.channel_ready(), 30)
    stubs = [master_pb2_grpc.MasterStub(c) for c in channels]
    started = time.perf_counter()
    streams = await asyncio.gather(
        *(_one_task(stubs[i % len(stubs)], i, tasks) for i in range(tasks))
    )
    elapsed = time.perf_counter() - started
    for stream in streams:
        stream.cancel()
    for channel in channels:
        await channel.close()
    return elapsed


def measure(tasks: int, directory: Path, cert: bytes, key: bytes) -> dict[str, float]:
    # This one process stands in for N task processes: keep the collector
    # from walking all of their objects again and again, which N real
    # processes would not do (the master is configured the same way).
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    log_path = directory / f"master-{tasks}.log"
    with log_path.open("wb") as log_file:
        master = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(tasks), "--dir", str(directory)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log_file,
            text=True,
            env=env,
        )
    assert master.stdin and master.stdout
    try:
        port = int(master.stdout.readline())
        before = resource.getrusage(resource.RUSAGE_SELF)
        seconds = asyncio.run(_run_tasks(port, tasks, cert, key))
        after = resource.getrusage(resource.RUSAGE_SELF)
        master.stdin.write("done\n")
        master.stdin.flush()
        usage = json.loads(master.stdout.readline())
    finally:
        master.kill()
        master.wait()
    return {
        "tasks": tasks,
        "seconds": round(seconds, 3),
        "us_per_task": round(seconds / tasks * 1e6, 1),
        "master_peak_rss_mib": usage["peak_rss_mib"],
        "master_cpu_s": usage["cpu_s"],
        "master_log_lines": len(log_path.read_text().splitlines()),
        "tasks_cpu_s": round(
            after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 2
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000])
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--dir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(_serve(args.serve, args.dir))
        return
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        cert, key = _credentials(directory)
        results = [measure(n, directory, cert, key) for n in args.sizes]
    print(
        json.dumps(
            {
                "benchmark": "registry_scale",
                "tls": True,
                "channels": CHANNELS,
                "results": results,
            }
        )
    )


if __name__ == "__main__":
    main()
