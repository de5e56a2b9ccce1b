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
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tfyarn import _paths
from tfyarn.errors import SpecError
from tfyarn.spec import ROLES, JobSpec, Role, TaskGroup

DEFAULTS_FILE = "tfyarn.yaml"
SCHEMA_FILE = "tfyarn-schema.yaml"
TYPES = ("int", "number", "bool", "string", "memory", "mapping", "list")
# Keys whose values from several sources are combined rather than replaced.
_ACCUMULATE = ("env", "files")


def user_config_path() -> Path:
    """Where the user's own defaults live (the file need not exist)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "tfyarn" / "config.yaml"


@functools.lru_cache(maxsize=1)
def schema() -> dict[str, dict[str, Any]]:
    """The schema: key -> {type, minimum?, maximum?, help}."""
    return _read_yaml(_paths.conf_dir() / SCHEMA_FILE)


def defaults() -> dict[str, Any]:
    """The shipped defaults, validated."""
    raw = _read_yaml(_paths.conf_dir() / DEFAULTS_FILE)
    return check(raw, source=f"the shipped defaults ({DEFAULTS_FILE})")


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
        layers = [(path, _read_yaml(path))]
    else:
        path = user_config_path()
        layers = [(path, _read_yaml(path))] if path.is_file() else []
    for path, raw in layers:
        _merge(merged, check(raw, source=str(path)))
    given = {k: v for k, v in (overrides or {}).items() if v is not None}
    _merge(merged, check(given, source="the command line"))
    return merged


def check(raw: Mapping[str, Any], *, source: str) -> dict[str, Any]:
    """Validate and normalize a (partial) config mapping from ``source``."""
    known = schema()
    unknown = sorted(set(raw) - set(known))
    if unknown:
        hints = [_closest(k, known) for k in unknown]
        hint = "; ".join(
            f"{k!r}: did you mean {h!r}"
            for k, h in zip(unknown, hints, strict=True)
            if h
        )
        raise SpecError(
            f"unknown config key(s) {unknown} in {source}. "
            + (hint + ". " if hint else "")
            + f"Known keys: {', '.join(sorted(known))}"
        )
    return {k: _value(k, v, known[k], source) for k, v in raw.items()}


def to_spec(
    script: str, args: tuple[str, ...] | list[str], config: Mapping[str, Any]
) -> JobSpec:
    """Build a :class:`JobSpec` from a loaded config (see :func:`load`)."""
    tasks = {
        role: TaskGroup(
            count=config[f"num_{role.value}"],
            memory_mib=config[f"{role.value}_memory"],
            vcores=config[f"{role.value}_vcores"],
            gpus=config[f"{role.value}_gpus"],
        )
        for role in ROLES
    }
    return JobSpec(
        script=script,
        args=tuple(args),
        name=config["name"],
        tasks=tasks,
        queue=config["queue"],
        env=config["env"],
        files=tuple(config["files"]),
        python=config["python"] or sys.executable,
        legacy_flags=config["legacy_flags"],
        # "tensorflow,numpy" from the command line is two modules.
        preimport=tuple(
            m.strip()
            for item in config["preimport"]
            for m in item.split(",")
            if m.strip()
        ),
        am_memory_mib=config["am_memory"],
        am_vcores=config["am_vcores"],
        max_am_attempts=config["max_am_attempts"],
        max_restarts=config["max_restarts"],
        registration_timeout=float(config["registration_timeout"]),
        heartbeat_interval=float(config["heartbeat_interval"]),
        heartbeat_timeout=float(config["heartbeat_timeout"]),
        stall_timeout=float(config["stall_timeout"]),
        worker_grace=float(config["worker_grace"]),
        stop_grace=float(config["stop_grace"]),
    )


@dataclass(frozen=True)
class ClientOptions:
    """What the client does with a job, never part of the job itself."""

    detach: bool  # return after submission instead of following the job
    poll_interval: float  # seconds between polls while following


def client_options(config: Mapping[str, Any]) -> ClientOptions:
    """The client's own options from a loaded config (see :func:`load`)."""
    return ClientOptions(
        detach=bool(config["detach"]), poll_interval=float(config["poll_interval"])
    )


def role_keys(role: Role) -> tuple[str, ...]:
    """The config keys of one role, e.g. ``num_ps``, ``ps_memory``."""
    r = role.value
    return (f"num_{r}", f"{r}_memory", f"{r}_vcores", f"{r}_gpus")


# -- memory ------------------------------------------------------------------------

