"""The MLflow run of a job: refused without MLflow, fed without stalling, never failing."""

from __future__ import annotations

import builtins
import socket
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from tfyarn.client import config, mlflow_run
from tfyarn.contract.status import JobStatus, Phase, TaskState, TaskStatus
from tfyarn.errors import SpecError
from tfyarn.spec import JobSpec


def _own(**kw: str) -> config.ClientOptions:
    return config.client_options(config.load(None, kw))


def test_mlflow_without_the_package_is_refused_with_the_install_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = builtins.__import__

    def no_mlflow(name: str, *args: Any, **kw: Any) -> Any:
        if name == "mlflow" or name.startswith("mlflow."):
            raise ImportError("No module named 'mlflow'")
        return real(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_mlflow)
    with pytest.raises(SpecError, match=r"pip install 'tfyarn\[mlflow\]'"):
        mlflow_run.settings(_own(mlflow="http://127.0.0.1:5000"))
    assert mlflow_run.settings(_own()) is None  # not asked: nothing to refuse


def test_env_takes_the_tracking_uri_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    pytest.importorskip("mlflow")
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(SpecError, match="MLFLOW_TRACKING_URI is not set"):
        mlflow_run.settings(_own(mlflow="env"))
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:1")
    got = mlflow_run.settings(
        _own(mlflow="env", mlflow_experiment="e", mlflow_parent="p1")
    )
    assert got == mlflow_run.Tracking("http://127.0.0.1:1", "e", "p1")


def _spec(tmp_path: Path) -> JobSpec:
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    return JobSpec(script=str(script), name="digits", queue="default")


def test_params_are_named_as_the_submit_options(tmp_path: Path) -> None:
    params = mlflow_run.params_of(_spec(tmp_path))
    assert params["num_worker"] == "1" and params["num_ps"] == "0"
    assert params["worker_memory"].endswith("MiB") and params["queue"] == "default"
    assert "ps_memory" not in params  # a role without tasks has no resources


def test_a_server_that_is_down_is_one_warning_and_never_stalls(tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        started = time.monotonic()
        tracker = mlflow_run.Tracker(
            mlflow_run.Tracking(f"http://127.0.0.1:{port}"),
            _spec(tmp_path),
            source="train.py",
        )
        tracker.submitted("application_1_0001")
        lead = TaskStatus(
            "worker:0", "worker", 0, TaskState.RUNNING, step=5, metrics={"loss": 0.5}
        )
        tracker.status(JobStatus(phase=Phase.RUNNING, lead="worker:0", tasks=[lead]))
        feeding = time.monotonic() - started
        tracker.finished("SUCCEEDED", "")
    assert feeding < 1.0  # the follow loop never waits on MLflow
    assert time.monotonic() - started < mlflow_run.FLUSH_BOUND + 1
    ours = [w for w in caught if "MLflow at" in str(w.message)]
    assert len(ours) == 1 and "goes on without its MLflow run" in str(ours[0].message)


class _FakeClient:
    def __init__(self) -> None:
        self.batches: list[dict[str, Any]] = []
        self.ended = ""

    def get_experiment_by_name(self, name: str) -> None:
        return None

    def create_experiment(self, name: str) -> str:
        return "7"

    def create_run(
        self, experiment_id: str, tags: dict[str, str], run_name: str
    ) -> Any:
        self.created = (experiment_id, tags)
        return type("R", (), {"info": type("I", (), {"run_id": "run1"})()})()

    def log_batch(
        self, run_id: str, metrics: Any = (), params: Any = (), tags: Any = ()
    ) -> None:
        self.batches.append(
            {"metrics": list(metrics), "params": list(params), "tags": list(tags)}
        )

    def set_terminated(self, run_id: str, status: str) -> None:
        self.ended = status


def test_metrics_restarts_and_the_final_status_reach_the_run(tmp_path: Path) -> None:
    pytest.importorskip("mlflow")
    fake = _FakeClient()
    tracker = mlflow_run.Tracker(
        mlflow_run.Tracking("http://x", "exp", "parent1"),
        _spec(tmp_path),
        source="train.py",
        client_factory=lambda uri: fake,
    )
    for step, restarts in ((1, 0), (1, 0), (3, 1)):
        lead = TaskStatus(
            "worker:0",
            "worker",
            0,
            TaskState.RUNNING,
            step=step,
            metrics={"loss": 1.0 / step, "total_steps": 10},
        )
        tracker.status(
            JobStatus(
                phase=Phase.RUNNING,
                lead="worker:0",
                tasks=[lead],
                restarts=restarts,
                restart_reasons=["worker:1 lost"][:restarts],
            )
        )
    tracker.finished("FAILED", "worker:1 exit 1")
    assert fake.created == (
        "7",
        {
            "mlflow.runName": "digits",
            "tfyarn.job_name": "digits",
            "mlflow.parentRunId": "parent1",
        },
    )
    metrics = [(m.key, m.step) for b in fake.batches for m in b["metrics"]]
    assert (
        ("loss", 1) in metrics and ("loss", 3) in metrics and ("restarts", 3) in metrics
    )
    assert metrics.count(("loss", 1)) == 1  # the same step again is no news
    assert not any(k == "total_steps" for k, _ in metrics)
    tags = {t.key: t.value for b in fake.batches for t in b["tags"]}
    assert (
        tags["tfyarn.final_status"] == "FAILED"
        and tags["tfyarn.last_restart"] == "worker:1 lost"
    )
    assert fake.ended == "FAILED"
