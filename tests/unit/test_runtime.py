"""The task runtime against a live master (real TLS, fake YARN), driven by env vars."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest
from _am_support import LiveMaster, job, run_tasks, task_env

from tfyarn import runtime
from tfyarn.contract.status import Phase
from tfyarn.errors import SpecError
from tfyarn.runtime import Runtime, TaskContext, Timeouts
from tfyarn.spec import Role


def test_tasks_get_tf_config_legacy_flags_and_ps_is_stopped_after_lead_success(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    spec = job(
        tasks={"ps": 1, "worker": 2},
        args=("--role={job_name}",),
        legacy_flags=True,
        worker_grace=5,
        stop_grace=2,
    )
    master, codes = run_tasks(spec, credentials, tmp_path)
    phase, diagnostics = master.wait_done()
    assert phase is Phase.SUCCEEDED, diagnostics
    assert codes == {"worker:0": 0, "worker:1": 0, "ps:0": 128 + 15}

    seen = json.loads((tmp_path / "worker_1.json").read_text())
    tf_config = json.loads(seen["env"]["TF_CONFIG"])
    cluster = master.state.cluster()
    assert tf_config == {"cluster": cluster, "task": {"type": "worker", "index": 1}}
    assert set(cluster) == {"ps", "worker"} and len(cluster["worker"]) == 2
    assert seen["argv"] == [
        "--role=worker",
        f"--ps_hosts={cluster['ps'][0]}",
        f"--worker_hosts={','.join(cluster['worker'])}",
        "--job_name=worker",
        "--task_index=1",
    ]
    assert seen["env"]["TF_GRPC_REUSE_PORT"] == "1"
    # Every task holds its own port on this one host.
    ports = [a.split(":")[1] for addrs in cluster.values() for a in addrs]
    assert len(set(ports)) == 3
    assert seen["env"]["TFYARN_PORT"] == cluster["worker"][1].split(":")[1]


def test_failing_script_fails_the_job_with_its_stderr(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    spec = job(tasks={"worker": 1})
    master, codes = run_tasks(spec, credentials, tmp_path, EXIT_CODE="3")
    phase, diagnostics = master.wait_done()
    assert codes == {"worker:0": 3}
    assert phase is Phase.FAILED
    assert "worker:0" in diagnostics and "exited with code 3" in diagnostics
    assert "ValueError: the model exploded" in diagnostics


def test_runtime_outside_tfyarn_explains_itself(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SpecError, match="TFYARN_JOB, TFYARN_ROLE"):
        TaskContext.from_env({})
    for name in (
        "TFYARN_JOB",
        "TFYARN_ROLE",
        "TFYARN_TASK_INDEX",
        "TFYARN_MASTER_ADDRESS",
    ):
        monkeypatch.delenv(name, raising=False)
    assert runtime.main() == runtime.EXIT_BAD_ENV
    assert "not started by the tfyarn master" in capsys.readouterr().err


def test_unreachable_master_ends_registration_within_its_timeout(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    spec = job(registration_timeout=1.5)
    env = {
        "TFYARN_JOB": spec.to_env(),
        "TFYARN_ROLE": "worker",
        "TFYARN_TASK_INDEX": "0",
        "TFYARN_MASTER_ADDRESS": "127.0.0.1:1",  # nobody listens
        "NM_HOST": "127.0.0.1",
    }
    started = time.monotonic()
    rt = Runtime(
        TaskContext.from_env(env), credentials=credentials, workdir=tmp_path, env=env
    )
    assert rt.run() == runtime.EXIT_RUNTIME_ERROR
    assert time.monotonic() - started < 10


def test_report_progress_outside_tfyarn_warns_and_does_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tfyarn
    from tfyarn import progress

    monkeypatch.delenv("TFYARN_MASTER_ADDRESS", raising=False)
    monkeypatch.setitem(progress._state, "warned", False)
    with pytest.warns(RuntimeWarning, match="not running in a tfyarn task"):
        tfyarn.report_progress(1, loss=0.5)
    assert sys.modules["tfyarn.progress"]._state["client"] is None


def test_sigterm_reaches_the_script_and_the_end_is_reported(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    """``python -m tfyarn.runtime`` as YARN runs it: credentials in the cwd."""
    import os
    import signal
    import subprocess

    spec = job(tasks={"worker": 1}, stop_grace=5)
    (tmp_path / spec.script_name).write_text(
        "import signal, sys, time\n"
        "def bye(*_):\n"
        "    print('script got SIGTERM, checkpointing', file=sys.stderr, flush=True)\n"
        "    sys.exit(7)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    (tmp_path / ".skein.crt").write_bytes(credentials[0])
    (tmp_path / ".skein.pem").write_bytes(credentials[1])
    master = LiveMaster(spec, credentials).start()
    master.grant_all()
    env = {**os.environ, **task_env(spec, master, "worker", 0)}
    env["PATH"] = os.environ["PATH"]
    task = subprocess.Popen(
        [sys.executable, "-m", "tfyarn.runtime"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert task.stdout is not None
    assert task.stdout.readline().strip() == "ready"
    task.send_signal(signal.SIGTERM)
    _, err = task.communicate(timeout=30)
    assert task.returncode == 7, err
    assert "script got SIGTERM, checkpointing" in err
    # Said before anything else of the stop: YARN's SIGKILL may follow in 250 ms.
    said = err.index("tfyarn.runtime: SIGTERM received, stopping the task\n")
    assert said < err.index("stopping the script: SIGTERM received"), err
    # The runtime got SIGTERM itself (YARN ending its container): the master
    # waits for YARN's word on the container before judging the end ...
    worker = master.call(lambda: master.state.tasks[(Role.WORKER, 0)])
    assert master.call(lambda: any("YARN's word" in h for h in worker.history))
    assert not master._done.is_set()
    # ... which here is an ordinary kill, so the script's exit stands.
    master.call(lambda: master.launcher.end("worker_0", "KILLED", "Container killed"))
    phase, diagnostics = master.wait_done(timeout=10)
    # The lead ended non-zero: the job failed, and says why.
    assert phase is Phase.FAILED
    assert "worker:0" in diagnostics and "exited with code 7" in diagnostics
    assert "checkpointing" in diagnostics


def test_script_dies_with_a_sigkilled_runtime(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    """No orphan keeps the task's port when its runtime is killed alone."""
    import os
    import signal
    import subprocess

    spec = job(tasks={"worker": 1})
    (tmp_path / spec.script_name).write_text(
        "import os, time\nprint(os.getpid(), flush=True)\ntime.sleep(60)\n"
    )
    (tmp_path / ".skein.crt").write_bytes(credentials[0])
    (tmp_path / ".skein.pem").write_bytes(credentials[1])
    master = LiveMaster(spec, credentials).start()
    master.grant_all()
    env = {**os.environ, **task_env(spec, master, "worker", 0)}
    env["PATH"] = os.environ["PATH"]
    task = subprocess.Popen(
        [sys.executable, "-m", "tfyarn.runtime"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert task.stdout is not None
    script_pid = int(task.stdout.readline())
    task.send_signal(signal.SIGKILL)
    task.wait(10)
    deadline = time.monotonic() + 10
    while True:
        try:
            os.kill(script_pid, 0)
        except ProcessLookupError:
            break
        with open(f"/proc/{script_pid}/stat") as stat:  # a zombie is dead too
            if stat.read().split()[2] == "Z":
                break
        assert time.monotonic() < deadline, "the script outlived its runtime"
        time.sleep(0.1)
    master.call(lambda: master.state.request_kill("test over"))
    master.wait_done()


def test_a_taken_tfyarn_port_falls_back_to_another(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    import socket

    blocker = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    blocker.bind(("0.0.0.0", 0))  # no SO_REUSEPORT: nobody can share it
    taken = blocker.getsockname()[1]
    spec = job()
    env = {
        "TFYARN_JOB": spec.to_env(),
        "TFYARN_ROLE": "worker",
        "TFYARN_TASK_INDEX": "0",
        "TFYARN_MASTER_ADDRESS": "127.0.0.1:1",
        "TFYARN_PORT": str(taken),
    }
    rt = Runtime(TaskContext.from_env(env), credentials=credentials, workdir=tmp_path)
    held = rt._reserve()
    try:
        assert held.getsockname()[1] not in (0, taken)
    finally:
        held.close()
        blocker.close()


def test_a_replaced_task_waits_for_the_old_server_on_its_port(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    """A predecessor's TF server (SO_REUSEPORT, listening) would share the port."""
    import socket

    old = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    old.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    old.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
    old.bind(("::", 0))
    old.listen()
    port = old.getsockname()[1]
    threading.Timer(1.0, old.close).start()  # the old server goes away
    spec = job()
    env = {
        "TFYARN_JOB": spec.to_env(),
        "TFYARN_ROLE": "worker",
        "TFYARN_TASK_INDEX": "0",
        "TFYARN_MASTER_ADDRESS": "127.0.0.1:1",
        "TFYARN_PORT": str(port),
    }
    rt = Runtime(TaskContext.from_env(env), credentials=credentials, workdir=tmp_path)
    held = rt._reserve()
    try:
        assert held.getsockname()[1] == port  # waited, then took it back
    finally:
        held.close()
    # One that never goes away: another port after port_wait.
    stuck = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    stuck.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    stuck.bind(("::", 0))
    stuck.listen()
    env["TFYARN_PORT"] = str(stuck.getsockname()[1])
    rt = Runtime(
        TaskContext.from_env(env),
        credentials=credentials,
        workdir=tmp_path,
        timeouts=Timeouts(port_wait=0.5, port_poll=0.1),
    )
    held = rt._reserve()
    try:
        assert held.getsockname()[1] != stuck.getsockname()[1]
    finally:
        held.close()
        stuck.close()


def test_the_runtimes_own_sigterm_marks_the_container_as_ending() -> None:
    from tfyarn.runtime.child import StopRequest

    stop = StopRequest()
    stop.set("the master restarts it in place", 3.0, next_attempt=2)
    assert not stop.container_ending
    # YARN's SIGTERM to the runtime arrives meanwhile: final, and from outside.
    stop.set("SIGTERM received", 3.0, container_ending=True)
    assert stop.container_ending and stop.next_attempt == 0
    assert stop.reason == "SIGTERM received"
