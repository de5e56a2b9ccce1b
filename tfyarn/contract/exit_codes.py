"""What an exit code or a NodeManager diagnostic means, in words a user can act on.

A container's end reaches the user as a number ("Application driver failed
with exit code 127, see logs") or as one of YARN's canned sentences. The
client explains them under a failed job's diagnostics; the master may explain
its tasks' ends with the same functions. Everything here is pure (no I/O, no
imports beyond the standard library and :mod:`tfyarn.contract.localization`,
pure too), so both sides can call it anywhere.

Three families of numbers never overlap:

- ``0..255``: a process's own exit status, ``128 + N`` when a shell reports
  death by signal ``N`` (137 = SIGKILL, 143 = SIGTERM);
- ``-1..-64``: death by signal ``N`` as Python's ``subprocess`` reports it (the
  runtime's ``ReportTaskEnd`` uses this form);
- ``<= -100``: YARN's ``ContainerExitStatus``: the NodeManager or the
  scheduler ended the container (lost node, preemption, memory limits).

A fourth family shares ``1..79`` with the first: container-executor's own exit
codes (the LinuxContainerExecutor's setuid binary, which runs containers as
the job's user and starts Docker containers). They mean that only where the
NodeManager's diagnostics show container-executor ran (``main : command
provided``, ``Launch container failed``); :func:`explain_diagnostics` tells
the two apart, :func:`explain_executor_exit` reads them alone.
"""

from __future__ import annotations

import re
import signal

from tfyarn.contract.localization import explain_localization

# The prefix of each explanation line under diagnostics (the master's and the
# client's), so a reader can tell YARN's words from tfyarn's and a status read
# back is not explained twice.
MEANING = "meaning: "

# YARN's ContainerExitStatus (hadoop-yarn-api), the ones a user meets.
_YARN: dict[int, str] = {
    -100: "the container was released: its node was lost or went unhealthy, "
    "or YARN aborted it",
    -101: "the node's local disks failed (YARN's disk health checker)",
    -102: "the scheduler preempted the container to give its resources to "
    "another queue; submit to a queue with guaranteed capacity or retry",
    -103: "the container used more virtual memory than YARN allows; ask for "
    "more memory (--<role>_memory) or raise yarn.nodemanager.vmem-pmem-ratio",
    -104: "the container used more physical memory than it asked for; ask for "
    "more memory (--<role>_memory, --am_memory for the master)",
    -105: "the application master killed the container",
    -106: "the ResourceManager killed the container",
    -107: "the container was killed because its application had ended",
    -108: "the container scheduler killed it (opportunistic container displaced)",
    -109: "the container wrote more logs than YARN allows",
    -1000: "YARN reported no valid exit status: the container never ran its "
    "command, most often because YARN could not localize one of its files "
    "(the diagnostics name it)",
}
# YARN's exit status of a container that never ran: the localizer's words,
# when there are any, say more than the number.
_NEVER_RAN = -1000

# The ContainerExitStatus values of a container YARN took back through no fault
# of the job (ABORTED: released by the framework, its node lost or
# decommissioned; DISKS_FAILED; PREEMPTED; KILLED_BY_RESOURCEMANAGER;
# KILLED_BY_CONTAINER_SCHEDULER), each with the word the status uses for it.
# The memory limits (-103, -104) and too many logs (-109) are the job's own
# doing; -105 is the master's own kill and -107 comes after the job ended.
DISRUPTIONS: dict[int, str] = {
    -100: "released",
    -101: "disks failed",
    -102: "preempted",
    -106: "killed by the ResourceManager",
    -108: "displaced",
}
# How the ResourceManager and the NodeManager word these ends (hadoop-yarn's
# SchedulerUtils, ContainerManagerImpl, ContainerLaunch): skein hands the
# master these diagnostics for a container that ended with a status <= 0,
# never the number.
_STATUS_PHRASES: tuple[tuple[re.Pattern[str], int], ...] = (
    (re.compile(r"running beyond physical memory limits", re.IGNORECASE), -104),
    (re.compile(r"running beyond virtual memory limits", re.IGNORECASE), -103),
    (re.compile(r"\bpreempted\b", re.IGNORECASE), -102),
    (re.compile(r"released on a \*?lost\*? node", re.IGNORECASE), -100),
    (re.compile(r"Container Killed by ResourceManager", re.IGNORECASE), -106),
    (
        re.compile(r"most of the disks failed|disks? (failed|are bad)", re.IGNORECASE),
        -101,
    ),
)

# The master's entry exits with it when its Python lacks modules the master
# needs (am/dependencies.py: EXIT_MISSING_MODULES, sysexits.h's EX_CONFIG).
MASTER_LACKS_MODULES = 78
_TFYARN: dict[int, str] = {
    MASTER_LACKS_MODULES: "exited with EX_CONFIG (78), a configuration error; "
    "tfyarn's master exits so when its Python lacks modules it needs (--python "
    "naming an interpreter without tfyarn installed): its log names them",
}

