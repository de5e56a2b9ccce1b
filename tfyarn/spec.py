"""The job specification: what to run, how many tasks of each role, and how.

A :class:`JobSpec` is built by the client (from ``conf/``, a user file and the
command line) or directly in Python, validated before anything is submitted,
compiled to a ``skein.ApplicationSpec`` by the client
(:func:`tfyarn.client.compile.to_skein`), and read back inside the cluster (by
the master and by every task) from the ``TFYARN_JOB`` variable. The master and
every task import this module, so it holds the job and its rules only: no
skein, no packing, nothing of the client.

Defaults and bounds are not written here: a field left out takes the shipped
default of its option in ``conf/tfyarn.yaml``, and every field is checked
against the bounds in ``conf/tfyarn-schema.yaml`` (both read by
:mod:`tfyarn._options`), so ``JobSpec(script=...)`` is the job ``tfyarn submit
SCRIPT`` makes.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import keyword
import os
import re
import shlex
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from tfyarn import _options, _surface
from tfyarn._launch import ENV_DIR, PEX_FILE
from tfyarn.contract import docker as _docker
from tfyarn.errors import SpecError


class Role(str, Enum):
    """A TensorFlow task type. Values are TensorFlow's own job names."""

    CHIEF = "chief"
    WORKER = "worker"
    PS = "ps"
    EVALUATOR = "evaluator"

    def in_cluster_spec(self) -> bool:
        """Evaluators are never listed in TensorFlow's ``cluster``."""
        return self is not Role.EVALUATOR


# The order tasks are requested and listed in.
ROLES: tuple[Role, ...] = (Role.CHIEF, Role.PS, Role.WORKER, Role.EVALUATOR)


class RestartPolicy(str, Enum):
    """Which failures the master restarts (``restart_policy``; am/policy.py)."""

    # Any failure within max_restarts, but never the same script error twice.
    ON_FAILURE = "on_failure"
    # Only transient failures (signals, lost containers, nodes or heartbeats)
    # and retry_exit_codes, within max_restarts.
    TRANSIENT_ONLY = "transient_only"
    NEVER = "never"


def _restart_policy(value: object) -> RestartPolicy:
    try:
        return RestartPolicy(str(getattr(value, "value", value)).strip().lower())
    except ValueError:
        known = ", ".join(p.value for p in RestartPolicy)
        raise SpecError(
            f"restart_policy must be one of {known}, got {value!r}"
        ) from None


def _exit_codes(value: object) -> tuple[int, ...]:
    """``retry_exit_codes``: whole numbers 1..255, given as numbers or "75,76"."""
    items = value.split(",") if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise SpecError(f"retry_exit_codes must be a list of exit codes, got {value!r}")
    codes = []
    for item in items:
        for part in str(item).split(","):
            try:
                code = int(part)
            except ValueError:
                raise SpecError(
                    f"retry_exit_codes: {part!r} is not an exit code (1 to 255)"
                ) from None
            if not 0 < code < 256 or isinstance(item, bool):
                raise SpecError(
                    f"retry_exit_codes: {code} is not an exit code a script can "
                    "ask for a restart with (1 to 255; 0 is success)"
                )
            codes.append(code)
    return tuple(sorted(set(codes)))


def _default(key: str) -> Callable[[], Any]:
    """A dataclass ``default_factory``: the shipped default of option ``key``."""
    return lambda: _options.default(key)


def _default_layout() -> dict[Role, TaskGroup]:
    return {r: TaskGroup(count=_options.default(f"num_{r.value}")) for r in ROLES}


# JobSpec fields whose option has another name.
_OPTION_OF = {"am_memory_mib": "am_memory", "docker_mounts": "docker_mount"}
# Per role, TaskGroup field -> option name pattern.
_ROLE_OPTIONS = {
    "count": "num_{}",
    "memory_mib": "{}_memory",
    "vcores": "{}_vcores",
    "gpus": "{}_gpus",
    "docker_image": "{}_docker_image",
    "node_label": "{}_node_label",
}
# A role's docker_image that runs its tasks on the node despite docker_image.
NO_DOCKER = "none"
# What YARN accepts as a node label (CommonNodeLabelsManager's rule).
_NODE_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,254}$")


def node_label(value: object, *, option: str = "node_label") -> str:
    """A YARN node label, or "" for none.

    Raises
    ------
    SpecError
        Naming the option and the rule.
    """
    label = "" if value is None else str(value).strip()
    if label and not _NODE_LABEL.match(label):
        raise SpecError(
            f"{option} {label!r} is not a YARN node label: a letter or digit, then "
            "letters, digits, '-' and '_' (one label, not an expression)"
        )
    return label


