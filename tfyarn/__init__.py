"""tfyarn: distributed TensorFlow on Hadoop YARN."""

from tfyarn.errors import (
    ClusterError,
    HdfsError,
    JobFailedError,
    MasterUnavailableError,
    SpecError,
    TfyarnError,
)
from tfyarn.spec import JobSpec, Role, TaskGroup

__version__ = "0.1.0"
