"""Packing environments and layers into archives YARN unpacks.

venv-pack2 (virtualenvs) and conda-pack (conda environments) do the packing:
they know which files an environment needs and rewrite what points into its
prefix. Their refusal of editable installs is lifted, because
:mod:`tfyarn.client.pyenv.layers` ships those separately, and the ``.pth``
files that point outside are left out. Layers are plain archives.

Every archive is written under a temporary name in the local cache and renamed
into place only when complete, so an interrupted pack never leaves a file that
a later submit would take for a finished archive.
"""

from __future__ import annotations

import os
import tarfile
import uuid
import warnings
import zipfile
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tfyarn.errors import SpecError


def tar_suffix(level: int) -> str:
    """gzip ``level`` (client option python_env_compression): 0 is a plain tar."""
    return ".tar" if level == 0 else ".tar.gz"


def cache_dir() -> Path:
    """Local archives: ``$TFYARN_CACHE_DIR/envs`` or ``~/.cache/tfyarn/envs``."""
    base = os.environ.get("TFYARN_CACHE_DIR") or str(Path.home() / ".cache" / "tfyarn")
    path = Path(base) / "envs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def atomically(target: Path, write: Callable[[str], None]) -> Path:
    """Run ``write(temp_path)``, then rename the temp file to ``target``."""
    tmp = target.with_name(f".tmp-{uuid.uuid4().hex[:12]}-{target.name}")
    try:
        write(str(tmp))
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def prune(newest: Path, keep: int = 2) -> None:
    """Delete older local archives of the same environment or layer.

    Local archives only serve uploads (HDFS keeps every name, since a running
    job may still localize it); the newest ``keep`` of one label stay.
    """
    label = newest.name.rsplit("-", 1)[0]
    same = [
        p
        for p in newest.parent.iterdir()
        if p.is_file()
        and p.name.rsplit("-", 1)[0] == label
        and not p.name.startswith(".tmp-")
    ]
    same.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    for old in same[keep:]:
        old.unlink(missing_ok=True)


def environment(
    kind: str, prefix: str, output: str, *, excluded: Iterable[str], level: int = 1
) -> None:
    """Pack a venv (venv-pack2) or conda environment (conda-pack) to ``output``."""
    filters = [("exclude", rel) for rel in excluded]
    fmt = tar_suffix(level).lstrip(".")
    if kind == "conda":
        import conda_pack

        try:
            conda_pack.pack(
                prefix=prefix,
                output=output,
                format=fmt,
                force=True,
                compress_level=level,
                filters=filters,
                ignore_editable_packages=True,
            )
        except conda_pack.CondaPackException as exc:
            raise SpecError(
                f"--python_env: conda-pack cannot pack {prefix}: {exc}"
            ) from None
        return
    with warnings.catch_warnings():
        # venv-pack2 imports setuptools, which warns about distutils.
        warnings.simplefilter("ignore")
        import venv_pack

    try:
        with _editables_allowed():
            env: Any = venv_pack.Env(prefix)
        for _, pattern in filters:
            env = env.exclude(pattern)
        env.pack(output=output, format=fmt, force=True, compress_level=level)
    except venv_pack.VenvPackException as exc:
        raise SpecError(
            f"--python_env: venv-pack cannot pack {prefix}: {exc}"
        ) from None


@contextmanager
def _editables_allowed() -> Any:
    # venv-pack2 refuses any .pth line pointing outside the prefix; tfyarn
    # ships those directories as layers and excludes the .pth files instead.
    from unittest import mock

    import venv_pack.core

    with mock.patch.object(
        venv_pack.core, "check_no_editable_packages", lambda ctx: None
    ):
        yield


def files(entries: list[tuple[str, str]], output: str, *, level: int = 1) -> None:
    """An archive of ``(source, name)`` entries: .zip, .tar or .tar.gz by suffix."""
    if output.endswith(".zip"):
        method = zipfile.ZIP_DEFLATED if level else zipfile.ZIP_STORED
        with zipfile.ZipFile(output, "w", method, compresslevel=level or None) as z:
            for source, name in entries:
                z.write(source, name)
        return
    mode = "w:gz" if output.endswith(".gz") else "w"
    extra = {"compresslevel": level} if mode == "w:gz" else {}
    with tarfile.open(output, mode, **extra) as tar:  # type: ignore[call-overload]
        for source, name in entries:
            tar.add(source, name, recursive=False)
