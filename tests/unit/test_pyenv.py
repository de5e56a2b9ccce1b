"""--python_env pieces: parsing, layers, keys, packing, the default's refusal."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from tfyarn.client.pyenv import choose, key, layers, pack, parse
from tfyarn.errors import SpecError


def _venv(where: Path) -> Path:
    """A real, empty virtualenv (no pip: fast)."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(where)
    return where


def _site(prefix: Path) -> Path:
    return layers.site_dirs(prefix)[0]


def _dist(site: Path, name: str, record: str = "x.py,sha256=abc,1\n") -> None:
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "RECORD").write_text(record)
    (info / "METADATA").write_text(f"Name: {name}\n")


# -- what --python_env names -------------------------------------------------


def test_parse_kinds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _venv(tmp_path / "env")
    assert parse(str(env)).kind == "venv"
    assert parse(str(env)).base_python() == os.path.realpath(env / "bin" / "python")
    conda = tmp_path / "conda"
    (conda / "conda-meta").mkdir(parents=True)
    assert parse(str(conda)).kind == "conda"
    archive = tmp_path / "env.tar.gz"
    archive.write_bytes(b"")
    assert parse(str(archive)).kind == "archive"
    assert parse("hdfs:///user/me/env.tgz").kind == "remote"
    monkeypatch.setattr(sys, "prefix", str(env))
    auto = parse("auto")
    assert (auto.kind, auto.location) == ("venv", str(env))


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("missing-env", "not found"),
        ("plain", "neither a virtualenv"),
        ("env.pex", "not a pex file"),
        ("env.rpm", "not an archive YARN can unpack"),
        ("s3a://bucket/env.tar.gz", "on HDFS"),
        ("hdfs:///user/me/env.pex", "must be an archive"),
    ],
)
def test_parse_refuses(tmp_path: Path, value: str, words: str) -> None:
    (tmp_path / "plain").mkdir()
    for name in ("env.pex", "env.rpm"):
        (tmp_path / name).write_bytes(b"")
    target = value if "://" in value else str(tmp_path / value)
    with pytest.raises(SpecError, match="--python_env") as info:
        parse(target)
    assert words in str(info.value)


