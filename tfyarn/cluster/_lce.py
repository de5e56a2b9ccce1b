"""The local cluster's NodeManager on YARN's LinuxContainerExecutor with the
Docker runtime (``tfyarn cluster start --container-executor PATH``).

YARN runs Docker containers only through ``container-executor``, a setuid C
program that Hadoop distributions ship and no package registry carries. Given
one, the NodeManager is configured for it (yarn-site), its own configuration
file is written where it reads it, and everything it insists on is checked
first, each problem one line naming the path and the fix, before its own
``--checksetup`` and before the NodeManager starts. Containers run as the
single local user ``nobody`` (``nonsecure-mode.local-user``; container-executor
never runs one as root), so what they read (the configuration, Hadoop's jars,
the job's Python) must be readable by others.
"""

from __future__ import annotations

import grp
import os
import stat
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from tfyarn.errors import ClusterError

LCE = "org.apache.hadoop.yarn.server.nodemanager.LinuxContainerExecutor"
# Where Hadoop's build makes container-executor read its configuration: the
# compiled-in HADOOP_CONF_DIR ``../etc/hadoop``, relative to the binary.
CFG_RELATIVE = Path("../etc/hadoop/container-executor.cfg")
# The first line of a file tfyarn wrote: only such a file is ever rewritten.
MARKER = "# written by tfyarn cluster start --container-executor"
CHECKSETUP_TIMEOUT_S = 30.0
DOCKER_NETWORKS = ("host", "bridge", "none")
# The capabilities YARN gives a Docker container by default
# (yarn.nodemanager.runtime.linux.docker.capabilities): container-executor
# refuses any it is not told to allow.
CAPABILITIES = (
    "CHOWN",
    "DAC_OVERRIDE",
    "FSETID",
    "FOWNER",
    "MKNOD",
    "NET_RAW",
    "SETGID",
    "SETUID",
    "SETFCAP",
    "SETPCAP",
    "NET_BIND_SERVICE",
    "SYS_CHROOT",
    "KILL",
    "AUDIT_WRITE",
)
# Who containers run as (container-executor refuses root): YARN's default.
CONTAINER_USER = "nobody"
# Images the local cluster trusts (prefix match, docker-util.c): Docker's
# top-level images and the names `tfyarn image build` and the tests use. An
# untrusted image runs without mounts, so not at all for YARN.
TRUSTED_REGISTRIES = ("library", "local", "tfyarn", "tfyarn-test")


def cfg_path(executor: Path) -> Path:
    """Where ``executor`` reads its configuration (symlinks resolved, as it does)."""
    real = executor.resolve()
    return Path(os.path.normpath(real.parent / CFG_RELATIVE))


def yarn_properties(
    executor: Path, group: str, *, docker: str = "/usr/bin/docker"
) -> dict[str, str]:
    """The yarn-site properties of a NodeManager on this executor with Docker."""
    prefix = "yarn.nodemanager.runtime.linux"
    return {
        "yarn.nodemanager.container-executor.class": LCE,
        "yarn.nodemanager.linux-container-executor.path": str(executor),
        "yarn.nodemanager.linux-container-executor.group": group,
        # Without Kerberos every container runs as this one local user:
        # container-executor never runs one as root.
        "yarn.nodemanager.linux-container-executor.nonsecure-mode.limit-users": (
            "true"
        ),
        "yarn.nodemanager.linux-container-executor.nonsecure-mode.local-user": (
            CONTAINER_USER
        ),
        "yarn.nodemanager.linux-container-executor.resources-handler.class": (
            "org.apache.hadoop.yarn.server.nodemanager.util.DefaultLCEResourcesHandler"
        ),
        f"{prefix}.allowed-runtimes": "default,docker",
        f"{prefix}.docker.allowed-container-networks": ",".join(DOCKER_NETWORKS),
        f"{prefix}.docker.default-container-network": "host",
        f"{prefix}.docker.host-pid-namespace.allowed": "false",
        f"{prefix}.docker.privileged-containers.allowed": "false",
        f"{prefix}.docker.allowed-container-runtimes": "runc",
        # Images are local (built by `tfyarn image build`): never pulled.
        f"{prefix}.docker.image-update": "false",
    }