_SHELL: dict[int, str] = {
    126: "the command was found but is not executable (permission denied, or "
    "not a program for this machine)",
    127: "the command was not found on the node: a wrong interpreter path "
    "(--python), a program missing from the node's PATH, or a shipped "
    "environment (--python_env) whose base interpreter the node lacks (its "
    "log names it)",
}

_SIGNALS: dict[int, str] = {
    signal.SIGKILL: "killed (SIGKILL): by YARN for exceeding its memory, by "
    "the kernel's out-of-memory killer, or by a kill without grace",
    signal.SIGTERM: "terminated (SIGTERM): stopped by tfyarn, YARN or an administrator",
    signal.SIGINT: "interrupted (SIGINT)",
    signal.SIGSEGV: "crashed with a segmentation fault (SIGSEGV), usually in "
    "native code (TensorFlow, a C extension)",
    signal.SIGABRT: "aborted (SIGABRT), usually a failed check in native code",
    signal.SIGBUS: "crashed with a bus error (SIGBUS), often a full /dev/shm "
    "or a truncated memory-mapped file",
}

# container-executor's exit codes (hadoop-yarn-server-nodemanager's
# native/container-executor/impl/util.h, enum errorcodes), the ones a job meets.
_WHERE_DOCKER_SAYS = (
    "Docker's own message is in the task's YARN files "
    "(tfyarn logs APP --task ROLE:N --yarn_files: stderr.txt)"
)
_EXECUTOR: dict[int, str] = {
    6: "container-executor could not switch to the job's user (setuid failed: "
    "the binary must be owned by root, group the NodeManager's, mode 6050)",
    7: "container-executor could not run the container (unless the program "
    "itself exited 7); with Docker this is "
    "`docker run` failing: the image is not on the node and cannot be pulled "
    "(a misspelt name or tag, or no registry access: load it on every node), "
    "or the Docker runtime asked for (--docker_runtime) is unknown to the "
    "node's dockerd; " + _WHERE_DOCKER_SAYS,
    20: "container-executor could not set up the job's user on the node (its "
    "local or log dirs)",
    22: "the NodeManager's container-executor binary has wrong ownership or "
    "permissions (root-owned, group the NodeManager's, mode 6050): a cluster "
    "setup problem for its administrators",
    24: "container-executor.cfg is missing or invalid (it and every parent "
    "directory must be root-owned and not writable by group or others): a "
    "cluster setup problem for its administrators",
    29: "container-executor refused the Docker command the NodeManager asked "
    "for (its diagnostics say which part: docker error code=N)",
    32: "a feature the container needs is disabled in container-executor.cfg "
    "(for Docker: [docker] module.enabled=true)",
    35: "container-executor could not create the container's work directories",
    36: "container-executor could not create the container's log directories",
    39: "container-executor could not sanitize the Docker command",
    40: "the Docker image is invalid",
    44: "docker exec failed",
    49: "a Docker mount is invalid",
    50: "a read-only Docker mount is not allowed on this cluster "
    "(docker.allowed.ro-mounts in container-executor.cfg)",
    51: "a read-write Docker mount is not allowed on this cluster "
    "(docker.allowed.rw-mounts in container-executor.cfg; mount it :ro?)",
    52: "a Docker mount's source cannot be accessed on the node",
    56: "the Docker image name is not one YARN accepts",
    60: "the cluster does not allow the host network for Docker containers, "
    "which tfyarn's tasks need (docker.allowed.networks in "
    "container-executor.cfg and yarn.nodemanager.runtime.linux.docker."
    "allowed-container-networks in yarn-site.xml must list host)",
    63: "privileged Docker containers are disabled on this cluster",
    67: "the Docker volume driver is not allowed on this cluster",
    72: "the Docker image is not from a registry this cluster trusts "
    "(docker.trusted.registries in container-executor.cfg)",
    74: "the Docker runtime (--docker_runtime) is not allowed on this cluster "
    "(docker.allowed.runtimes in container-executor.cfg)",
}
# NodeManager diagnostics that show container-executor ran: only then is a
# small exit code its own rather than the script's.
_EXECUTOR_RAN = re.compile(
    r"main : command provided|Launch container failed|docker error code=|"
    r"container-executor",
    re.IGNORECASE,
)
_DOCKER_ERROR = re.compile(r"docker error code=(\d+)", re.IGNORECASE)

