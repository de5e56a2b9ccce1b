"""The application master and task runtime on the local YARN cluster.

Jobs are submitted the way the client does (``skein.Client().submit(
to_skein(JobSpec(...).validate()))``). Task scripts report what they saw in
the application's key-value store, so the test reads TF_CONFIG, arguments and
ports from every task while the job runs, then releases the lead task.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import signal
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
import skein

from tfyarn import client
from tfyarn._proto import master_pb2 as pb
from tfyarn._proto import master_pb2_grpc
from tfyarn.client.compile import to_skein
from tfyarn.contract.channel import credentials_of, secure_channel
from tfyarn.contract.status import MASTER_KEY, STATUS_KEY
from tfyarn.errors import TfyarnError
from tfyarn.spec import JobSpec

pytestmark = pytest.mark.yarn

# Reports what the task saw; the lead waits for the test's go, ps and
# evaluator tasks run until the master stops them, other workers end at once.
REPORTER = """\
import json, os, sys, time
import skein

app = skein.ApplicationClient.from_current()
role, index = os.environ["TFYARN_ROLE"], int(os.environ["TFYARN_TASK_INDEX"])
seen = {
    "tf_config": json.loads(os.environ["TF_CONFIG"]),
    "argv": sys.argv[1:],
    "reuse_port": os.environ.get("TF_GRPC_REUSE_PORT"),
    "port": os.environ.get("TFYARN_PORT"),
    "nm_host": os.environ.get("NM_HOST"),
    "runtime_pid": os.getppid(),
}
app.kv[f"seen.{role}:{index}"] = json.dumps(seen).encode()
if role == "worker":
    import tfyarn
    tfyarn.report_progress(5 + index, loss=0.25, total_steps=10)
if (role, index) == ("worker", 0) or role == "chief":
    app.kv.wait("test.go")
elif role in ("ps", "evaluator"):
    time.sleep(600)  # only the master ends these
"""


@pytest.fixture(scope="module")
def yarn() -> Iterator[Any]:
    try:
        yarn_client = client.connect()
    except TfyarnError as exc:
        pytest.fail(f"integration tests need the local cluster: {exc}")
    with yarn_client:
        yield yarn_client


def job(tmp_path: Path, tasks: dict[str, int], **kwargs: Any) -> JobSpec:
    script = tmp_path / "reporter.py"
    if not script.exists():
        script.write_text(REPORTER)
    kwargs.setdefault("script", str(script))
    kwargs.setdefault("python", sys.executable)
    kwargs.setdefault("am_memory_mib", 512)
    kwargs.setdefault("registration_timeout", 90.0)
    kwargs.setdefault("worker_grace", 5.0)
    kwargs.setdefault("stop_grace", 3.0)
    # JobSpec's defaults are the shipped ones (conf/tfyarn.yaml: restarts,
    # master attempts, preimport); these tests ask for none.
    kwargs = {"max_restarts": 0, "max_am_attempts": 1, "preimport": (), **kwargs}
    memory = kwargs.pop("memory_mib", 256)
    return JobSpec(
        name="test-master",
        tasks={r: {"count": n, "memory_mib": memory} for r, n in tasks.items()},
        **kwargs,
    ).validate()


@contextlib.contextmanager
def submitted(yarn: Any, spec: JobSpec) -> Iterator[str]:
    """Submit; kill the application if the test leaves it running."""
    app_id = yarn.submit(to_skein(spec))
    try:
        yield app_id
    finally:
        report = yarn.application_report(app_id)
        if str(report.state) not in ("FINISHED", "FAILED", "KILLED"):
            yarn.kill_application(app_id)


def final_report(yarn: Any, app_id: str, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        report = yarn.application_report(app_id)
        if str(report.state) in ("FINISHED", "FAILED", "KILLED"):
            return report
        time.sleep(1)
    pytest.fail(f"{app_id} did not end within {timeout:.0f} s")


def kv_wait(app: Any, keys: list[str], timeout: float) -> dict[str, bytes]:
    """Read keys from the app's kv store, waiting (bounded) until all exist."""
    deadline = time.monotonic() + timeout
    while True:
        values = app.kv.get_range()
        if all(k in values for k in keys):
            return values
        if time.monotonic() > deadline:
            missing = [k for k in keys if k not in values]
            pytest.fail(f"kv keys {missing} not set within {timeout:.0f} s")
        time.sleep(0.5)