def cfg_text(
    group: str,
    *,
    local_dirs: list[Path],
    log_dirs: list[Path],
    read_only: list[Path],
    registries: list[str],
    docker: str = "/usr/bin/docker",
) -> str:
    """container-executor.cfg for this cluster (Hadoop's key=value format)."""
    rw = ",".join(str(p) for p in [*local_dirs, *log_dirs])
    lines = [
        MARKER,
        f"yarn.nodemanager.linux-container-executor.group={group}",
        "banned.users=yarn,mapred,hdfs,bin",
        "min.user.id=1000",
        "feature.tc.enabled=false",
        "[docker]",
        "  module.enabled=true",
        f"  docker.binary={docker}",
        f"  docker.allowed.networks={','.join(DOCKER_NETWORKS)}",
        f"  docker.allowed.ro-mounts={','.join(str(p) for p in read_only)},{rw}",
        f"  docker.allowed.rw-mounts={rw}",
        f"  docker.trusted.registries={','.join(registries)}",
        "  docker.allowed.runtimes=runc",
        f"  docker.allowed.capabilities={','.join(CAPABILITIES)}",
        "  docker.privileged-containers.enabled=false",
        "  docker.host-pid-namespace.enabled=false",
        "",
    ]
    return "\n".join(lines)


def binary_problems(executor: Path) -> list[str]:
    """What container-executor's own checks would refuse about the binary."""
    if not executor.is_file():
        return [f"{executor}: no such file (the path of Hadoop's container-executor)"]
    st = executor.resolve().stat()
    fix = f"chown root:GROUP {executor} && chmod 6050 {executor}"
    problems = []
    if st.st_uid != 0:
        problems.append(f"{executor} must be owned by root (fix: {fix})")
    if not st.st_mode & stat.S_ISUID:
        problems.append(f"{executor} must be setuid (mode 6050; fix: {fix})")
    if st.st_mode & (stat.S_IWOTH | stat.S_IXOTH):
        problems.append(
            f"{executor} must not be writable or executable by others "
            f"(mode 6050; fix: {fix})"
        )
    if st.st_gid != os.getgid():
        problems.append(
            f"{executor} belongs to group {_group_name(st.st_gid)}, but the "
            f"NodeManager runs in group {_group_name(os.getgid())}; they must be "
            f"the same (fix: chgrp {_group_name(os.getgid())} {executor})"
        )
    return problems


def cfg_dir_problems(cfg: Path) -> list[str]:
    """Every directory above ``cfg`` must be root's alone (container-executor's
    check_configuration_permissions): one line per one that is not."""
    problems = []
    for directory in [cfg.parent, *cfg.parent.parents]:
        if not directory.exists():
            continue
        st = directory.stat()
        if st.st_uid != 0 or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
            problems.append(
                f"{directory} (above {cfg.name}) must be owned by root and "
                f"writable by root alone, is uid {st.st_uid} mode "
                f"{stat.S_IMODE(st.st_mode):o} (fix: chown root {directory} && "
                f"chmod go-w {directory}; keep the binary outside /tmp)"
            )
    return problems


def hidden_from_others(path: Path) -> Path | None:
    """The first directory on the way to ``path`` that other users cannot
    enter (or ``path`` itself, if they cannot list it); None if they can."""
    for directory in [*reversed(path.parents), path]:
        mode = directory.stat().st_mode
        if not mode & stat.S_IXOTH or (directory == path and not mode & stat.S_IROTH):
            return directory
    return None


