"""Shipping the job's Python environment (``--python_env``).

- :mod:`.source`: what ``--python_env`` names (``auto``, a venv or conda
  directory, an archive, a ``.pex``, an ``hdfs://`` archive);
- :mod:`.pexfile`: what a ``.pex`` needs to run a job, read from the file;
- :mod:`.layers`: what an environment imports from outside itself (editable
  installs, ``.pth`` paths), shipped as layers beside it;
- :mod:`.key`: cache keys from the metadata of every path an archive would
  hold, in a fraction of a second;
- :mod:`.pack`: venv-pack2 / conda-pack and layer archives, written atomically;
- :mod:`.cache`: the per-user archive cache on HDFS.

:func:`choose` decides, before submission, whether a job without
``--python_env`` can run; :func:`ship` makes sure every archive is on HDFS and
returns the :class:`tfyarn._launch.Interpreter` that ``tfyarn.client.compile.to_skein`` uses.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from tfyarn._launch import ENV_DIR, PEX_FILE, Archive, Interpreter
from tfyarn.client.pyenv import cache, key, layers, pack, pexfile
from tfyarn.client.pyenv.source import EnvSource, parse
from tfyarn.errors import SpecError

__all__ = ["EnvSource", "choose", "parse", "ship"]


def choose(*, python_env: str, python_given: bool, node_hosts: Iterable[str]) -> None:
    """Refuse, before submission, a job whose nodes may not have its Python.

    Without ``--python_env`` and ``--python`` the tasks run this client's
    interpreter, which only nodes on this machine are sure to have (the local
    single-node cluster). Any other node means a newcomer's job would fail on
    some host with "command not found", so it is refused here, naming the
    options that fix it.

    Raises
    ------
    SpecError
        Both options given, or neither on a cluster with other hosts.
    """
    if python_env and python_given:
        raise SpecError(
            "give either --python (an interpreter every node has) or "
            "--python_env (an environment shipped with the job), not both"
        )
    if python_env or python_given:
        return
    remote = sorted({h for h in node_hosts if not _this_machine(h)})
    if remote:
        shown = ", ".join(remote[:3]) + (
            f" and {len(remote) - 3} more" if len(remote) > 3 else ""
        )
        raise SpecError(
            f"the cluster's nodes ({shown}) are other hosts than this client, "
            f"which need not have this Python ({sys.executable}) or its packages. "
            "Ship it with the job: --python_env auto (this environment, packed "
            "once per content and cached on HDFS), or --python_env with a "
            "virtualenv, conda environment or archive of one (local or hdfs://); "
            "or name an interpreter every node has with --python /path/to/python"
        )


def _this_machine(host: str) -> bool:
    """Whether a node's host is this machine's loopback or own name."""
    if host in ("localhost", socket.gethostname(), socket.getfqdn()):
        return True
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(
        ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback
        for info in infos
    )


def ship(
    value: str, *, say: Callable[[str], None] | None = None, level: int = 1
) -> Interpreter:
    """Make every archive of ``--python_env value`` available on HDFS.

    A cached environment costs its key (metadata, milliseconds) and one HDFS
    lookup per archive; otherwise it is packed (minutes for a TensorFlow
    environment) with gzip ``level`` (``python_env_compression``; 0: plain
    tar), kept in the local cache and uploaded once.

    Raises
    ------
    SpecError
        The value names nothing usable, or packing failed.
    HdfsError
        HDFS could not be written or read.
    """
    tell = say or (lambda _m: None)
    source = parse(value)
    if source.kind == "remote":
        return Interpreter(
            files={ENV_DIR: Archive(url=source.location)}, origin=source.given
        )
    if source.kind == "pex":
        return _pex(source, tell)
    if source.kind == "archive":
        suffix = _suffix(source.location)
        digest = key.local_file(source.location)
        name = f"{_label(source.location, suffix)}-{digest}{suffix}"
        # Uploaded as it is: no copy into the local cache.
        url = _uploaded_once(source.location, name, tell)
        return Interpreter(files={ENV_DIR: Archive(url=url)}, origin=source.given)
    outside = layers.find(source.location)
    env_key = key.environment(
        source.location,
        kind=source.kind,
        base_python=source.base_python(),
        excluded=outside.excluded,
    )
    tag = _level_tag(level)
    name = f"{source.kind}-{_env_label(source.location)}-{env_key}{tag}"
    url = _cached(
        name + pack.tar_suffix(level),
        lambda out: pack.environment(
            source.kind, source.location, out, excluded=outside.excluded, level=level
        ),
        tell,
        f"{source.kind} {source.location}",
    )
    files = {ENV_DIR: Archive(url=url)}
    names = []
    for i, layer in enumerate(outside.layers, start=1):
        layer_name = f"{ENV_DIR}-{i}"
        files[layer_name] = Archive(url=_layer(layer, tell, level))
        names.append(layer_name)
    return Interpreter(files=files, pythonpath=tuple(names), origin=source.given)


def _pex(source: EnvSource, tell: Callable[[str], None]) -> Interpreter:
    """A .pex goes as it is, a file YARN does not unpack (pex does, once per
    node: :func:`tfyarn._launch.pex_launch_script`)."""
    pex = pexfile.read(source.location, source.given)
    name = f"pex-{_label(source.location, pexfile.SUFFIX)}-{pex.key}{pexfile.SUFFIX}"
    url = _uploaded_once(source.location, name, tell)
    return Interpreter(
        files={PEX_FILE: Archive(url=url, type="file")},
        origin=source.given,
        pex_python=pex.python,
        pex_constraints=pex.constraints,
    )


def _uploaded_once(local: str, name: str, tell: Callable[[str], None]) -> str:
    """The cache's URL of a file shipped as it is; say so when it is uploaded."""
    began = time.monotonic()
    url, uploaded = cache.ensure(local, name)
    if uploaded:
        tell(f"uploaded {url} in {time.monotonic() - began:.0f} s")
    return url


