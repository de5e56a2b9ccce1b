"""Where a submission takes the master's code from (tfyarn.client.master_code)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfyarn.client import master_code
from tfyarn.client.compile import to_skein
from tfyarn.client.master_code import _zip_dir, master_zip
from tfyarn.client.pyenv import cache
from tfyarn.errors import HdfsError
from tfyarn.spec import JobSpec

URL = "hdfs://nn:8020/user/me/.tfyarn/am/"


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The cache's functions, recorded: nothing is cached until uploaded."""
    seen: list[tuple[str, ...]] = []
    stored: set[str] = set()

    def has(name: str, path: str = cache.CACHE_PATH) -> bool:
        seen.append(("has", name, path))
        return name in stored

    def upload(local: str, name: str, path: str = cache.CACHE_PATH) -> str:
        seen.append(("upload", Path(local).name, name, path))
        stored.add(name)
        return URL + name

    monkeypatch.setattr(cache, "has", has)
    monkeypatch.setattr(cache, "upload", upload)
    monkeypatch.setattr(cache, "url_of", lambda name, path=cache.CACHE_PATH: URL + name)
    return seen


def test_uploaded_once_then_named_from_the_cache(calls: list[tuple[str, ...]]) -> None:
    name = Path(master_zip()).name
    assert name.startswith("am-") and name.endswith(".zip")
    assert master_code.archive_source() == URL + name
    assert master_code.archive_source() == URL + name
    uploads = [c for c in calls if c[0] == "upload"]
    assert uploads == [("upload", name, name, cache.MASTER_PATH)]


def test_without_hdfs_the_local_zip_goes_with_the_application(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def unreachable(name: str, path: str = cache.CACHE_PATH) -> bool:
        raise HdfsError("hdfs://nn:8020: connection refused")

    monkeypatch.setattr(cache, "has", unreachable)
    source = master_code.archive_source()
    assert Path(source).is_file() and source == master_zip()


def test_the_zip_is_named_by_its_content(tmp_path: Path) -> None:
    code = tmp_path / "am"
    code.mkdir()
    (code / "__main__.py").write_text("print(1)\n")
    first = _zip_dir(code)
    assert _zip_dir(code) == first  # the same content, the same cache entry
    (code / "__main__.py").write_text("print(2)\n")
    assert _zip_dir(code) != first  # new code, a new name: never a stale master


def test_a_cached_master_archive_is_private(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print(1)\n")
    spec = JobSpec(script=str(script))
    cached = to_skein(spec, am_source=URL + "am-0.zip").master.files["am"]
    assert (str(cached.visibility), str(cached.type)) == ("PRIVATE", "ARCHIVE")
    local = to_skein(spec, am_source=master_zip()).master.files["am"]
    assert str(local.visibility) == "APPLICATION"