_UNITS_MIB = {
    "": 1,
    "k": 1 / 1024, "kb": 1000 / 1024**2, "kib": 1 / 1024,
    "m": 1, "mb": 1000**2 / 1024**2, "mib": 1,
    "g": 1024, "gb": 1000**3 / 1024**2, "gib": 1024,
    "t": 1024**2, "tb": 1000**4 / 1024**2, "tib": 1024**2,
}  # fmt: skip
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_memory(value: Any) -> int:
    """Memory as whole MiB: ``2048``, ``"2048"``, ``"2 GiB"``, ``"512 MiB"``, ``"1.5g"``.

    A plain number is MiB (YARN's unit). Fractions round up.

    Raises
    ------
    SpecError
        The value is not a number with an optional unit.

    Examples
    --------
    >>> parse_memory("2 GiB")
    2048
    >>> parse_memory(512)
    512
    """
    if isinstance(value, bool):
        raise SpecError(
            f"expected memory like '2 GiB', '512 MiB' or 2048, got {value!r}"
        )
    if isinstance(value, (int, float)):
        if value < 0:
            raise SpecError(f"memory must not be negative, got {value}")
        return int(-(-value // 1))
    match = _MEMORY.match(str(value))
    unit = match.group(2).lower() if match else None
    if not match or unit not in _UNITS_MIB:
        raise SpecError(
            f"expected memory like '2 GiB', '512 MiB' or a number of MiB, got {value!r}"
        )
    mib = float(match.group(1)) * _UNITS_MIB[unit or ""]
    return int(-(-mib // 1))


# -- helpers -------------------------------------------------------------------------


def _value(key: str, value: Any, rule: Mapping[str, Any], source: str) -> Any:
    kind = rule["type"]
    where = f"{key} (from {source})"
    try:
        out = _convert(kind, value)
    except SpecError as exc:
        raise SpecError(f"invalid {where}: {exc}") from None
    lo, hi = rule.get("minimum"), rule.get("maximum")
    unit = " MiB" if kind == "memory" else ""
    if lo is not None and out < lo:
        bound = f"between {lo} and {hi}" if hi is not None else f"at least {lo}{unit}"
        raise SpecError(f"invalid {where}: must be {bound}, got {value!r}")
    if hi is not None and out > hi:
        bound = f"between {lo} and {hi}" if lo is not None else f"at most {hi}{unit}"
        raise SpecError(f"invalid {where}: must be {bound}, got {value!r}")
    return out


def _convert(kind: str, value: Any) -> Any:
    if kind == "memory":
        return parse_memory(value)
    if kind == "int":
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise SpecError(f"expected a whole number, got {value!r}")
        try:
            return int(value)
        except ValueError:
            raise SpecError(f"expected a whole number, got {value!r}") from None
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            raise SpecError(f"expected a number, got {value!r}")
        try:
            return float(value)
        except ValueError:
            raise SpecError(f"expected a number, got {value!r}") from None
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in ("true", "yes", "1", "on"):
            return True
        if text in ("false", "no", "0", "off"):
            return False
        raise SpecError(f"expected true or false, got {value!r}")
    if kind == "string":
        if value is None:
            return ""
        if not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise SpecError(f"expected a string, got {value!r}")
        return str(value)
    if kind == "mapping":
        return _env_mapping(value)
    if kind == "list":
        if value is None:
            return []
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise SpecError(f"expected a list of strings, got {value!r}")
        return [str(v).strip() for v in value]
    raise SpecError(f"schema type {kind!r} is not one of {TYPES}")  # a broken schema


def _env_mapping(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = []
        for item in value:
            if not isinstance(item, str) or "=" not in item:
                raise SpecError(f"expected K=V, got {item!r}")
            k, _, v = item.partition("=")
            items.append((k, v))
    else:
        raise SpecError(
            f"expected a mapping of names to values or K=V items, got {value!r}"
        )
    out = {}
    for k, v in items:
        k = str(k).strip()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", k):
            raise SpecError(
                f"{k!r} is not a valid environment variable name "
                "(letters, digits and _, not starting with a digit)"
            )
        out[k] = "" if v is None else str(v)
    return out


def _merge(into: dict[str, Any], layer: Mapping[str, Any]) -> None:
    for key, value in layer.items():
        if key == "env":
            into[key] = {**into.get(key, {}), **value}
        elif key in _ACCUMULATE:
            into[key] = list(dict.fromkeys([*into.get(key, []), *value]))
        else:
            into[key] = value


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise SpecError(f"{path} is not valid YAML: {exc}") from None
    except OSError as exc:
        raise SpecError(f"cannot read {path}: {exc.strerror}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError(
            f"{path} must hold a mapping of keys to values, got {type(data).__name__}"
        )
    return data


def _closest(key: str, known: Mapping[str, Any]) -> str | None:
    import difflib

    match = difflib.get_close_matches(key, list(known), n=1, cutoff=0.7)
    return match[0] if match else None
