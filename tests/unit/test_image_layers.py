"""``tfyarn image build``'s two layers: what goes in which, and the key that
decides when the distributions' layer is reused (the engine itself is in
tests/integration/docker/)."""

from __future__ import annotations

import subprocess
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

from tfyarn.image import build


def test_tfyarn_is_only_in_its_own_layer() -> None:
    names = build.closure(["tfyarn"])
    dependencies = [e.target for e in build._dependency_files(names)]
    own = [e.target for e in build._own_files()]
    package = build.SITE / "tfyarn"
    assert dependencies and not any(package in t.parents for t in dependencies)
    assert package / "image" / "build.py" in own
    assert package / "_shipped" / "am" / "__main__.py" in own
    metadata = [t for t in own if t.name == "METADATA"]
    assert len(metadata) == 1 and metadata[0].parent.name.startswith("tfyarn-")
    assert all(package in t.parents or t in metadata for t in own)
    assert not set(dependencies) & set(own)


def _entries(tmp_path: Path, sizes: dict[str, int]) -> list[build.Entry]:
    tmp_path.mkdir(exist_ok=True)
    out = []
    for name, size in sizes.items():
        path = tmp_path / name
        path.write_bytes(b"x" * size)
        out.append(build._file(path, build.SITE / name))
    return out


def test_the_environment_key_follows_the_base_and_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = {"base:1": "sha256:aaa", "base:2": "sha256:bbb"}

    def docker(args: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(args, 0, ids[args[-1]] + "\n", "")

    monkeypatch.setattr(build, "docker", docker)
    entries = _entries(tmp_path, {"a.py": 3, "b.so": 5})
    tag = build.environment_tag("base:1", "/usr/bin/python3", "3.11.2", entries)
    assert tag.startswith(build.ENV_REPOSITORY + ":")
    assert tag == build.environment_tag("base:1", "/usr/bin/python3", "3.11.2", entries)
    assert tag != build.environment_tag("base:2", "/usr/bin/python3", "3.11.2", entries)
    assert tag != build.environment_tag("base:1", "/usr/bin/python3", "3.11.9", entries)
    same = _entries(tmp_path / "again", {"a.py": 3, "b.so": 5})  # another venv
    assert tag == build.environment_tag("base:1", "/usr/bin/python3", "3.11.2", same)
    changed = _entries(tmp_path, {"a.py": 3, "b.so": 6})
    assert tag != build.environment_tag("base:1", "/usr/bin/python3", "3.11.2", changed)
    moved = [
        build._file(e.source, PurePosixPath("/x") / e.target.name) for e in changed
    ]  # type: ignore[arg-type]
    assert build.environment_tag("base:1", "/usr/bin/python3", "3.11.2", moved) not in (
        tag,
        build.environment_tag("base:1", "/usr/bin/python3", "3.11.2", changed),
    )


def test_the_environment_key_follows_the_hashes_pip_recorded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(
        build,
        "docker",
        lambda args, **_: subprocess.CompletedProcess(args, 0, "sha256:aaa\n", ""),
    )
    keys = set()
    for digest in ("sha256=one", "sha256=two"):  # same size, other content
        record = tmp_path / digest / "RECORD"
        record.parent.mkdir()
        record.write_text(f"x/a.py,{digest},3\n")
        entry = build._file(record, build.SITE / "x-1.dist-info" / "RECORD")
        keys.add(build.environment_tag("b", "/usr/bin/python3", "3.11.2", [entry]))
    assert len(keys) == 2