@dataclass(frozen=True, kw_only=True)
class TaskGroup:
    """How many tasks of one role, and the YARN resources of each.

    ``memory_mib`` is mebibytes; YARN rounds it up to its minimum allocation.
    ``gpus`` asks for the countable ``yarn.io/gpu`` resource. ``node_label``
    is the YARN node label its containers ask for ("": the job's
    ``node_label``). ``docker_image`` is the role's own image (``""``: the
    job's ``docker_image``; ``"none"``: on the node itself). A field left
    ``None`` takes its role's shipped default (``ps_memory``, ...) once the
    group is part of a :class:`JobSpec`; every group of a JobSpec has them all.
    """

    count: int = 0
    memory_mib: int | None = None
    vcores: int | None = None
    gpus: int | None = None
    docker_image: str | None = None
    node_label: str | None = None

    def __post_init__(self) -> None:
        if self.docker_image is not None and not isinstance(self.docker_image, str):
            raise SpecError(f"docker_image must be a string, got {self.docker_image!r}")
        for name in ("count", "memory_mib", "vcores", "gpus"):
            value = getattr(self, name)
            if value is None and name != "count":
                continue
            if not isinstance(value, int) or isinstance(value, bool):
                raise SpecError(f"{name} must be a whole number, got {value!r}")
            if value < 0:
                raise SpecError(f"{name} must not be negative, got {value}")
        if self.node_label is not None:
            object.__setattr__(self, "node_label", node_label(self.node_label))

    def for_role(self, role: Role) -> TaskGroup:
        """This group with the role's defaults filled in, checked against its bounds."""
        filled: dict[str, Any] = {}
        for name, pattern in _ROLE_OPTIONS.items():
            key = pattern.format(role.value)
            value = getattr(self, name)
            if value is None:
                value = _options.default(key)
            if name == "node_label":
                filled[name] = node_label(value, option=key)
                continue
            if not isinstance(value, str):
                _check_bounds(key, value)
            filled[name] = value
        return TaskGroup(**filled)

    def resources(self) -> tuple[int, int, int]:
        """(memory MiB, vcores, GPUs) of each task; the group must be a JobSpec's."""
        if self.memory_mib is None or self.vcores is None or self.gpus is None:
            raise SpecError(
                "this task group's resources are its role's defaults; "
                "read them from JobSpec.group(role)"
            )
        return self.memory_mib, self.vcores, self.gpus


