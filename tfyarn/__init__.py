"""tfyarn: distributed TensorFlow on Hadoop YARN."""

# The job API (skein and the YARN driver load lazily, on first call), with its
# arguments checked up front (tfyarn/_api.py).
from tfyarn._api import check, kill, logs, status, submit, wait
from tfyarn.client import JobStatus, connect, list_jobs
from tfyarn.errors import (
    ClusterError,
    HdfsError,
    JobFailedError,
    MasterUnavailableError,
    SpecError,
    TfyarnError,
)
from tfyarn.hdfs import enable as enable_hdfs
from tfyarn.progress import report_progress
from tfyarn.spec import JobSpec, Role, TaskGroup

__version__ = "0.1.0"
