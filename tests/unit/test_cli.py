"""The job commands through ``tfyarn.cli.main(argv)``, with a scripted YARN."""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path

import pytest
from _fake_yarn import (
    APP_ID,
    FakeYarn,
    KillableYarn,
    RecordingMaster,
    Report,
    mutual_tls_server,
    use,
)

import tfyarn.cluster
from tfyarn import cli
from tfyarn._proto import master_pb2_grpc
from tfyarn.cli import main
from tfyarn.client import tasklogs
from tfyarn.contract.status import (
    JobStatus,
    Phase,
    TaskState,
    TaskStatus,
)
from tfyarn.errors import ClusterError
from tfyarn.spec import JobSpec, Role


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "train.py"
    path.write_text("print('training')\n")
    return str(path)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(time, "sleep", lambda s: None)


def no_local_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    def use_local_cluster() -> None:
        raise ClusterError("no local cluster")

    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.setattr(tfyarn.cluster, "use_local_cluster", use_local_cluster)


def snap(
    phase: str,
    *states: str,
    formed: bool = False,
    exit_codes: tuple[int | None, ...] = (),
) -> JobStatus:
    codes = (*exit_codes, None, None, None)
    tasks = [
        TaskStatus(
            task=f"{role}:{index}",
            role=role,
            index=index,
            state=TaskState(state),
            address="h:1" if role == "ps" else None,
            exit_code=code,
        )
        for (role, index), state, code in zip(
            [("ps", 0), ("worker", 0), ("worker", 1)], states, codes, strict=False
        )
    ]
    return JobStatus(
        phase=Phase(phase),
        generation=1,
        started=100.0,
        cluster_formed_at=104.5 if formed else None,
        tasks=tasks,
    )