def test_cluster_forms_tf_config_is_right_and_lead_success_ends_the_job(
    yarn: Any, tmp_path: Path
) -> None:
    spec = job(
        tmp_path,
        {"ps": 1, "worker": 2, "evaluator": 1},
        args=("--who={job_name}:{task_index}", "--ps={ps_hosts}"),
    )
    tasks = ["ps:0", "worker:0", "worker:1", "evaluator:0"]
    with submitted(yarn, spec) as app_id:
        started = time.monotonic()
        app = yarn.connect(app_id)
        values = kv_wait(app, [f"seen.{t}" for t in tasks], timeout=180)
        # Declared tasks can run before the master's next status snapshot.
        deadline = time.monotonic() + 30
        while (status := json.loads(app.kv[STATUS_KEY]))["generation"] < 1:
            assert time.monotonic() < deadline, status["generation"]
            time.sleep(0.5)
        seen = {t: json.loads(values[f"seen.{t}"]) for t in tasks}

        # One ClusterSpec, generation 1, holding every chief/ps/worker address.
        assert status["generation"] == 1
        by_task = {t["task"]: t for t in status["tasks"]}
        cluster = {
            "ps": [by_task["ps:0"]["address"]],
            "worker": [by_task["worker:0"]["address"], by_task["worker:1"]["address"]],
        }
        for task, what in seen.items():
            role, index = task.split(":")
            assert what["tf_config"] == {
                "cluster": cluster,
                "task": {"type": role, "index": int(index)},
            }
            assert what["reuse_port"] == "1"
            assert what["argv"] == [f"--who={task}", f"--ps={cluster['ps'][0]}"]
            if role != "evaluator":
                assert what["tf_config"]["cluster"][role][int(index)].endswith(
                    f":{what['port']}"
                )
        assert by_task["evaluator:0"]["address"] not in cluster["worker"]
        assert all(by_task[t]["yarn_container_id"] for t in tasks)

        # A client without the application's credentials is refused.
        address = app.kv[MASTER_KEY].decode()
        other = skein.Security.new_credentials()
        intruder = master_pb2_grpc.MasterStub(
            secure_channel(address, *credentials_of(other))
        )
        intruder_task = pb.TaskKey(role="worker", index=1)
        with pytest.raises(grpc.RpcError) as refused:
            # A task's first call: WatchCluster carrying its registration.
            next(
                intruder.WatchCluster(
                    pb.WatchClusterRequest(
                        task=intruder_task,
                        attempt=0,
                        register=pb.RegisterTaskRequest(
                            task=intruder_task, attempt=0, host="intruder", port=1
                        ),
                    ),
                    timeout=10,
                )
            )
        assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
        # With the app's credentials the same service answers.
        security = yarn.security
        friend = master_pb2_grpc.MasterStub(
            secure_channel(address, *credentials_of(security))
        )
        friend.Heartbeat(
            pb.HeartbeatRequest(task=pb.TaskKey(role="worker", index=1)), timeout=10
        )

        # report_progress from the scripts reaches the status, and the lead's
        # step/total_steps YARN's progress bar.
        deadline = time.monotonic() + 30
        while True:
            status = json.loads(app.kv[STATUS_KEY])
            steps = {t["task"]: t["step"] for t in status["tasks"]}
            if steps["worker:0"] == 5 and steps["worker:1"] == 6:
                break
            assert time.monotonic() < deadline, steps
            time.sleep(0.5)
        assert {t["task"]: t["metrics"] for t in status["tasks"]}["worker:1"] == {
            "loss": 0.25,
            "total_steps": 10.0,
        }
        deadline = time.monotonic() + 60
        while yarn.application_report(app_id).progress < 0.5:
            assert time.monotonic() < deadline, "YARN progress never followed"
            time.sleep(1)

        # The status page behind YARN's tracking URL (skein's web UI proxy).
        page = app.ui.get_pages()["tfyarn"]
        with urllib.request.urlopen(page.address, timeout=10) as response:
            html = response.read().decode()
        assert "tfyarn job: RUNNING" in html and "worker:1" in html

        app.kv["test.go"] = b"1"  # release the lead task
        report = final_report(yarn, app_id, timeout=120)
        elapsed = time.monotonic() - started
    assert str(report.final_status) == "SUCCEEDED", report.diagnostics
    assert "worker:0 finished successfully" in report.diagnostics
    # ps and evaluator were stopped by the master, not waited for.
    assert elapsed < 240


def test_unsatisfiable_request_fails_in_bounded_time_naming_the_task(
    yarn: Any, tmp_path: Path
) -> None:
    """Two workers of 2 GPUs each on a node with 2: one is never granted.

    (A request larger than every node is refused by the client before submitting,
    tfyarn.client.fit; YARN itself would reject it outright.)
    """
    spec = job(
        tmp_path,
        {"worker": 2},
        registration_timeout=20.0,
    )
    spec = dataclasses.replace(
        spec, tasks={"worker": {"count": 2, "memory_mib": 256, "gpus": 2}}
    )
    with submitted(yarn, spec) as app_id:
        started = time.monotonic()
        report = final_report(yarn, app_id, timeout=150)
        elapsed = time.monotonic() - started
    assert str(report.final_status) == "FAILED"
    diagnostics = report.diagnostics
    assert "did not register within the registration timeout of 20 s" in diagnostics
    assert re.search(
        r"worker:[01] waiting for a container of 256 MiB, 1 vcores, 2 GPUs; "
        r"not granted after 2\d s",
        diagnostics,
    ), diagnostics
    assert elapsed < 120