# What the NodeManager and container-executor say when they refuse a Docker
# container (DockerLinuxContainerRuntime, OCIContainerRuntime, docker-util.c,
# container-executor.c's check_user) and what dockerd says when `docker run`
# fails; the same cause may show in several of them, so each yields its words once.
_DOCKER_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"Disallowed network:\s*'([^']*)'|requested network in allowed"),
        _EXECUTOR[60],
    ),
    (
        re.compile(r"Disallowed runtime:\s*'([^']*)'|requested runtime in allowed"),
        _EXECUTOR[74],
    ),
    (
        re.compile(
            r"doesn't match docker image name pattern|Invalid docker image name"
        ),
        (
            "the Docker image name is not one YARN accepts: "
            "[REGISTRY[:PORT]/]PATH[:TAG], lower-case PATH, no digest"
        ),
    ),
    (re.compile(r"is not trusted|for untrusted image"), _EXECUTOR[72]),
    (
        re.compile(r"below the minimum allowed (\d+)"),
        (
            "the job's user has a uid below container-executor's min.user.id, so "
            "it may not run containers: submit as a regular user, or the "
            "administrators list it in allowed.system.users (container-executor.cfg)"
        ),
    ),
    (
        re.compile(r"Requested user \S+ is banned"),
        (
            "the job's user is in container-executor's banned.users "
            "(container-executor.cfg): submit as another user"
        ),
    ),
    (
        re.compile(r"User \S+ not found"),
        (
            "the job's user does not exist on the node, so container-executor "
            "cannot run its containers: the user must exist on every node"
        ),
    ),
    (
        re.compile(
            r"Unable to find image|No such image|pull access denied|"
            r"manifest unknown|repository does not exist",
            re.IGNORECASE,
        ),
        (
            "the Docker image is not on the node and could not be pulled: load it "
            "on every node (docker load / docker pull) or fix its name and tag"
        ),
    ),
    (
        re.compile(r"unknown or invalid runtime name", re.IGNORECASE),
        (
            "the node's dockerd has no such runtime (--docker_runtime): install "
            "it (nvidia-container-runtime for nvidia) or leave the option out"
        ),
    ),
    (
        re.compile(r"Requested runtime not allowed|Invalid runtime set in"),
        (
            "the NodeManager does not allow the Docker runtime: yarn-site.xml's "
            "yarn.nodemanager.runtime.linux.allowed-runtimes must list docker (and "
            "its container executor be the LinuxContainerExecutor)"
        ),
    ),
    (
        re.compile(
            r"Invalid docker (?:rw |ro )?mount|Invalid (?:read-only |read-write )?mount"
        ),
        (
            "a Docker mount (--docker_mount) is malformed or not allowed on this "
            "cluster (docker.allowed.ro-mounts / rw-mounts in container-executor.cfg)"
        ),
    ),
    (
        re.compile(r"Feature disabled: docker|docker is disabled", re.IGNORECASE),
        _EXECUTOR[32],
    ),
)

# YARN's sentences in diagnostics (NodeManager, ResourceManager), in the order
# they are checked; each yields its explanation once.
_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"running beyond physical memory limits", re.IGNORECASE), _YARN[-104]),
    (re.compile(r"running beyond virtual memory limits", re.IGNORECASE), _YARN[-103]),
    (re.compile(r"preempted", re.IGNORECASE), _YARN[-102]),
    (re.compile(r"released on a \*?lost\*? node", re.IGNORECASE), _YARN[-100]),
    (
        re.compile(r"(disks? (failed|are bad)|local-dirs (are|is) bad)", re.IGNORECASE),
        _YARN[-101],
    ),
)
# "exit code 127", "Exit code: 137", "exitCode=-104", "exit status -102".
_EXIT = re.compile(r"\bexit[ _]?(?:code|status)\b\s*[:=]?\s*(-?\d+)", re.IGNORECASE)


def explain_exit(code: int | None) -> str:
    """What an exit code means, or "" when it means nothing in particular.

    0 and ordinary error codes (1, 2, ...: the program's own) get "".

    Examples
    --------
    >>> explain_exit(127)[:37]
    'the command was not found on the node'
    >>> explain_exit(-104).startswith("the container used more physical memory")
    True
    >>> explain_exit(143) == explain_exit(-15)
    True
    >>> explain_exit(1)
    ''
    """
    if code is None:
        return ""
    if code in _YARN:
        return _YARN[code]
    if code in _SHELL:
        return _SHELL[code]
    if code in _TFYARN:
        return _TFYARN[code]
    if 128 < code < 128 + 65:
        return _signal_words(code - 128)
    if -65 < code < 0:
        return _signal_words(-code)
    return ""


