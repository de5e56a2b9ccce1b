"""Layered configuration for submitting jobs.

Three sources, later ones winning key by key:

1. the defaults shipped in ``conf/tfyarn.yaml`` (described by
   ``conf/tfyarn-schema.yaml``);
2. a user file: ``--config FILE`` if given, else
   ``$XDG_CONFIG_HOME/tfyarn/config.yaml`` (``~/.config/tfyarn/config.yaml``) if
   it exists;
3. the command line (or keyword arguments of :func:`tfyarn.submit`).

The keys are the command-line option names (``num_ps``, ``worker_memory``, ...).
Every value is checked against the schema wherever it comes from, and the error
names the source, the key, what arrived and what would be valid. ``env`` and
``files`` accumulate across sources instead of replacing each other.

The schema, the shipped defaults and the value checks live in
:mod:`tfyarn._options`, which :class:`~tfyarn.spec.JobSpec` reads too: a job
made in Python and one made by ``tfyarn submit`` get the same defaults.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfyarn import _options, _surface
from tfyarn._options import (
    DEFAULTS_FILE,
    SCHEMA_FILE,
    TYPES,
    defaults,
    parse_memory,
    schema,
)
from tfyarn.client.kerberos import Login
from tfyarn.errors import SpecError
from tfyarn.spec import ROLES, JobSpec, Role, TaskGroup, script_args

__all__ = [
    "DEFAULTS_FILE",
    "SCHEMA_FILE",
    "TYPES",
    "ClientOptions",
    "check",
    "client_options",
    "defaults",
    "load",
    "parse_memory",
    "role_keys",
    "schema",
    "to_spec",
    "user_config_path",
]

# Keys whose values from several sources are combined rather than replaced.
_ACCUMULATE = ("env", "files", "docker_mount")


def user_config_path() -> Path:
    """Where the user's own defaults live (the file need not exist)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tfyarn" / "config.yaml"


