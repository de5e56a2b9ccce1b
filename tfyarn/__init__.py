"""tfyarn: distributed TensorFlow on Hadoop YARN."""

# The job API (skein and the YARN driver load lazily, on first call).
from tfyarn.client import (
    JobStatus,
    check,
    connect,
    kill,
    list_jobs,
    logs,
    status,
    submit,
    wait,
)
from tfyarn.errors import (
    ClusterError,
    HdfsError,
    JobFailedError,
    MasterUnavailableError,
    SpecError,
    TfyarnError,
)
from tfyarn.progress import report_progress
from tfyarn.spec import JobSpec, Role, TaskGroup

__version__ = "0.1.0"
