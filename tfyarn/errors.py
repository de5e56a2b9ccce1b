"""Exceptions tfyarn raises on purpose: a user's mistake, or a failure outside tfyarn.

Their messages name the problem and what to do, so where tfyarn's own entry
points catch them they show the message, not a traceback:

- the CLI, ``tfyarn.cli.main``: ``Error: <message>`` on stderr, exit code 1
  (3 for a job that ended KILLED);
- the application master, ``am/__main__.py``: it ends the application FAILED
  with the message in YARN's diagnostics (and the traceback in its own log);
- the task runtime, ``python -m tfyarn.runtime``: a bad task environment
  (:class:`SpecError`) prints ``Error: <message>`` and exits 2; a
  :class:`MasterError` is retried, or stops the task with the reason.

Called from Python (``tfyarn.submit``, ``tfyarn.data``, ``tfyarn.checkpoint``
...), they reach the caller: catch :class:`TfyarnError` for all of them.
"""

from __future__ import annotations


class TfyarnError(Exception):
    """Base class of every error tfyarn raises on purpose."""


class SpecError(TfyarnError, ValueError):
    """A job specification or configuration value is invalid."""


class ClusterError(TfyarnError):
    """The local Hadoop cluster could not be set up, started or reached."""


class MasterError(TfyarnError):
    """A call to the tfyarn application master failed."""


class MasterUnavailableError(MasterError, ConnectionError):
    """The tfyarn application master could not be reached in time."""


class MasterRefusedError(MasterError):
    """The master answered and refused the call (``code``: a gRPC status name).

    Retrying cannot help: the task is unknown, was replaced by a newer attempt,
    or the request is malformed.
    """

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class HdfsError(TfyarnError, OSError):
    """An HDFS operation failed (missing path, permission, unreachable NameNode)."""


class JobFailedError(TfyarnError):
    """A job ended FAILED or KILLED.

    Carries the application id, the final status, the master's diagnostics and
    the exact command that shows every task's logs.
    """

    def __init__(self, app_id: str, final_status: str, diagnostics: str) -> None:
        self.app_id = app_id
        self.final_status = final_status
        self.diagnostics = diagnostics
        self.logs_command = f"yarn logs -applicationId {app_id}"
        super().__init__(
            f"{app_id} ended {final_status}.\n{diagnostics.strip()}\n"
            f"All task logs: {self.logs_command}"
        )


class RemoteTaskError(JobFailedError):
    """A function run by ``tfyarn.run`` raised in a task (the job then failed).

    ``task`` (``"worker:1"``), ``attempt``, ``remote_type`` and the remote
    ``remote_traceback`` are the task's; the original exception, when it
    could be brought back, is this one's ``__cause__``.
    """

    def __init__(
        self,
        app_id: str,
        final_status: str,
        diagnostics: str,
        *,
        task: str,
        attempt: int,
        remote_type: str,
        remote_message: str,
        remote_traceback: str,
    ) -> None:
        self.task = task
        self.attempt = attempt
        self.remote_type = remote_type
        self.remote_message = remote_message
        self.remote_traceback = remote_traceback
        JobFailedError.__init__(self, app_id, final_status, diagnostics)
        message = (
            f"{remote_type}: {remote_message} (in task {task}, attempt {attempt}; "
            f"{app_id} ended {final_status})\n\nRemote traceback ({task}, attempt "
            f"{attempt}):\n{remote_traceback.rstrip()}\n\nAll task logs: "
            f"{self.logs_command}"
        )
        self.args = (message,)

    def __str__(self) -> str:
        return str(self.args[0])


class ResultTooLargeError(TfyarnError):
    """The function's return value was larger than ``tfyarn.run`` brings back."""