def access_problems(paths: list[Path]) -> list[str]:
    """What containers, running as CONTAINER_USER, could not read."""
    problems = []
    for path in paths:
        blocked = hidden_from_others(path)
        if blocked is not None:
            problems.append(
                f"{path}: containers run as {CONTAINER_USER!r} and cannot read it "
                f"({blocked} is mode {stat.S_IMODE(blocked.stat().st_mode):o}); "
                "keep the cluster (TFYARN_CLUSTER_HOME) and Hadoop's jars "
                "(TFYARN_CACHE_DIR) where other users can read, e.g. under /var/tmp"
            )
    return problems


def write_cfg(cfg: Path, text: str) -> bool:
    """Write ``cfg`` atomically, unless someone else's file is there.

    Returns False when an existing file not written by tfyarn already says
    exactly this; raises when it says something else (it is never replaced).
    """
    if cfg.exists():
        current = cfg.read_text()
        if current == text:
            return False
        if not current.startswith(MARKER):
            raise ClusterError(
                f"{cfg} exists and was not written by tfyarn; it is left as it "
                "is. Move it away to let `cluster start` write its own, or make "
                f"it say:\n{text}"
            )
    cfg.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=cfg.parent, prefix=".container-executor.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, cfg)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return True


def checksetup(executor: Path) -> None:
    """``container-executor --checksetup``: its refusal, in its words, is an error."""
    try:
        done = subprocess.run(
            [str(executor), "--checksetup"],
            capture_output=True,
            text=True,
            timeout=CHECKSETUP_TIMEOUT_S,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ClusterError(
            f"{executor} --checksetup did not answer in {CHECKSETUP_TIMEOUT_S:.0f} s"
        ) from None
    except OSError as exc:
        raise ClusterError(f"cannot run {executor} --checksetup: {exc}") from None
    if done.returncode != 0:
        said = (done.stdout + done.stderr).strip() or "(nothing printed)"
        raise ClusterError(
            f"{executor} --checksetup refused its setup (exit {done.returncode}):"
            f"\n{said}"
        )


def prepare(
    executor: Path,
    *,
    local_dirs: list[Path],
    log_dirs: list[Path],
    read_only: list[Path],
    registries: list[str],
    readable: Sequence[Path] = (),
) -> dict[str, str]:
    """Check the binary, write its configuration, run its --checksetup; return
    the yarn-site properties. Every problem found is reported at once;
    ``readable`` are paths containers must read (the configuration, the jars
    on their classpath)."""
    executor = Path(os.path.abspath(executor))
    if os.geteuid() != 0:
        raise ClusterError(
            "--container-executor needs root: container-executor is setuid root "
            "and the NodeManager that runs it must be allowed to switch users"
        )
    problems = binary_problems(executor)
    cfg = cfg_path(executor) if executor.is_file() else None
    if cfg is not None:
        problems += cfg_dir_problems(cfg)
    problems += access_problems(list(readable))
    if problems:
        raise ClusterError(
            "the cluster cannot run containers through container-executor:\n"
            + "\n".join(f"- {p}" for p in problems)
        )
    assert cfg is not None
    group = _group_name(os.getgid())
    for directory in [*local_dirs, *log_dirs]:
        directory.mkdir(parents=True, exist_ok=True)
    write_cfg(
        cfg,
        cfg_text(
            group,
            local_dirs=local_dirs,
            log_dirs=log_dirs,
            read_only=read_only,
            registries=registries,
        ),
    )
    checksetup(executor)
    return yarn_properties(executor, group)


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def remove_docker_containers(
    names: Sequence[str], *, docker: str = "/usr/bin/docker"
) -> None:
    """``docker rm -f`` the containers YARN's Docker runtime named ``names``
    (it names each after its YARN container id), best effort.

    A NodeManager under supervision leaves them running when it stops; the
    cluster's ``stop`` ends them. Names Docker does not know are skipped.
    """
    if not names or not Path(docker).is_file():
        return
    try:
        subprocess.run(
            [docker, "rm", "-f", *names],
            capture_output=True,
            timeout=60,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        pass  # stop goes on; `docker ps` shows what is left