@dataclass(frozen=True, kw_only=True)
class JobSpec:
    """A whole tfyarn job. Durations are seconds.

    Every field but ``script`` defaults to its option's value in
    ``conf/tfyarn.yaml`` (``tasks``: ``num_worker`` workers and so on); given
    ``tasks``, a role left out has no tasks.
    """

    script: str
    args: tuple[str, ...] = ()
    name: str = field(default_factory=_default("name"))
    tasks: Mapping[Role, TaskGroup] = field(default_factory=_default_layout)
    queue: str = field(default_factory=_default("queue"))
    # The YARN node label of every role without one of its own ("": none).
    node_label: str = field(default_factory=_default("node_label"))
    env: Mapping[str, str] = field(default_factory=_default("env"))
    # Extra files for every task: local paths or hdfs:// URLs.
    files: tuple[str, ...] = field(default_factory=_default("files"))
    # HDFS name services besides fs.defaultFS: skein's file_systems, so a
    # secure cluster's delegation tokens for them are obtained at submission.
    hdfs_namenodes: tuple[str, ...] = field(default_factory=_default("hdfs_namenodes"))
    # The interpreter tasks and the master run with; empty: this interpreter.
    python: str = field(default_factory=_default("python"))
    # The Python environment shipped with the job (tfyarn/client/pyenv/):
    # "auto", a virtualenv or conda directory, an archive or an hdfs:// archive;
    # empty: none (the local cluster's default; see pyenv.choose).
    python_env: str = field(default_factory=_default("python_env"))
    # Append --ps_hosts/--worker_hosts/--job_name/--task_index to the script's args.
    legacy_flags: bool = field(default_factory=_default("legacy_flags"))
    # Modules the script's interpreter imports while the cluster forms (see
    # tfyarn/runtime/_bootstrap/preload.py); empty: it starts after formation.
    preimport: tuple[str, ...] = field(default_factory=_default("preimport"))
    # A log dir the master runs TensorBoard on (am/tensorboard.py); empty: none.
    tensorboard: str = field(default_factory=_default("tensorboard"))
    am_memory_mib: int = field(default_factory=_default("am_memory"))
    am_vcores: int = field(default_factory=_default("am_vcores"))
    max_am_attempts: int = field(default_factory=_default("max_am_attempts"))
    # Recovery and liveness (restarts, registration, heartbeats, stalls).
    max_restarts: int = field(default_factory=_default("max_restarts"))
    # Containers YARN takes back (preemption, lost nodes) are recovered outside
    # max_restarts, up to this many times (am/policy.py: decide).
    max_disruptions: int = field(default_factory=_default("max_disruptions"))
    # Elastic jobs (am/resize.py): the fewest workers the job may shrink to
    # when YARN cannot give a lost worker's container back; 0: never shrink.
    min_worker: int = field(default_factory=_default("min_worker"))
    # Which failures are restarted, and the exit codes that ask for a restart
    # (am/policy.py: decide).
    restart_policy: RestartPolicy = field(default_factory=_default("restart_policy"))
    retry_exit_codes: tuple[int, ...] = field(
        default_factory=_default("retry_exit_codes")
    )
    registration_timeout: float = field(
        default_factory=_default("registration_timeout")
    )
    # Gang allocation (am/gang.py): a job still short of containers this long
    # into forming its cluster gives back what it holds and asks again later;
    # 0: hold them until registration_timeout.
    allocation_timeout: float = field(default_factory=_default("allocation_timeout"))
    heartbeat_interval: float = field(default_factory=_default("heartbeat_interval"))
    heartbeat_timeout: float = field(default_factory=_default("heartbeat_timeout"))
    # 0: no stall detection.
    stall_timeout: float = field(default_factory=_default("stall_timeout"))
    # How long other workers may run after the lead ends.
    worker_grace: float = field(default_factory=_default("worker_grace"))
    # SIGTERM to SIGKILL when the master stops a task.
    stop_grace: float = field(default_factory=_default("stop_grace"))
    # YARN's Docker runtime (tfyarn/contract/docker.py): every task's image
    # (a role's own in its TaskGroup), host paths mounted into it, the Docker
    # runtime (nvidia), and the interpreter inside the image. The master
    # always runs on the node: skein's Java AM needs the node's Java.
    docker_image: str = field(default_factory=_default("docker_image"))
    docker_mounts: tuple[str, ...] = field(default_factory=_default("docker_mount"))
    docker_runtime: str = field(default_factory=_default("docker_runtime"))
    docker_python: str = field(default_factory=_default("docker_python"))
    # A server set (`tfyarn servers`, tfyarn/client/servers.py): every task
    # only serves TensorFlow, the program runs on the gateway. Not options of
    # a job: set by the servers client.
    servers: bool = False
    # Seconds the set stays up without a renewal from its client (am/lease.py);
    # 0: no lease (a job, or a detached set that stays until `tfyarn kill`).
    lease: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.script, (str, os.PathLike)) or not str(self.script):
            raise SpecError(
                "script must be the path of the Python program every task runs, "
                f"got {self.script!r}"
            )
        object.__setattr__(self, "script", os.fspath(self.script))
        given = {Role(k): _as_group(v) for k, v in dict(self.tasks).items()}
        tasks = {r: given.get(r, TaskGroup()).for_role(r) for r in ROLES}
        object.__setattr__(self, "tasks", tasks)
        object.__setattr__(self, "args", script_args(self.args))
        object.__setattr__(self, "files", tuple(self.files))
        object.__setattr__(
            self, "hdfs_namenodes", tuple(_namenode(u) for u in self.hdfs_namenodes)
        )
        object.__setattr__(self, "preimport", tuple(self.preimport))
        object.__setattr__(self, "tensorboard", _logdir(self.tensorboard))
        object.__setattr__(self, "node_label", node_label(self.node_label))
        object.__setattr__(self, "python", self.python or sys.executable)
        object.__setattr__(self, "python_env", str(self.python_env or "").strip())
        for module in self.preimport:
            if not is_module_name(module):
                none = (
                    "--no_preimport" if _surface.on_command_line() else "preimport=[]"
                )
                raise SpecError(
                    f"preimport: {module!r} is not a module name; give dotted "
                    "Python identifiers such as tensorflow or numpy.linalg "
                    f"(or {none} to import nothing early)"
                )
        object.__setattr__(self, "env", {str(k): str(v) for k, v in self.env.items()})
        object.__setattr__(self, "restart_policy", _restart_policy(self.restart_policy))
        object.__setattr__(self, "retry_exit_codes", _exit_codes(self.retry_exit_codes))
        self._check_docker()
        for f in dataclasses.fields(self):
            key = _OPTION_OF.get(f.name, f.name)
            value = getattr(self, f.name)
            if key in _options.schema() and isinstance(value, (int, float)):
                _check_bounds(key, value)

    def _check_docker(self) -> None:
        mounts = []
        for text in self.docker_mounts:
            try:
                mounts.append(_docker.parse_mount(str(text)))
            except ValueError as exc:
                raise SpecError(f"{_surface.option('docker_mount')}: {exc}") from None
        object.__setattr__(self, "docker_mounts", tuple(mounts))
        images = [("docker_image", self.docker_image)] + [
            (f"{r.value}_docker_image", self.group(r).docker_image or "") for r in ROLES
        ]
        for key, image in images:
            problem = image and image != NO_DOCKER and _docker.image_problem(image)
            if problem:
                raise SpecError(f"{_surface.option(key)}: {problem}")
        if self.docker_runtime:
            problem = _docker.runtime_problem(self.docker_runtime)
            if problem:
                raise SpecError(f"{_surface.option('docker_runtime')}: {problem}")
        in_docker = any(self.docker_image_of(r) for r in ROLES if self.count(r))
        if in_docker and not PurePosixPath(self.docker_python).is_absolute():
            raise SpecError(
                f"{_surface.option('docker_python')}: the interpreter inside the "
                f"image must be an absolute path, got {self.docker_python!r}"
            )

    # -- derived ---------------------------------------------------------------

    def docker_image_of(self, role: Role) -> str:
        """The image ``role``'s tasks run in; empty: on the node itself."""
        image = self.group(role).docker_image or self.docker_image
        return "" if image == NO_DOCKER else image

    def docker_env(self, role: Role) -> dict[str, str]:
        """The variables that ask YARN to run ``role``'s tasks in Docker, or none."""
        return _docker.container_env(
            self.docker_image_of(role),
            self.docker_mounts,
            self.docker_runtime,
            gpus=self.group(role).gpus or 0,
        )

    def count(self, role: Role) -> int:
        group = self.tasks.get(role)
        return group.count if group else 0

    def group(self, role: Role) -> TaskGroup:
        return self.tasks[role]

    def node_label_of(self, role: Role) -> str:
        """The node label ``role``'s containers ask for ("": none)."""
        return self.group(role).node_label or self.node_label

    def task_keys(self) -> list[tuple[Role, int]]:
        """Every task, in launch order: chief, ps, workers, evaluator."""
        return [(r, i) for r in ROLES for i in range(self.count(r))]

    def lead_task(self) -> tuple[Role, int]:
        """The task whose success ends the job: the chief, else worker 0."""
        return (Role.CHIEF, 0) if self.count(Role.CHIEF) else (Role.WORKER, 0)

    @property
    def script_name(self) -> str:
        """The script's file name inside every container."""
        return PurePosixPath(self.script).name

    # -- validation --------------------------------------------------------------

    def validate(self, *, check_local_files: bool = True) -> JobSpec:
        """Check rules that span fields; return self so calls can chain."""
        # Counts per role (num_chief 0 or 1, ...) are bounds, checked on construction.
        chief, worker, ps = (self.count(r) for r in (Role.CHIEF, Role.WORKER, Role.PS))
        more_workers = _surface.option("num_worker", "N")
        if ps and not worker:
            raise SpecError(
                f"a parameter-server job needs workers: got num_ps={ps} and "
                f"num_worker=0; set {more_workers} (N >= 1)"
            )
        if self.servers and (chief or self.count(Role.EVALUATOR)):
            raise SpecError(
                "a server set has ps and worker servers only: the coordinator "
                "(chief) is the program on the gateway; evaluators run there too"
            )
        if self.lease < 0:
            raise SpecError(f"lease must be 0 (none) or more seconds, got {self.lease}")
        if chief + worker == 0:
            raise SpecError(
                f"the job has no chief and no worker: set {more_workers} (N >= 1)"
            )
        if self.min_worker > worker:
            raise SpecError(
                f"min_worker={self.min_worker} is more than num_worker={worker}: "
                f"the job could never shrink to it; set "
                f"{_surface.option('min_worker', 'M')} with M <= {worker}"
            )
        if self.legacy_flags and chief:
            legacy = "--legacy_flags" if _surface.on_command_line() else "legacy_flags"
            raise SpecError(
                f"{legacy} describes ps and worker tasks only; TF1 scripts "
                f"treat worker 0 as chief, so use {_surface.option('num_chief', 0)}"
            )
        if check_local_files:
            for what, path in [("script", self.script)] + [
                ("file", f) for f in self.files
            ]:
                if "://" in path:
                    continue
                if not Path(path).exists():
                    raise SpecError(
                        f"{what} not found: {path} (relative to {Path.cwd()}); "
                        "give the path of an existing local file"
                    )
                if not Path(path).is_file():
                    raise SpecError(f"{what} {path} is not a regular file")
            if "://" not in self.script:
                from tfyarn._script_check import check_script

                check_script(self.script, self.python)
        names = [self.script_name, *(PurePosixPath(f).name for f in self.files)]
        taken = [
            n for n in names if n in (ENV_DIR, PEX_FILE) or n.startswith(f"{ENV_DIR}-")
        ]
        if self.python_env and taken:
            raise SpecError(
                f"shipped file name(s) {taken} are where the environment of "
                f"--python_env is unpacked (env, env-1, ..., {PEX_FILE}); "
                "rename them"
            )
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise SpecError(f"two shipped files share the name {dupes}; rename one")
        return self

    # -- conversions -------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["tasks"] = {r.value: dataclasses.asdict(g) for r, g in self.tasks.items()}
        out["args"] = list(self.args)
        out["files"] = list(self.files)
        out["hdfs_namenodes"] = list(self.hdfs_namenodes)
        out["preimport"] = list(self.preimport)
        out["env"] = dict(self.env)
        out["restart_policy"] = self.restart_policy.value
        out["retry_exit_codes"] = list(self.retry_exit_codes)
        out["docker_mounts"] = list(self.docker_mounts)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> JobSpec:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise SpecError(
                f"unknown job spec keys {unknown}; known keys: {sorted(known)}"
            )
        return cls(**data)

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)

    @classmethod
    def from_yaml(cls, text: str) -> JobSpec:
        return cls.from_dict(yaml.safe_load(text) or {})

    def to_env(self) -> str:
        """The spec as one environment value (base64 JSON: safe in YARN's shell)."""
        raw = json.dumps(self.to_dict(), separators=(",", ":")).encode()
        return base64.b64encode(raw).decode()

    @classmethod
    def from_env(cls, value: str) -> JobSpec:
        return cls.from_dict(json.loads(base64.b64decode(value)))


