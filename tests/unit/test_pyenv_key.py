"""--python_env cache keys see every path the archive would hold.

A key that missed a removed directory named an archive still holding it: the
job then ran with files the environment no longer had.
"""

from __future__ import annotations

import shutil
import sys
import venv
from pathlib import Path

from tfyarn.client.pyenv import key, layers


def _venv(where: Path) -> Path:
    venv.EnvBuilder(with_pip=False, symlinks=True).create(where)
    return where


def _key(prefix: Path, kind: str = "venv") -> str:
    base = sys.executable if kind == "venv" else ""
    return key.environment(str(prefix), kind=kind, base_python=base, excluded=())


def test_removing_or_adding_a_directory_under_the_prefix_changes_the_key(
    tmp_path: Path,
) -> None:
    prefix = _venv(tmp_path / "env")
    data = prefix / "share" / "tool" / "data"
    data.mkdir(parents=True)
    (data / "table.csv").write_text("a,b\n")
    first = _key(prefix)
    assert _key(prefix) == first  # stable

    shutil.rmtree(prefix / "share" / "tool")
    removed = _key(prefix)
    assert removed != first

    (prefix / "share" / "empty").mkdir()
    assert _key(prefix) != removed  # an empty directory is packed too


def test_removing_or_adding_a_file_deep_in_site_packages_changes_the_key(
    tmp_path: Path,
) -> None:
    prefix = _venv(tmp_path / "env")
    sub = layers.site_dirs(prefix)[0] / "pkg" / "sub"
    sub.mkdir(parents=True)
    (sub / "a.py").write_text("A = 1\n")
    first = _key(prefix)

    (sub / "a.py").unlink()
    removed = _key(prefix)
    assert removed != first

    (sub / "b.py").write_text("B = 1\n")
    assert _key(prefix) != removed


def test_a_file_rewritten_with_another_size_changes_the_key(tmp_path: Path) -> None:
    prefix = _venv(tmp_path / "env")
    conf = prefix / "etc" / "tool.cfg"
    conf.parent.mkdir()
    conf.write_text("x = 1\n")
    first = _key(prefix)
    conf.write_text("x = 100\n")
    assert _key(prefix) != first


def test_python_writing_its_bytecode_keeps_the_key(tmp_path: Path) -> None:
    # uv and pip --no-compile install without .pyc: the first import writes
    # __pycache__, which must not cost a repack of the whole environment.
    prefix = _venv(tmp_path / "env")
    pkg = layers.site_dirs(prefix)[0] / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    first = _key(prefix)
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "__init__.cpython-311.pyc").write_bytes(b"\0" * 16)
    assert _key(prefix) == first


def test_conda_package_cache_is_not_walked(tmp_path: Path) -> None:
    # conda-pack never packs pkgs/ (a base install's download cache).
    prefix = tmp_path / "conda"
    (prefix / "conda-meta").mkdir(parents=True)
    (prefix / "lib").mkdir()
    first = _key(prefix, kind="conda")
    (prefix / "pkgs" / "numpy-2.0").mkdir(parents=True)
    assert _key(prefix, kind="conda") == first
    (prefix / "lib" / "libextra.so").write_bytes(b"\0")
    assert _key(prefix, kind="conda") != first


def test_a_left_out_pth_file_does_not_change_the_key(tmp_path: Path) -> None:
    prefix = _venv(tmp_path / "env")
    site = layers.site_dirs(prefix)[0]
    pth = site / "_editable.pth"
    pth.write_text("/src/a\n")
    excluded = (str(pth.relative_to(prefix)),)

    def k() -> str:
        return key.environment(
            str(prefix), kind="venv", base_python=sys.executable, excluded=excluded
        )

    first = k()
    pth.write_text("/src/a\n/src/bb\n")  # not in the archive: no new archive
    assert k() == first


def test_site_layer_key_sees_a_removed_directory(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    (site / "pkg" / "data").mkdir(parents=True)
    (site / "pkg" / "data" / "x.bin").write_bytes(b"1")
    first = key.site_dir(str(site))
    shutil.rmtree(site / "pkg" / "data")
    assert key.site_dir(str(site)) != first