def load(
    config_file: str | os.PathLike[str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Merge defaults, the user file and ``overrides`` into one checked config.

    Parameters
    ----------
    config_file
        A YAML file of overrides. ``None`` reads :func:`user_config_path` if it
        exists; an explicit path must exist.
    overrides
        Values from the command line or the Python API. ``None`` values mean
        "not given" and are skipped.

    Returns
    -------
    dict
        Every schema key with a normalized value (memory in MiB as ``int``).

    Raises
    ------
    SpecError
        An unknown key or an invalid value, naming where it came from.
    """
    merged = defaults()
    if config_file is not None:
        path = Path(config_file).expanduser()
        if not path.is_file():
            raise SpecError(f"config file not found: {path}")
        layers = [(path, _options.read_yaml(path))]
    else:
        path = user_config_path()
        layers = [(path, _options.read_yaml(path))] if path.is_file() else []
    for path, raw in layers:
        _merge(merged, check(raw, source=str(path)))
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    _merge(merged, check(given, source=_surface.given_source()))
    return merged


def check(raw: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """Validate and normalize a (partial) config mapping from ``source``.

    Every problem is reported at once, so a file is fixed in one round.
    """
    known = schema()
    problems = []
    unknown = sorted(set(raw) - set(known), key=str)
    if unknown:
        hints = [_closest(str(k), known) for k in unknown]
        hint = "; ".join(
            f"{k!r}: did you mean {h!r}"
            for k, h in zip(unknown, hints, strict=True)
            if h
        )
        problems.append(
            f"unknown config key(s) {unknown} in {source}"
            + (f" ({hint})" if hint else "")
        )
    out = {}
    for key, value in raw.items():
        if key in known:
            try:
                out[key] = _options.checked(key, value, source=source)
            except SpecError as exc:
                problems.append(str(exc))
    if problems:
        head = f"{len(problems)} problems in {source}: " if len(problems) > 1 else ""
        tail = f". Known keys: {', '.join(sorted(known))}" if unknown else ""
        raise SpecError(head + "; ".join(problems) + tail)
    return out


def to_spec(
    script: str, args: str | tuple[str, ...] | list[str], config: Mapping[str, Any]
) -> JobSpec:
    """Build a :class:`JobSpec` from a loaded config (see :func:`load`).

    The client's own keys (:class:`ClientOptions`) stay out of the job.
    """
    tasks = {
        role: TaskGroup(
            count=config[f"num_{role.value}"],
            memory_mib=config[f"{role.value}_memory"],
            vcores=config[f"{role.value}_vcores"],
            gpus=config[f"{role.value}_gpus"],
            docker_image=config[f"{role.value}_docker_image"],
            node_label=config[f"{role.value}_node_label"],
        )
        for role in ROLES
    }
    return JobSpec(
        script=script,
        args=script_args(args),
        name=config["name"],
        tasks=tasks,
        queue=config["queue"],
        node_label=config["node_label"],
        env=config["env"],
        files=tuple(config["files"]),
        hdfs_namenodes=tuple(config["hdfs_namenodes"]),
        python=config["python"],
        python_env=config["python_env"],
        legacy_flags=config["legacy_flags"],
        # "tensorflow,numpy" from the command line is two modules.
        preimport=tuple(
            m.strip()
            for item in config["preimport"]
            for m in item.split(",")
            if m.strip()
        ),
        tensorboard=config["tensorboard"],
        am_memory_mib=config["am_memory"],
        am_vcores=config["am_vcores"],
        max_am_attempts=config["max_am_attempts"],
        max_restarts=config["max_restarts"],
        max_disruptions=config["max_disruptions"],
        min_worker=config["min_worker"],
        restart_policy=config["restart_policy"],
        retry_exit_codes=tuple(config["retry_exit_codes"]),
        registration_timeout=config["registration_timeout"],
        allocation_timeout=config["allocation_timeout"],
        heartbeat_interval=config["heartbeat_interval"],
        heartbeat_timeout=config["heartbeat_timeout"],
        stall_timeout=config["stall_timeout"],
        worker_grace=config["worker_grace"],
        stop_grace=config["stop_grace"],
        docker_image=config["docker_image"],
        docker_mounts=tuple(config["docker_mount"]),
        docker_runtime=config["docker_runtime"],
        docker_python=config["docker_python"],
    )


@dataclass(frozen=True)
class ClientOptions:
    """What the client does with a job, never part of the job itself."""

    detach: bool  # return after submission instead of following the job
    poll_interval: float  # seconds between polls while following
    # Kerberos credentials: the client's alone, never in the job's TFYARN_JOB.
    principal: str = ""
    keytab: str = ""
    # Whether `python` was set by a source other than the shipped defaults:
    # an explicit interpreter counts as the user's word on every node, even
    # this client's own (pyenv.choose).
    python_given: bool = False
    # gzip level of packed --python_env archives (0: a plain tar).
    python_env_compression: int = 1
    # The MLflow run of the job (tfyarn.client.mlflow_run): tracking URI
    # ("env": MLFLOW_TRACKING_URI), experiment, parent run id.
    mlflow: str = ""
    mlflow_experiment: str = ""
    mlflow_parent: str = ""

    @property
    def login(self) -> Login:
        """The Kerberos login: from the keytab, or (neither set) the ticket cache."""
        return Login(principal=self.principal or None, keytab=self.keytab or None)


def client_options(config: Mapping[str, Any]) -> ClientOptions:
    """The client's own options from a loaded config (see :func:`load`)."""
    keytab = config["keytab"]
    return ClientOptions(
        detach=bool(config["detach"]),
        poll_interval=float(config["poll_interval"]),
        principal=config["principal"],
        keytab=str(Path(keytab).expanduser().absolute()) if keytab else "",
        python_given=bool(config["python"]),
        python_env_compression=int(config["python_env_compression"]),
        mlflow=str(config.get("mlflow") or ""),
        mlflow_experiment=str(config.get("mlflow_experiment") or ""),
        mlflow_parent=str(config.get("mlflow_parent") or ""),
    )


def role_keys(role: Role) -> tuple[str, ...]:
    """The config keys of one role, e.g. ``num_ps``, ``ps_memory``."""
    r = role.value
    return (
        f"num_{r}",
        f"{r}_memory",
        f"{r}_vcores",
        f"{r}_gpus",
        f"{r}_docker_image",
        f"{r}_node_label",
    )


def _merge(into: dict[str, Any], layer: Mapping[str, Any]) -> None:
    for key, value in layer.items():
        if key == "env":
            into[key] = {**into.get(key, {}), **value}
        elif key in _ACCUMULATE:
            into[key] = list(dict.fromkeys([*into.get(key, []), *value]))
        else:
            into[key] = value


def _closest(key: str, known: Mapping[str, Any]) -> str | None:
    match = difflib.get_close_matches(key, list(known), n=1, cutoff=0.7)
    return match[0] if match else None