def _level_tag(level: int) -> str:
    # The default level's names carry no tag; others are other archives.
    return "" if level == 1 else f"-z{level}"


def _layer(layer: layers.Layer, tell: Callable[[str], None], level: int) -> str:
    label = Path(layer.path).name.lstrip(".") or "code"
    if layer.kind == "site":
        entries = None
        layer_key, suffix = key.site_dir(layer.path), pack.tar_suffix(level)
    else:
        entries = layers.layer_files(layer)
        layer_key, suffix = key.files(entries), ".zip"

    def write(out: str) -> None:
        chosen = entries if entries is not None else layers.layer_files(layer)
        pack.files(chosen, out, level=level)

    return _cached(
        f"layer-{label}-{layer_key}{_level_tag(level)}{suffix}",
        write,
        tell,
        f"{layer.kind} {layer.path}",
    )


def _cached(
    name: str, write: Callable[[str], None], tell: Callable[[str], None], what: str
) -> str:
    """The HDFS URL of archive ``name``, packed and uploaded if not there yet."""
    if cache.has(name):
        return cache.url_of(name)
    local = pack.cache_dir() / name
    if not local.exists():
        tell(f"packing {what} (once for this content) ...")
        began = time.monotonic()
        pack.atomically(local, write)
        pack.prune(local)
        size = local.stat().st_size / 2**20
        tell(f"packed {local} ({size:.0f} MiB) in {time.monotonic() - began:.0f} s")
    began = time.monotonic()
    url = cache.upload(str(local), name)
    tell(f"uploaded {url} in {time.monotonic() - began:.0f} s")
    return url


def _suffix(path: str) -> str:
    from tfyarn.client.pyenv.source import ARCHIVE_SUFFIXES

    for suffix in ARCHIVE_SUFFIXES:
        if path.endswith(suffix):
            return suffix
    raise SpecError(
        f"--python_env {path}: not an archive ({', '.join(ARCHIVE_SUFFIXES)})"
    )


def _label(path: str, suffix: str) -> str:
    return Path(path).name[: -len(suffix)] or "env"


def _env_label(prefix: str) -> str:
    """A readable name: ``proj-venv`` for ``proj/.venv``, else the dir's name."""
    path = Path(os.path.realpath(prefix))
    name = path.name.lstrip(".") or "env"
    return f"{path.parent.name}-{name}" if name in ("venv", "env") else name
