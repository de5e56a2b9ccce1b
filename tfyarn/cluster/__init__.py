"""tfyarn's single-machine Hadoop cluster: what minikube is to Kubernetes.

``LocalCluster`` starts a real NameNode, DataNode, ResourceManager and
NodeManager on 127.0.0.1 from Hadoop jars fetched from Maven Central once;
``use_local_cluster`` points the current process at it.
"""

from tfyarn.cluster._settings import PORTS, ClusterSettings, default_base_dir
from tfyarn.cluster.local import (
    ClusterStatus,
    DaemonStatus,
    LocalCluster,
    use_local_cluster,
)

__all__ = [
    "PORTS",
    "ClusterSettings",
    "ClusterStatus",
    "DaemonStatus",
    "LocalCluster",
    "default_base_dir",
    "use_local_cluster",
]
