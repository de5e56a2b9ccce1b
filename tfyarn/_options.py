"""A job's options: their schema, shipped defaults and bounds, read once.

``conf/tfyarn.yaml`` holds the defaults and ``conf/tfyarn-schema.yaml`` each
key's type, bounds and help. They are the one home of both: ``JobSpec(...)``
built in Python looks its defaults up here (see :func:`default`) and checks
its fields against the same bounds (:func:`out_of_bounds`), and the client's
config layers a user file and the command line on top of the same values, so a
job made either way is the same job.

Keys marked ``client: true`` in the schema (``detach``, ``poll_interval``,
the Kerberos ``principal`` and ``keytab``) say what the client does with a
job; they are never part of the job.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from tfyarn import _paths
from tfyarn.errors import SpecError

DEFAULTS_FILE = "tfyarn.yaml"
SCHEMA_FILE = "tfyarn-schema.yaml"
TYPES = ("int", "number", "bool", "string", "memory", "mapping", "list")


@functools.lru_cache(maxsize=1)
def schema() -> dict[str, dict[str, Any]]:
    """The schema: key -> {type, minimum?, maximum?, client?, help}."""
    return read_yaml(_paths.conf_dir() / SCHEMA_FILE)


def client_keys() -> tuple[str, ...]:
    """The keys that are the client's, not the job's."""
    return tuple(k for k, rule in schema().items() if rule.get("client"))


@functools.lru_cache(maxsize=1)
def _shipped() -> dict[str, Any]:
    raw = read_yaml(_paths.conf_dir() / DEFAULTS_FILE)
    source = f"the shipped defaults ({DEFAULTS_FILE})"
    known = schema()
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise SpecError(f"unknown key(s) {unknown} in {source}")
    return {k: checked(k, v, source=source) for k, v in raw.items()}


def defaults() -> dict[str, Any]:
    """The shipped defaults, checked and normalized (memory in MiB)."""
    return {k: _copy(v) for k, v in _shipped().items()}


def default(key: str) -> Any:
    """The shipped default of one key (a fresh copy of lists and mappings)."""
    return _copy(_shipped()[key])


def checked(key: str, raw: Any, *, source: str) -> Any:
    """``raw`` converted to ``key``'s type and checked against its bounds.

    Raises
    ------
    SpecError
        Naming the key, ``source``, what arrived and what would be valid.
    """
    return _value(key, raw, schema()[key], source)


def out_of_bounds(key: str, number: float) -> str | None:
    """What is wrong with ``number`` for ``key`` ("must be at least 1"), or None."""
    rule = schema()[key]
    lo, hi = rule.get("minimum"), rule.get("maximum")
    unit = " MiB" if rule["type"] == "memory" else ""
    if (lo is None or number >= lo) and (hi is None or number <= hi):
        return None
    if lo is not None and hi is not None:
        return f"must be between {lo} and {hi}{unit}"
    if lo is not None:
        return f"must be at least {lo}{unit}"
    return f"must be at most {hi}{unit}"


# -- memory ------------------------------------------------------------------------

# Every unit is binary, as in spark-submit and YARN (``2g``, ``2GB`` and ``2 GiB``
# are all 2048 MiB): users of those tools write ``2GB`` meaning 2048 MiB, and a
# decimal ``GB`` silently gave them 1908 MiB. A bare number is MiB, YARN's unit.
_FACTOR = {"k": 1 / 1024, "m": 1, "g": 1024, "t": 1024**2}
_UNITS_MIB = {
    "": 1,
    **{p: f for p, f in _FACTOR.items()},
    **{p + "b": f for p, f in _FACTOR.items()},
    **{p + "ib": f for p, f in _FACTOR.items()},
}
UNITS_HELP = (
    "a plain number is MiB; units k, m, g, t, KB, MB, GB, TB, KiB, MiB, GiB, TiB "
    "(any case) are all binary: 2g = 2GB = 2 GiB = 2048 MiB"
)
_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_memory(value: Any) -> int:
    """Memory as whole MiB: ``2048``, ``"2048"``, ``"2g"``, ``"2GB"``, ``"512 MiB"``.

    A plain number is MiB (YARN's unit); every unit is binary (see
    :data:`UNITS_HELP`). Fractions round up.

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
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise SpecError(f"expected memory like '2g', '512m' or 2048, got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise SpecError(f"memory must not be negative, got {value}")
        return int(-(-value // 1))
    match = _MEMORY.match(str(value))
    unit = match.group(2).lower() if match else None
    if not match:
        raise SpecError(
            f"expected memory like '2g', '2 GiB', '512m' or a number of MiB, "
            f"got {value!r}"
        )
    if unit not in _UNITS_MIB:
        raise SpecError(
            f"unknown memory unit {match.group(2)!r} in {value!r}: {UNITS_HELP}"
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
    problem = out_of_bounds(key, out) if kind in ("int", "number", "memory") else None
    if problem:
        raise SpecError(f"invalid {where}: {problem}, got {value!r}")
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


class _DuplicateKey(yaml.YAMLError):
    def __init__(self, key: object, first: int, again: int) -> None:
        super().__init__(f"{key!r} (lines {first} and {again})")
        self.key, self.first, self.again = key, first, again


# libyaml's parser where PyYAML was built with it: the pure-Python one spent
# 40 ms of CPU on the schema in every task container and master, libyaml's
# 2 ms.
_SafeLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SafeLoader):
    """safe_load, refusing a key given twice: PyYAML keeps the last silently."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(
                ":merge"
            ):
                continue
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise _DuplicateKey(key, seen[key], line)
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        # A SafeLoader subclass: as safe as yaml.safe_load.
        data = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)
    except _DuplicateKey as exc:
        raise SpecError(
            f"{path}: key {exc.key!r} is set twice, on lines {exc.first} and "
            f"{exc.again}; keep one (YAML would silently use the last)"
        ) from None
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


def _copy(v: Any) -> Any:
    if isinstance(v, dict):
        return dict(v)
    if isinstance(v, list):
        return list(v)
    return v
