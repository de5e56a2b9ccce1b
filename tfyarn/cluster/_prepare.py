"""Before a local cluster's daemons start: its base dir checked, its
configuration written (one per host when it has hosts of its own)."""

from __future__ import annotations

import shutil
from pathlib import Path

from tfyarn.cluster import _gpus, _lce, _netns, _render
from tfyarn.cluster._secure import SecureCluster
from tfyarn.cluster._secure_conf import merge_properties
from tfyarn.cluster._settings import ClusterSettings
from tfyarn.errors import ClusterError

# HDFS blocks, container files and logs need room; below this, refuse to start.
MIN_FREE_DISK_BYTES = 1 << 30


def check_base_dir(base_dir: Path) -> None:
    """Refuse a base dir Hadoop's configuration cannot name, or a full disk.

    Raises
    ------
    ClusterError
        Naming the problem and how to choose another base dir.
    """
    # Hadoop lists directories comma-separated and turns them into URIs.
    bad = sorted({c for c in str(base_dir) if c in ", \t\n%#"})
    if bad:
        raise ClusterError(
            f"the cluster's base dir {str(base_dir)!r} contains "
            f"{' '.join(repr(c) for c in bad)}, which Hadoop's configuration "
            "cannot carry; choose another with `--base-dir` or "
            "$TFYARN_CLUSTER_HOME."
        )
    free = shutil.disk_usage(base_dir).free
    if free < MIN_FREE_DISK_BYTES:
        raise ClusterError(
            f"only {free / 2**20:.0f} MiB free on the disk holding {base_dir}; "
            "HDFS and the NodeManager need at least 1 GiB to store blocks, "
            "container files and logs. Free some space, or start the cluster "
            "elsewhere with `tfyarn cluster start --base-dir DIR`."
        )


def wipe_recovery_stores(base_dir: Path) -> None:
    """Empty the ResourceManager's and NodeManagers' recovery stores.

    For a start of a stopped cluster: `stop` ended every container, so what
    the stores hold would come back as applications without containers,
    which YARN would then start again as new attempts.
    """
    for store in _render.recovery_stores(base_dir):
        shutil.rmtree(store, ignore_errors=True)


def host_dir(base_dir: Path, host: _netns.Host) -> Path:
    """Where one host keeps its configuration, data and logs."""
    return base_dir / "nodes" / host.name


def write_config(
    base_dir: Path,
    settings: ClusterSettings,
    lay: _netns.Layout | None,
    lib_dir: Path,
) -> None:
    """The cluster's configuration: the client's and the daemons' in
    ``base_dir/conf``, and with hosts (``lay``) one more per host."""
    conf_dir = base_dir / "conf"
    write_gpu_standins(base_dir, settings, lay)
    if lay is None:
        _render.write_config(settings, base_dir=base_dir, lib_dir=lib_dir)
        if settings.secure:
            SecureCluster(base_dir, settings).write_config(conf_dir)
        if settings.container_executor:
            _use_container_executor(
                base_dir, Path(settings.container_executor), lib_dir
            )
        return
    # The client's (and the master daemons') configuration ...
    _render.write_config(
        settings,
        base_dir=base_dir,
        lib_dir=lib_dir,
        master_address=lay.master_address,
        node_host=lay.master_host,
        node_address=lay.master_address,
    )
    # ... and one per host: its own name, address and directories.
    for h in lay.hosts:
        _render.write_config(
            settings,
            base_dir=base_dir,
            lib_dir=lib_dir,
            conf=host_dir(base_dir, h) / "conf",
            master_address=lay.master_address,
            node_host=h.host,
            node_address=h.address,
            node_dir=host_dir(base_dir, h),
        )


def write_gpu_standins(
    base_dir: Path, settings: ClusterSettings, lay: _netns.Layout | None
) -> None:
    """Each node's stand-in ``nvidia-smi`` (``--gpus``), which YARN's GPU
    plugin runs to discover the node's devices."""
    if not _gpus.uses_plugin(settings):
        return
    nodes = [("local", base_dir)] if lay is None else []
    nodes += [(h.name, host_dir(base_dir, h)) for h in (lay.hosts if lay else [])]
    for name, node_dir in nodes:
        _gpus.write_standin(node_dir, name, settings.gpus, seed=str(base_dir))


def _use_container_executor(base_dir: Path, executor: Path, lib_dir: Path) -> None:
    """The NodeManager on the LinuxContainerExecutor with Docker (checked,
    its configuration written, its --checksetup passed)."""
    conf_dir = base_dir / "conf"
    props = _lce.prepare(
        executor,
        local_dirs=[base_dir / "data" / "nm-local"],
        log_dirs=[base_dir / "logs" / "containers"],
        read_only=[conf_dir],
        registries=list(_lce.TRUSTED_REGISTRIES),
        readable=[conf_dir, lib_dir],
    )
    site = conf_dir / "yarn-site.xml"
    site.write_text(merge_properties(site.read_text(), props, "container-executor"))
