"""Which cluster the client talks to, and its configuration checked.

``$HADOOP_CONF_DIR`` if set (and holding a client configuration), else the
local cluster started by ``tfyarn cluster start`` if it is running: its
environment is put into ``os.environ`` so that skein's driver and ``yarn``
commands find it too. Hadoop would silently use its built-in defaults (a
ResourceManager on 0.0.0.0) with an empty directory or one lacking its site
files, so the directory is checked first. The rule for which directory is
:mod:`tfyarn.contract.hadoop_conf`'s; this module applies it for the client.
"""

from __future__ import annotations

import os

from tfyarn.client import hadoop_conf
from tfyarn.contract.hadoop_conf import CONF_DIR_ENV, check_conf_dir, explicit_conf_dir
from tfyarn.errors import ClusterError

NO_CLUSTER = (
    "no YARN cluster: run `tfyarn cluster start` or set HADOOP_CONF_DIR "
    "(and put the `yarn` command on PATH)"
)


def use_cluster() -> None:
    """Point this process (and the skein driver it starts) at the cluster.

    ``$HADOOP_CONF_DIR`` wins (a real cluster); otherwise the local cluster of
    ``tfyarn cluster start``, if it is running, is put into ``os.environ``.

    Raises
    ------
    ClusterError
        Neither is available, or ``$HADOOP_CONF_DIR`` is missing, empty or
        lacks ``core-site.xml``/``yarn-site.xml`` (Hadoop would silently use
        its defaults: a ResourceManager on 0.0.0.0).
    """
    conf_dir = explicit_conf_dir()
    if conf_dir:
        check_conf_dir(conf_dir)
        return
    from tfyarn.cluster import use_local_cluster

    try:
        use_local_cluster()
    except ClusterError:
        raise ClusterError(NO_CLUSTER) from None
    conf_dir = explicit_conf_dir()
    if not conf_dir:  # no local cluster running
        raise ClusterError(NO_CLUSTER)
    check_conf_dir(conf_dir)


def conf_dir() -> str:
    """The configuration directory :func:`use_cluster` chose (call it first)."""
    chosen = explicit_conf_dir()
    if not chosen:
        raise ClusterError(NO_CLUSTER)
    return chosen


def java_environ() -> dict[str, str]:
    """The environment for a Java YARN client: ours, reading the bounded config.

    Call after :func:`use_cluster`.
    """
    chosen = explicit_conf_dir()
    if not chosen:
        return dict(os.environ)
    bounded = hadoop_conf.bounded_conf_dir(chosen, hadoop_conf.yarn_timeout())
    return {**os.environ, CONF_DIR_ENV: str(bounded)}