def explain_diagnostics(diagnostics: str, *, node: str = "") -> list[str]:
    """One line per thing in YARN's diagnostics that a number or phrase hides.

    Each exit code mentioned (``exit code 127``) and each of YARN's canned
    sentences (``running beyond physical memory limits``) contributes its
    explanation, prefixed by the code; duplicates are dropped, order kept.
    Where the diagnostics show container-executor ran, a small exit code is
    its own (:func:`explain_executor_exit`), and its refusals of a Docker
    container (untrusted image, network, user, image not found) are named.
    A file YARN could not localize is named with the reason
    (:func:`tfyarn.contract.localization.explain_localization`), instead of
    exit status -1000's "no valid exit status". ``node``: the container's
    node, when the caller knows it, for those lines.

    Examples
    --------
    >>> explain_diagnostics("Application driver failed with exit code 127")[0][:32]
    'exit code 127: the command was n'
    >>> explain_diagnostics("everything fine")
    []
    """
    out: list[str] = []
    said: set[str] = set()
    executor = bool(_EXECUTOR_RAN.search(diagnostics))
    # The specific refusal first: it names the cause a bare code only hints at.
    for pattern, words in _DOCKER_PHRASES:
        if pattern.search(diagnostics) and words not in said:
            said.add(words)
            out.append(words)
    for match in _DOCKER_ERROR.finditer(diagnostics):
        code = int(match.group(1))
        words = _EXECUTOR.get(code, "")
        if words and words not in said:
            said.add(words)
            out.append(f"container-executor's docker error {code}: {words}")
    localized = explain_localization(diagnostics, node=node)
    out += localized
    for match in _EXIT.finditer(diagnostics):
        code = int(match.group(1))
        if code == _NEVER_RAN and localized:
            continue  # the localizer's words say why, and which file
        words = (executor and explain_executor_exit(code)) or explain_exit(code)
        if words and words not in said:
            said.add(words)
            out.append(f"exit code {code}: {words}")
    for pattern, words in _PHRASES:
        if pattern.search(diagnostics) and words not in said:
            said.add(words)
            out.append(words)
    return out


# How a task says HDFS would not authenticate it: hdfs-native (GSSAPI, after
# the NameNode refused its token), Hadoop's Java client, tfyarn.data.fs.
_HDFS_AUTH = re.compile(
    r"GSS_S_NO_CRED|No Kerberos credentials|cannot authenticate via|"
    r"InvalidToken|token \(.*\) (is expired|can't be found)|"
    r"delegation token (for \S+ )?(expired|was refused)|no delegation token for",
    re.IGNORECASE,
)


def hdfs_auth_failure(text: str) -> bool:
    """Whether ``text`` (a task's stderr) shows HDFS refusing its credentials.

    Examples
    --------
    >>> hdfs_auth_failure('RuntimeError: GSSAPIError(... "GSS_S_NO_CRED" ...)')
    True
    >>> hdfs_auth_failure("ValueError: bad shape")
    False
    """
    return bool(_HDFS_AUTH.search(text))


def explain_executor_exit(code: int | None) -> str:
    """What container-executor's exit ``code`` means, or "" for one of no note.

    Only meaningful when container-executor is known to have ended with it
    (see :func:`explain_diagnostics`): a script may exit 7 too.

    Examples
    --------
    >>> explain_executor_exit(24)[:37]
    'container-executor.cfg is missing or '
    >>> explain_executor_exit(0)
    ''
    """
    return _EXECUTOR.get(code, "") if code is not None else ""


def yarn_exit_status(diagnostics: str) -> int | None:
    """YARN's ContainerExitStatus (``<= -100``) that its words on a container show.

    An exit status YARN names (``Exit code: -102``) first, else one of its
    canned sentences; None when the words show none (a script's own exit).

    Examples
    --------
    >>> yarn_exit_status("Container preempted by scheduler")
    -102
    >>> yarn_exit_status("Exit code: -104")
    -104
    >>> yarn_exit_status("Container failed during execution, see logs") is None
    True
    """
    for code in exit_codes(diagnostics):
        if code <= -100:
            return code
    for pattern, code in _STATUS_PHRASES:
        if pattern.search(diagnostics):
            return code
    return None


def disruption(diagnostics: str) -> str:
    """The word for YARN taking a container back, as its words show ("" if not).

    "preempted", "released" (its node lost or decommissioned), "disks failed",
    "killed by the ResourceManager" or "displaced": ends that are not the
    job's fault (:data:`DISRUPTIONS`). A container over its memory is.

    Examples
    --------
    >>> disruption("Container preempted by scheduler")
    'preempted'
    >>> disruption("Container [pid=1] is running beyond physical memory limits")
    ''
    """
    status = yarn_exit_status(diagnostics)
    return DISRUPTIONS.get(status, "") if status is not None else ""


def exit_codes(diagnostics: str) -> list[int]:
    """Every exit code mentioned in ``diagnostics``, in order."""
    return [int(m.group(1)) for m in _EXIT.finditer(diagnostics)]


def _signal_words(number: int) -> str:
    if number in _SIGNALS:
        return _SIGNALS[number]
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"ended by signal {number}"
    return f"ended by signal {number} ({name})"
