"""What the profile tests share: where on HDFS they write, the lead's step."""

from __future__ import annotations

import uuid

from helpers import Job

from tfyarn import client
from tfyarn.cluster import LocalCluster, _ha
from tfyarn.data import fs


def name_service(cluster: LocalCluster) -> str:
    """``fs.defaultFS``: ``hdfs://tfyarn`` on an HA cluster (its name
    service), else the NameNode's own ``hdfs://host:port``."""
    return _ha.default_fs(cluster.settings(), cluster.master_address())


def scratch(cluster: LocalCluster, what: str) -> str:
    """A fresh directory for one test on the cluster's HDFS, made."""
    path = f"{name_service(cluster)}/tmp/tfyarn-profile/{what}-{uuid.uuid4().hex[:8]}"
    fs.resolve(path).mkdirs(path)
    return path


def lead_step(job: Job) -> int:
    """The lead task's latest reported step (0 before it reports)."""
    master = client.status(job.app_id, client=job.yarn).master
    if master is None or master.lead is None:
        return 0
    lead = master.task(master.lead)
    return (lead.step or 0) if lead else 0