def test_submit_follows_to_success(
    monkeypatch: pytest.MonkeyPatch, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeYarn(
        reports=[
            Report(state="ACCEPTED"),
            Report(state="RUNNING"),
            Report(state="RUNNING"),
            Report(state="RUNNING"),
            Report(state="FINISHED", final_status="SUCCEEDED", diagnostics="lead done"),
        ],
        snaps=[
            snap("REGISTERING", "REGISTERED", "ALLOCATED", "REQUESTED"),
            snap("RUNNING", "RUNNING", "RUNNING", "RUNNING", formed=True),
            snap("FINISHING", "KILLED", "SUCCEEDED", "SUCCEEDED", formed=True),
        ],
    )
    use(monkeypatch, fake)
    code = main(["submit", "--num_ps", "1", "--num_worker", "2", script, "--lr", "0.1"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"Submitted {APP_ID}" in out
    assert (
        f"tfyarn kill {APP_ID}" in out and f"yarn logs -applicationId {APP_ID}" in out
    )
    assert "YARN: ACCEPTED" in out and "YARN: RUNNING" in out
    assert "ps 1/1/1, worker 2/1/0 (requested/allocated/registered)" in out
    assert "cluster formed in 4.5 s" in out
    assert "worker:1 RUNNING" in out and "worker:0 SUCCEEDED" in out
    assert "final status: SUCCEEDED" in out
    (submitted,) = fake.submitted
    assert submitted.services["worker"].resources.memory == 2048
    # The script's own arguments reach the tasks untouched, after the options
    job = JobSpec.from_env(submitted.services["worker"].env["TFYARN_JOB"])
    assert job.args == ("--lr", "0.1")
    assert job.count(Role.PS) == 1 and job.count(Role.WORKER) == 2


def test_failed_job_exits_1_with_diagnostics(
    monkeypatch: pytest.MonkeyPatch, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    diag = "worker:1 exited with code 3: ValueError: boom"
    use(
        monkeypatch,
        FakeYarn([Report(state="FINISHED", final_status="FAILED", diagnostics=diag)]),
    )
    assert main(["submit", "--num_worker", "2", script]) == 1
    captured = capsys.readouterr()
    assert "final status: FAILED" in captured.out
    assert "Error:" in captured.err and diag in captured.err
    assert f"yarn logs -applicationId {APP_ID}" in captured.err
    assert "Traceback" not in captured.err


def test_killed_job_exits_3(
    monkeypatch: pytest.MonkeyPatch, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    use(monkeypatch, FakeYarn([Report(state="KILLED", final_status="KILLED")]))
    assert main(["submit", script]) == 3


def test_detach_returns_after_submission(
    monkeypatch: pytest.MonkeyPatch, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeYarn([Report(state="RUNNING")])
    use(monkeypatch, fake)
    assert main(["submit", "--detach", script]) == 0
    out = capsys.readouterr().out
    assert APP_ID in out and "YARN:" not in out
    assert len(fake.submitted) == 1


def test_ctrl_c_while_following_leaves_the_job_running(
    monkeypatch: pytest.MonkeyPatch, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeYarn([Report(state="RUNNING")])
    use(monkeypatch, fake)

    def interrupt(s: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", interrupt)
    assert main(["submit", script]) == 130
    err = capsys.readouterr().err
    assert "keeps running" in err and f"tfyarn kill {APP_ID}" in err
    assert fake.killed == []


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--num_worker", "-1"], "num_worker .*must be at least 0, got '-1'"),
        (["--num_ps", "1", "--num_worker", "0"], "parameter-server job needs workers"),
        (["--num_chief", "2"], "num_chief .*between 0 and 1"),
        (["--worker_memory", "a lot"], "expected memory like"),
        (["--env", "NOPE"], "expected K=V"),
        (["--legacy_flags", "--num_chief", "1"], "--num_chief 0"),
    ],
)
def test_bad_input_is_refused_before_connecting(
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    message: str,
) -> None:
    use(monkeypatch, None)
    assert main(["submit", *argv, script]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: ")
    import re

    assert re.search(message, err), err
    assert "Traceback" not in err


def test_missing_script_is_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    use(monkeypatch, None)
    assert main(["submit", str(tmp_path / "nope.py")]) == 1
    assert "script not found" in capsys.readouterr().err


def test_memory_above_the_largest_node_submits_nothing(
    monkeypatch: pytest.MonkeyPatch, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeYarn(nodes=[(4096, 4, 0), (6144, 2, 0)])
    use(monkeypatch, fake)
    assert main(["submit", "--worker_memory", "8 GiB", script]) == 1
    err = capsys.readouterr().err
    assert err.startswith(
        "Error: --worker_memory 8192 MiB is more than any node offers"
    )
    assert "6144 MiB" in err
    assert fake.submitted == []


def test_gpus_without_gpu_nodes_are_refused(
    monkeypatch: pytest.MonkeyPatch, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeYarn(nodes=[(8192, 4, 0)])
    use(monkeypatch, fake)
    assert main(["submit", "--worker_gpus", "1", script]) == 1
    assert "--worker_gpus 1" in capsys.readouterr().err
    assert fake.submitted == []


def test_no_cluster_says_how_to_get_one(
    monkeypatch: pytest.MonkeyPatch, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    no_local_cluster(monkeypatch)
    assert main(["submit", script]) == 1
    assert "no YARN cluster: run `tfyarn cluster start`" in capsys.readouterr().err


def test_dry_run_checks_and_submits_nothing(
    monkeypatch: pytest.MonkeyPatch, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = FakeYarn()
    use(monkeypatch, fake)
    assert (
        main(["submit", "--dry_run", "--num_ps", "1", "--num_worker", "2", script]) == 0
    )
    out = capsys.readouterr().out
    assert "OK: the job is valid; every task fits" in out
    assert "count: 2" in out
    assert fake.submitted == []


def test_config_file_feeds_submit(
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    conf = tmp_path / "job.yaml"
    conf.write_text("num_ps: 1\nnum_worker: 3\nps_memory: 512 MiB\n")
    fake = FakeYarn()
    use(monkeypatch, fake)
    assert main(["submit", "--config", str(conf), "--num_worker", "2", script]) == 0
    (spec,) = fake.submitted
    assert spec.services["ps"].resources.memory == 512
    assert "tfyarn" in spec.tags


def test_unknown_config_key_in_file(
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    conf = tmp_path / "job.yaml"
    conf.write_text("num_pss: 1\n")
    use(monkeypatch, None)
    assert main(["submit", "--config", str(conf), script]) == 1
    assert "did you mean 'num_ps'" in capsys.readouterr().err


def test_status_shows_the_task_table(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    running = snap(
        "RUNNING",
        "RUNNING",
        "RUNNING",
        "FAILED",
        formed=True,
        exit_codes=(None, None, 1),
    )
    use(monkeypatch, FakeYarn([Report(state="RUNNING")], snaps=[running]))
    assert main(["status", APP_ID]) == 0
    out = capsys.readouterr().out
    assert "state:        RUNNING" in out and "phase RUNNING" in out
    assert "TASK" in out and "worker:1  FAILED" in out


def test_status_counts_resizes_and_shows_a_stop_notice(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    running = snap("RUNNING", "RUNNING", "RUNNING", "RUNNING", formed=True)
    running.resizes = 1
    running.resize_reasons = ["resized from 1 to 2 worker(s): tfyarn scale"]
    running.stop_notice = "stop notice: resized from 2 to 3 worker(s): tfyarn scale"
    use(monkeypatch, FakeYarn([Report(state="RUNNING")], snaps=[running]))
    assert main(["status", APP_ID]) == 0
    out = capsys.readouterr().out
    assert "generation 1, restarts 0, resizes 1, cluster formed" in out
    assert "notice:       stop notice: resized from 2 to 3 worker(s)" in out
    assert "  1. resized from 1 to 2 worker(s): tfyarn scale" in out


def test_status_of_unknown_app(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    use(monkeypatch, FakeYarn())
    assert main(["status", "application_1_2"]) == 1
    assert "no application application_1_2" in capsys.readouterr().err


def test_status_refuses_a_non_id(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    use(monkeypatch, None)
    assert main(["status", "app-7"]) == 1
    assert "expected an application id like" in capsys.readouterr().err


def test_kill_stops_every_task_through_the_master_before_killing(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    credentials: tuple[bytes, bytes],
) -> None:
    server, port = mutual_tls_server(credentials)
    fake = KillableYarn(f"127.0.0.1:{port}", credentials)
    master = RecordingMaster(fake)
    master_pb2_grpc.add_MasterServicer_to_server(master, server)
    server.start()
    try:
        use(monkeypatch, fake)
        assert main(["kill", APP_ID]) == 0
    finally:
        server.stop(None)
    # Every script got its grace (StopJob) before YARN killed the application.
    assert master.stops == [("stopped by tfyarn kill", [])]
    assert master.graceful == [False]  # plain kill: no stop notice
    assert fake.killed == [APP_ID]
    assert "KILLED" in capsys.readouterr().out


def test_kill_graceful_asks_the_master_for_a_stop_notice_first(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    credentials: tuple[bytes, bytes],
) -> None:
    server, port = mutual_tls_server(credentials)
    fake = KillableYarn(f"127.0.0.1:{port}", credentials)
    master = RecordingMaster(fake)
    master_pb2_grpc.add_MasterServicer_to_server(master, server)
    server.start()
    try:
        use(monkeypatch, fake)
        assert main(["kill", "--graceful", APP_ID]) == 0
    finally:
        server.stop(None)
    assert master.stops == [("stopped by tfyarn kill --graceful", [])]
    assert master.graceful == [True]
    assert fake.killed == [APP_ID]
    assert "KILLED" in capsys.readouterr().out


def test_list_shows_only_tfyarn_apps(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    other = Report(id="application_1700000000000_0001", name="spark", tags=set())
    ours = Report(id=APP_ID, name="mnist", state="RUNNING")
    use(monkeypatch, FakeYarn(apps=[other, ours]))
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "mnist" in out and "spark" not in out


LOGS = """\
Container: container_1700000000000_0007_01_000001 on localhost_40000
LogAggregationType: AGGREGATED
=========================================
LogType:application.master.log
LogLength:12
LogContents:
master line
End of LogType:application.master.log
*****************************************

Container: container_1700000000000_0007_01_000003 on localhost_40000
LogAggregationType: AGGREGATED
=========================================
LogType:worker.log
LogLength:30
LogContents:
2026-01-01 00:00:00,000 tfyarn.runtime INFO: worker:1 attempt 0 holds h:1
worker one says hi
End of LogType:worker.log
*****************************************

Container: container_1700000000000_0007_01_000002 on localhost_40000
LogAggregationType: AGGREGATED
=========================================
LogType:worker.log
LogLength:30
LogContents:
2026-01-01 00:00:00,000 tfyarn.runtime INFO: worker:0 attempt 0 holds h:2
worker zero says hi
End of LogType:worker.log
"""


def test_logs_split_per_task(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tasklogs, "use_cluster", lambda: None)
    monkeypatch.setattr(tasklogs, "yarn_logs", lambda app_id, timeout: LOGS)
    assert main(["logs", APP_ID, "--task", "worker:1"]) == 0
    out = capsys.readouterr().out
    assert "==> worker:1 [container_1700000000000_0007_01_000003" in out
    assert (
        "worker one says hi" in out and "zero" not in out and "master line" not in out
    )
    assert main(["logs", APP_ID]) == 0
    out = capsys.readouterr().out
    assert out.index("master line") < out.index("worker zero") < out.index("worker one")
    assert main(["logs", APP_ID, "--task", "ps:0"]) == 1
    assert (
        "tasks with logs: ['master', 'worker:0', 'worker:1']" in capsys.readouterr().err
    )


def test_status_follow_exits_like_submit(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    use(
        monkeypatch,
        FakeYarn(
            [
                Report(state="RUNNING"),
                Report(
                    state="FINISHED", final_status="FAILED", diagnostics="ps:0 lost"
                ),
            ]
        ),
    )
    assert main(["status", "--follow", APP_ID]) == 1
    captured = capsys.readouterr()
    assert "YARN: RUNNING" in captured.out and "ps:0 lost" in captured.err


def test_dry_run_without_a_cluster_still_checks_the_job(
    monkeypatch: pytest.MonkeyPatch, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    no_local_cluster(monkeypatch)
    assert main(["submit", "--dry_run", "--num_worker", "2", script]) == 0
    out = capsys.readouterr().out
    assert "cluster resources NOT checked (no YARN cluster" in out
    assert (
        main(["submit", "--dry_run", "--num_ps", "1", "--num_worker", "0", script]) == 1
    )


def test_a_mistyped_option_is_named_with_the_one_meant(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv, hint in [
        (["submit", "--num_workers", "2", "train.py"], "did you mean --num_worker?"),
        (["submit", "--worker_memroy=2G", "train.py"], "did you mean --worker_memory?"),
        (["submit", "--bogus_flag", "train.py"], None),  # nothing close: no guess
    ]:
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert "unrecognized arguments: " + argv[1] in err, err
        if hint:
            assert hint in err, err
        else:
            assert "did you mean" not in err, err


@pytest.mark.parametrize("name", cli._COMMAND_MODULES)
def test_every_command_module_imports_and_adds_commands(name: str) -> None:
    subparsers = argparse.ArgumentParser().add_subparsers()
    importlib.import_module(name).add_commands(subparsers)
    assert subparsers.choices, f"{name}.add_commands added no command"


def test_a_command_module_that_does_not_import_is_an_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A renamed or broken command group must not vanish from `tfyarn --help`.
    missing = "tfyarn.client.no_such_cli"
    monkeypatch.setattr(cli, "_COMMAND_MODULES", (*cli._COMMAND_MODULES, missing))
    with pytest.raises(ModuleNotFoundError, match=missing):
        cli.build_parser()
