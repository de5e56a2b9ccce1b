"""The notebook tier's MLflow tracking server, started as early as possible.

``mlflow server`` takes one to two minutes to start on a busy two-core
machine (it imports Flask, pandas, SQLAlchemy and migrates its SQLite store),
about as long as the local cluster's start. So it starts when this file is
imported, at collection, and runs beside the cluster's start; the
``mlflow_server`` fixture waits until it answers and stops it at the end.

The server is full mlflow from a venv of its own (``tests/run`` makes it in
the cache): the test venv has the client's ``mlflow-skinny`` only, as a user's
does, so that Keras does not import the server's scikit-learn and matplotlib
with every task's TensorFlow.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

# The server's bound to answer after its start (a busy CI machine).
START_BOUND = 300.0
# Where tests/run installs the server.
SERVER_VENV = (
    Path(os.environ.get("TFYARN_CACHE_DIR") or Path.home() / ".cache" / "tfyarn")
    / "mlflow-server"
)
MLFLOW = SERVER_VENV / "bin" / "mlflow"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Server:
    def __init__(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="tfyarn-mlflow-"))
        self.uri = f"http://127.0.0.1:{_free_port()}"
        self.log_path = self.home / "server.log"
        self.started = time.monotonic()
        port = self.uri.rsplit(":", 1)[1]
        self.process: subprocess.Popen[bytes] | None = None
        if not MLFLOW.is_file():
            return  # the fixture fails, naming what is missing
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [
                    str(MLFLOW),
                    "server",
                    "--backend-store-uri",
                    f"sqlite:///{self.home}/mlflow.db",
                    "--default-artifact-root",
                    str(self.home / "artifacts"),
                    "--host",
                    "127.0.0.1",
                    "--port",
                    port,
                    "--workers",
                    "1",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                # Tracking alone: MLflow 3's server also starts a job runner
                # (a huey consumer polling its queue: half a CPU-minute in a
                # test run) for features these tests do not use.
                env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"},
            )

    def wait_up(self) -> None:
        if self.process is None:
            pytest.fail(
                f"no MLflow server at {MLFLOW}: `bash tests/run` installs it "
                "(a venv with full mlflow, kept in the cache)"
            )
        # /health answers before the tracking API has warmed up (its first
        # call loads the store): wait for an API call too.
        ask = "/api/2.0/mlflow/experiments/search?max_results=1"
        while True:
            try:
                for path in ("/health", ask):
                    with urllib.request.urlopen(self.uri + path, timeout=30) as reply:
                        if reply.status != 200:
                            raise OSError(f"{path}: {reply.status}")
                return
            except OSError:
                pass
            waited = time.monotonic() - self.started
            if self.process.poll() is not None or waited > START_BOUND:
                pytest.fail(
                    f"the MLflow server did not answer within {waited:.0f} s: "
                    + self.log_path.read_text(errors="replace")[-3000:]
                )
            time.sleep(0.5)

    def stop(self) -> None:
        for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 10)):
            if self.process is None or self.process.poll() is not None:
                return
            os.killpg(self.process.pid, sig)
            try:
                self.process.wait(wait)
            except subprocess.TimeoutExpired:
                continue


_SERVER = _Server()
# Also when no test asked for it (deselected, interrupted).
atexit.register(_SERVER.stop)


@pytest.fixture(scope="session")
def mlflow_server() -> Iterator[str]:
    """The tracking server's URI (SQLite store, a free loopback port)."""
    try:
        _SERVER.wait_up()
        yield _SERVER.uri
    finally:
        _SERVER.stop()
