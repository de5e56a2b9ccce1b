"""tfyarn: distributed TensorFlow on Hadoop YARN."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Every task container imports this package (the runtime, the master, the
# user's script): the job API below loads on first use, so that they do not
# pay for the client (skein, packing, the CLI's helpers) at every start.
_EXPORTS = {
    "check": "tfyarn._api",
    "kill": "tfyarn._api",
    "scale": "tfyarn._api",
    "logs": "tfyarn._api",
    "status": "tfyarn._api",
    "submit": "tfyarn._api",
    "wait": "tfyarn._api",
    "run": "tfyarn.client.function",
    "JobStatus": "tfyarn.client",
    "connect": "tfyarn.client",
    "list_jobs": "tfyarn.client",
    "servers": "tfyarn.client.servers",
    "ServerSet": "tfyarn.client.servers",
    "ServersRestartedError": "tfyarn.client.servers",
    "ClusterError": "tfyarn.errors",
    "HdfsError": "tfyarn.errors",
    "JobFailedError": "tfyarn.errors",
    "MasterUnavailableError": "tfyarn.errors",
    "RemoteTaskError": "tfyarn.errors",
    "ResultTooLargeError": "tfyarn.errors",
    "SpecError": "tfyarn.errors",
    "TfyarnError": "tfyarn.errors",
    "enable_hdfs": "tfyarn.hdfs",
    "report_progress": "tfyarn.progress",
    "RESTART_CODE": "tfyarn.notice",
    "should_stop": "tfyarn.notice",
    "stop_notice": "tfyarn.notice",
    "termination_config": "tfyarn.notice",
    "JobSpec": "tfyarn.spec",
    "Role": "tfyarn.spec",
    "TaskGroup": "tfyarn.spec",
}
_RENAMED = {"enable_hdfs": "enable"}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name == "__version__":
        # Written once, in pyproject.toml; read from the installed package's
        # metadata when asked (importlib.metadata costs every task ~10 ms).
        from tfyarn._version import version

        globals()[name] = version()
        return globals()[name]
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'tfyarn' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])


if TYPE_CHECKING:
    __version__: str
    from tfyarn._api import check, kill, logs, scale, status, submit, wait
    from tfyarn.client import JobStatus, connect, list_jobs
    from tfyarn.client.function import run
    from tfyarn.client.servers import ServerSet, ServersRestartedError, servers
    from tfyarn.errors import (
        ClusterError,
        HdfsError,
        JobFailedError,
        MasterUnavailableError,
        RemoteTaskError,
        ResultTooLargeError,
        SpecError,
        TfyarnError,
    )
    from tfyarn.hdfs import enable as enable_hdfs
    from tfyarn.notice import (
        RESTART_CODE,
        should_stop,
        stop_notice,
        termination_config,
    )
    from tfyarn.progress import report_progress
    from tfyarn.spec import JobSpec, Role, TaskGroup