def test_twelve_tasks_on_one_node_hold_distinct_ports(
    yarn: Any, tmp_path: Path
) -> None:
    spec = job(tmp_path, {"ps": 2, "worker": 10}, memory_mib=128)
    tasks = [f"ps:{i}" for i in range(2)] + [f"worker:{i}" for i in range(10)]
    with submitted(yarn, spec) as app_id:
        app = yarn.connect(app_id)
        values = kv_wait(app, [f"seen.{t}" for t in tasks], timeout=300)
        configs = [json.loads(values[f"seen.{t}"])["tf_config"] for t in tasks]
        addresses = configs[0]["cluster"]["ps"] + configs[0]["cluster"]["worker"]
        assert len(addresses) == 12
        assert len(set(addresses)) == 12, addresses
        assert len({a.split(":")[0] for a in addresses}) == 1  # one node
        assert all(c["cluster"] == configs[0]["cluster"] for c in configs)
        app.kv["test.go"] = b"1"
        report = final_report(yarn, app_id, timeout=180)
    assert str(report.final_status) == "SUCCEEDED", report.diagnostics


def test_container_that_dies_without_reporting_fails_the_job(
    yarn: Any, tmp_path: Path
) -> None:
    """SIGKILL a task's runtime (as the OOM killer would): the task is LOST."""
    spec = job(tmp_path, {"ps": 1, "worker": 1})
    with submitted(yarn, spec) as app_id:
        app = yarn.connect(app_id)
        values = kv_wait(app, ["seen.ps:0", "seen.worker:0"], timeout=180)
        runtime_pid = json.loads(values["seen.ps:0"])["runtime_pid"]
        started = time.monotonic()
        os.kill(runtime_pid, signal.SIGKILL)  # this job's own process, by id
        report = final_report(yarn, app_id, timeout=120)
        elapsed = time.monotonic() - started
    assert str(report.final_status) == "FAILED"
    assert "ps:0" in report.diagnostics and "was lost" in report.diagnostics
    assert "without the task reporting an exit code" in report.diagnostics
    assert elapsed < 60


def test_silent_task_is_lost_after_the_heartbeat_timeout(
    yarn: Any, tmp_path: Path
) -> None:
    """SIGSTOP a task's runtime (a wedged process): no heartbeat, the job fails."""
    spec = job(
        tmp_path, {"ps": 1, "worker": 1}, heartbeat_interval=1.0, heartbeat_timeout=6.0
    )
    with submitted(yarn, spec) as app_id:
        app = yarn.connect(app_id)
        values = kv_wait(app, ["seen.ps:0", "seen.worker:0"], timeout=180)
        runtime_pid = json.loads(values["seen.ps:0"])["runtime_pid"]
        started = time.monotonic()
        os.kill(runtime_pid, signal.SIGSTOP)  # this job's own process, by id
        try:
            report = final_report(yarn, app_id, timeout=120)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(runtime_pid, signal.SIGCONT)
        elapsed = time.monotonic() - started
    assert str(report.final_status) == "FAILED"
    assert "ps:0" in report.diagnostics
    assert "sent no heartbeat for" in report.diagnostics
    assert elapsed < 60


TF_PS = """\
import json, os, sys
import tensorflow as tf

resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
task = json.loads(os.environ["TF_CONFIG"])["task"]
server = tf.distribute.Server(
    resolver.cluster_spec(), job_name=task["type"], task_index=task["index"],
    protocol="grpc", start=True,
)
if task["type"] == "ps":
    server.join()
tf.config.experimental_connect_to_cluster(resolver)
with tf.device("/job:ps/task:0"):
    v = tf.Variable(40.0)
v.assign_add(2.0)
print(f"value={float(v.numpy())}", flush=True)
sys.exit(0 if float(v.numpy()) == 42.0 else 5)
"""


@pytest.mark.slow
def test_tensorflow_servers_bind_their_reserved_ports(
    yarn: Any, tmp_path: Path
) -> None:
    """A real TF cluster (1 ps + 1 worker) on ports held with SO_REUSEPORT."""
    script = tmp_path / "tf_ps.py"
    script.write_text(textwrap.dedent(TF_PS))
    spec = job(tmp_path, {"ps": 1, "worker": 1}, script=str(script), memory_mib=1024)
    with submitted(yarn, spec) as app_id:
        report = final_report(yarn, app_id, timeout=300)
    assert str(report.final_status) == "SUCCEEDED", report.diagnostics