def script_args(value: object) -> tuple[str, ...]:
    """The script's arguments: a list or tuple, or one string split like a shell.

    ``args="--steps 3"`` is ``("--steps", "3")``: iterating the string would
    have given one argument per character.

    Raises
    ------
    SpecError
        ``value`` is neither, or the string does not split (an open quote).
    """
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            raise SpecError(
                f"args {value!r} does not split like a shell: {exc}"
            ) from None
    if not isinstance(value, (list, tuple)):
        raise SpecError(
            "args= must be a list of strings (or one string, split like a shell), "
            f"got {type(value).__name__} {value!r}"
        )
    return tuple(str(a) for a in value)


def is_module_name(name: object) -> bool:
    """Whether ``name`` is an importable-looking dotted name (``numpy.linalg``)."""
    return isinstance(name, str) and all(
        p.isidentifier() and not keyword.iskeyword(p) for p in name.split(".")
    )


def _namenode(value: object) -> str:
    """An extra name service, no path: ``hdfs://host:port``, an HA name
    service ``hdfs://<nameservice>`` (of ``dfs.nameservices``), or ``viewfs://name``."""
    url = str(value).strip().rstrip("/")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in ("hdfs", "viewfs") or not rest or "/" in rest:
        raise SpecError(
            f"hdfs_namenodes: {value!r} is not a name service; give its URL "
            "without a path, such as hdfs://nn2:8020, hdfs://ns2 (an HA name "
            "service) or viewfs://cluster"
        )
    return url


def _logdir(value: object) -> str:
    """A TensorBoard log dir: a remote URL as given, a local one absolute."""
    url = str(value or "").strip()
    if not url or ("://" in url and not url.startswith("file://")):
        return url
    # The master reads it on its own node: relative to here means nothing there.
    return os.path.abspath(url.removeprefix("file://"))


def _check_bounds(key: str, value: float) -> None:
    problem = _options.out_of_bounds(key, value)
    if problem:
        raise SpecError(f"{key} {problem}, got {value!r}")


def _as_group(value: TaskGroup | Mapping[str, Any]) -> TaskGroup:
    if isinstance(value, TaskGroup):
        return value
    return TaskGroup(**value)
