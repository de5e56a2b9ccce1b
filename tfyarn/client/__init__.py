"""Submit, follow, inspect, list, kill and read the logs of tfyarn jobs.

One module per concept, in the order a job meets them:

- :mod:`~tfyarn.client.config`: options from ``conf/``, a user file and the
  command line, checked against the schema;
- :mod:`~tfyarn.client.submission`: :func:`check` and :func:`submit`;
- :mod:`~tfyarn.client.follow`: :func:`wait`, narrated by
  :mod:`~tfyarn.client.narrator` from the master's published status;
- :mod:`~tfyarn.client.jobs`: :func:`status`, :func:`list_jobs`, :func:`kill`
  (graceful: :func:`stop_job` first);
- :mod:`~tfyarn.client.scale`: :func:`scale`, another worker count;
- :mod:`~tfyarn.client.tasklogs`: :func:`logs`, split per task;
- :mod:`~tfyarn.client.connection`: which cluster, :func:`connect`, and skein's
  errors mapped in one place;
- :mod:`~tfyarn.client.cli`: ``tfyarn submit|status|kill|scale|list|logs``.

skein and its Java driver load lazily, on the first call that needs YARN.
"""

from tfyarn.client.connection import connect
from tfyarn.client.follow import wait
from tfyarn.client.jobs import JobStatus, kill, list_jobs, status, stop_job
from tfyarn.client.scale import ScaleResult, scale
from tfyarn.client.submission import check, submit
from tfyarn.client.tasklogs import TaskLog, logs

__all__ = [
    "JobStatus",
    "ScaleResult",
    "TaskLog",
    "check",
    "connect",
    "kill",
    "list_jobs",
    "logs",
    "scale",
    "status",
    "stop_job",
    "submit",
    "wait",
]