def test_auto_refuses_a_system_python(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    with pytest.raises(SpecError, match="not a virtualenv or conda environment"):
        parse("auto")


# -- code outside the environment --------------------------------------------


def test_layers_of_editable_installs(tmp_path: Path) -> None:
    prefix = _venv(tmp_path / "env")
    site = _site(prefix)
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    other_site = tmp_path / "other" / "site-packages"
    other_site.mkdir(parents=True)
    _dist(other_site, "dep")
    mapped = tmp_path / "mapped" / "mod"
    mapped.mkdir(parents=True)
    (mapped / "__init__.py").write_text("")
    # hatchling / setup.py develop: a directory per line.
    (site / "_editable_project.pth").write_text(f"{project}\n")
    # a venv stacked on another's site-packages.
    (site / "stack.pth").write_text(f"{other_site}\n")
    # setuptools' finder.
    (site / "__editable___mod_1_0_finder.py").write_text(
        f"MAPPING: dict[str, str] = {{'mod': {str(mapped)!r}}}\n"
    )
    (site / "__editable__.mod-1.0.pth").write_text(
        "import __editable___mod_1_0_finder; __editable___mod_1_0_finder.install()\n"
    )
    # kept: code, and paths inside the prefix.
    (site / "distutils-precedence.pth").write_text("import os; os.environ\n")
    (site / "inside.pth").write_text("./pkg_inside\n")
    (site / "pkg_inside").mkdir()
    # a path the client lacks too is nothing to ship.
    (site / "gone.pth").write_text("/nonexistent/tfyarn-test\n")

    found = layers.find(str(prefix))
    assert found.layers == (
        layers.Layer(path=str(mapped), kind="package", name="mod"),
        layers.Layer(path=str(project), kind="source"),
        layers.Layer(path=str(other_site), kind="site"),
    )
    rel = str(site.relative_to(prefix))
    assert set(found.excluded) == {
        f"{rel}/__editable__.mod-1.0.pth",
        f"{rel}/__editable___mod_1_0_finder.py",
        f"{rel}/_editable_project.pth",
        f"{rel}/gone.pth",
        f"{rel}/stack.pth",
    }


def test_layer_files_from_git_and_walk(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("x = 1\n")
    (project / "pkg" / "__pycache__").mkdir()
    (project / "pkg" / "__pycache__" / "m.pyc").write_bytes(b"")
    _venv(project / ".venv")
    (project / "ignored.log").write_text("")
    layer = layers.Layer(path=str(project), kind="source")
    walked = {name for _, name in layers.layer_files(layer)}
    assert walked == {"ignored.log", "pkg/__init__.py"}  # no venv, no cache
    (project / ".gitignore").write_text("*.log\n.venv/\n")
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    from_git = {name for _, name in layers.layer_files(layer)}
    assert from_git == {".gitignore", "pkg/__init__.py"}


def test_source_layer_too_big(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "big.bin").write_bytes(b"x" * 2048)
    monkeypatch.setattr(layers, "MAX_SOURCE_BYTES", 1024)
    with pytest.raises(SpecError, match="without -e"):
        layers.layer_files(layers.Layer(path=str(tmp_path), kind="source"))


# -- cache keys ----------------------------------------------------------------


def test_environment_key_follows_installs(tmp_path: Path) -> None:
    prefix = _venv(tmp_path / "env")
    site = _site(prefix)
    _dist(site, "a")

    def k(excluded: tuple[str, ...] = ()) -> str:
        return key.environment(
            str(prefix), kind="venv", base_python=sys.executable, excluded=excluded
        )

    first = k()
    assert k() == first  # stable
    (site / "a-1.0.dist-info" / "RECORD").write_text("x.py,sha256=def,1\n")
    upgraded = k()
    assert upgraded != first  # reinstall / upgrade rewrites RECORD
    _dist(site, "b")
    added = k()
    assert added != upgraded
    (site / "loose.py").write_text("")
    assert k() != added  # dropped in by hand, outside any distribution
    assert k(("lib/x.pth",)) != k()


def test_files_key_is_content(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("a = 1\n")
    before = key.files([(str(f), "m.py")])
    f.write_text("a = 2\n")
    assert key.files([(str(f), "m.py")]) != before
    assert key.files([(str(f), "n.py")]) != key.files([(str(f), "m.py")])


# -- packing -------------------------------------------------------------------


def test_pack_venv_leaves_out_editable_pth(tmp_path: Path) -> None:
    prefix = _venv(tmp_path / "env")
    site = _site(prefix)
    (site / "_editable.pth").write_text(f"{tmp_path}\n")
    (site / "mod.py").write_text("")
    found = layers.find(str(prefix))
    out = tmp_path / "env.tar.gz"
    pack.atomically(
        out,
        lambda o: pack.environment("venv", str(prefix), o, excluded=found.excluded),
    )
    with tarfile.open(out) as tar:
        names = set(tar.getnames())
        python = tar.getmember("bin/python")
    rel = str(site.relative_to(prefix))
    assert "pyvenv.cfg" in names and f"{rel}/mod.py" in names
    assert f"{rel}/_editable.pth" not in names
    assert python.issym()


def test_atomically_leaves_nothing_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "env.tar.gz"

    def half(out: str) -> None:
        Path(out).write_bytes(b"half")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        pack.atomically(target, half)
    assert list(tmp_path.iterdir()) == []


def test_pack_files_zip(tmp_path: Path) -> None:
    src = tmp_path / "m.py"
    src.write_text("x = 1\n")
    out = tmp_path / "layer.zip"
    pack.files([(str(src), "pkg/m.py")], str(out))
    with zipfile.ZipFile(out) as z:
        assert z.read("pkg/m.py") == b"x = 1\n"


# -- the default ----------------------------------------------------------------


def test_choose_local_nodes_keep_the_client_python() -> None:
    import socket

    # Accepted: choose returns (refusing raises SpecError).
    here = ["localhost", "127.0.0.1"]
    assert choose(python_env="", python_given=False, node_hosts=here) is None
    me = [socket.gethostname()]
    assert choose(python_env="", python_given=False, node_hosts=me) is None


def test_choose_refuses_other_hosts_naming_the_option() -> None:
    with pytest.raises(SpecError) as info:
        choose(
            python_env="",
            python_given=False,
            node_hosts=["node1.example.invalid", "node2.example.invalid"],
        )
    assert "--python_env auto" in str(info.value)
    assert "node1.example.invalid" in str(info.value)
    # Either option says where Python comes from.
    choose(python_env="auto", python_given=False, node_hosts=["n1.example.invalid"])
    # --python, even this client's own interpreter, is the user's word.
    choose(python_env="", python_given=True, node_hosts=["n.example.invalid"])


def test_choose_refuses_both() -> None:
    with pytest.raises(SpecError, match="not both"):
        choose(python_env="auto", python_given=True, node_hosts=[])


def test_master_exit_127_names_the_shipped_environment() -> None:
    from tfyarn.client import jobs

    diag = (
        "Application driver failed with exit code 127, see logs for more information."
    )
    (line,) = jobs.explain(diag, host="node1.example", python_env="auto")
    assert "--python_env auto cannot run on node node1.example" in line
    assert "--task master" in line
    (plain,) = jobs.explain(diag, host="node1.example", python="/opt/py")
    assert "/opt/py (--python) was not found" in plain


def test_prune_keeps_the_newest_of_a_label(tmp_path: Path) -> None:
    for i, name in enumerate(["layer-a-1.zip", "layer-a-2.zip", "layer-a-3.zip"]):
        (tmp_path / name).write_bytes(b"")
        os.utime(tmp_path / name, (i, i))
    (tmp_path / "layer-b-1.zip").write_bytes(b"")
    pack.prune(tmp_path / "layer-a-3.zip")
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "layer-a-2.zip",
        "layer-a-3.zip",
        "layer-b-1.zip",
    ]


def test_level_zero_packs_plain_tar(tmp_path: Path) -> None:
    prefix = _venv(tmp_path / "env")
    out = tmp_path / f"env{pack.tar_suffix(0)}"
    pack.environment("venv", str(prefix), str(out), excluded=(), level=0)
    with open(out, "rb") as f:
        assert f.read(2) != b"\x1f\x8b"  # not gzip
    with tarfile.open(out) as tar:
        assert "pyvenv.cfg" in tar.getnames()
    src = tmp_path / "m.py"
    src.write_text("x = 1\n")
    for name in ("layer.tar", "layer.zip"):
        pack.files([(str(src), "m.py")], str(tmp_path / name), level=0)
    with zipfile.ZipFile(tmp_path / "layer.zip") as z:
        assert z.getinfo("m.py").compress_type == zipfile.ZIP_STORED
