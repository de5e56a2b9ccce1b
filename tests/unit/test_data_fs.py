"""The filesystem layer: local behaviour and fast, clear HDFS connection errors."""

from __future__ import annotations

import time

import pytest

from tfyarn.data import fs as _fs
from tfyarn.data.writers import put
from tfyarn.errors import HdfsError


def test_a_changed_hadoop_conf_dir_is_another_filesystem(
    tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Once, a client cached under a secure cluster's config served hdfs:///
    # for the next cluster in the same process.
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path / "one"))
    first = _fs.resolve("hdfs:///x")
    assert first is _fs.resolve("hdfs:///y")
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path / "two"))
    assert _fs.resolve("hdfs:///x") is not first


def test_resolve_schemes(tmp_path) -> None:
    assert isinstance(_fs.resolve(str(tmp_path)), _fs.LocalFileSystem)
    assert isinstance(_fs.resolve(f"file://{tmp_path}"), _fs.LocalFileSystem)
    hdfs = _fs.resolve("hdfs://nn.example:8020/x")
    assert isinstance(hdfs, _fs.HdfsFileSystem)
    assert hdfs is _fs.resolve("hdfs://nn.example:8020/y")  # cached per NameNode
    assert _fs.resolve("viewfs://cluster/x").prefix == "viewfs://cluster"
    with pytest.raises(HdfsError, match="unknown scheme 's3'"):
        _fs.resolve("s3://bucket/x")


def test_write_atomic_leaves_no_temp_on_failure(tmp_path) -> None:
    fs = _fs.resolve(str(tmp_path))
    target = str(tmp_path / "out.bin")

    def boom(out) -> None:
        out.write(b"partial")
        raise RuntimeError("writer died")

    with pytest.raises(RuntimeError):
        fs.write_atomic(target, boom)
    assert list(tmp_path.iterdir()) == []
    fs.write_atomic(target, b"whole")
    assert (tmp_path / "out.bin").read_bytes() == b"whole"
    assert [p.name for p in tmp_path.iterdir()] == ["out.bin"]


def test_put_directory(tmp_path) -> None:
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "a.txt").write_bytes(b"a")
    (src / "sub" / "b.txt").write_bytes(b"b" * 10_000_000)
    dst = tmp_path / "dst"
    written = put(str(src), str(dst))
    assert sorted(written) == [str(dst / "a.txt"), str(dst / "sub" / "b.txt")]
    assert (dst / "sub" / "b.txt").read_bytes() == b"b" * 10_000_000


def test_get_file_and_chunks(tmp_path) -> None:
    fs = _fs.resolve(str(tmp_path))
    data = bytes(range(256)) * 1000
    (tmp_path / "f").write_bytes(data)
    assert b"".join(fs.read_chunks(str(tmp_path / "f"), chunk_size=1000)) == data
    fs.get_file(str(tmp_path / "f"), str(tmp_path / "g"))
    assert (tmp_path / "g").read_bytes() == data


def test_missing_local_file_is_hdfs_error(tmp_path) -> None:
    fs = _fs.resolve(str(tmp_path))
    with pytest.raises(HdfsError, match="does not exist"):
        list(fs.read_chunks(str(tmp_path / "nope")))
    assert not fs.exists(str(tmp_path / "nope"))


def test_unreachable_namenode_fails_fast() -> None:
    # Nothing listens on port 1: hdfs-native's default retries take minutes.
    fs = _fs.HdfsFileSystem("hdfs", "127.0.0.1:1")
    start = time.monotonic()
    with pytest.raises(HdfsError, match=r"cannot reach hdfs://127\.0\.0\.1:1"):
        fs.glob("hdfs://127.0.0.1:1/x/part-*")
    assert time.monotonic() - start < 15


def test_metadata_deadline(monkeypatch) -> None:
    # A call that never returns must become an HdfsError at the deadline.
    fs = _fs.HdfsFileSystem("hdfs", "127.0.0.1:1", timeout=0.5)
    monkeypatch.setattr(fs, "_get_client", lambda: object())
    start = time.monotonic()
    with pytest.raises(HdfsError, match=r"did not answer within 0\.5 s"):
        fs._call("stat", "hdfs://127.0.0.1:1/x", lambda c: time.sleep(3))
    assert time.monotonic() - start < 2


def test_error_mapping_permission() -> None:
    err = _fs._mapped_error(
        "open", "hdfs://nn/secret", PermissionError("Permission denied: user=bob")
    )
    assert "permission denied for open on hdfs://nn/secret" in str(err)


def test_error_classes_match_builtins() -> None:
    missing = _fs._mapped_error("stat", "hdfs://nn/x", FileNotFoundError("x"))
    assert isinstance(missing, FileNotFoundError) and isinstance(missing, HdfsError)
    other = _fs._mapped_error("stat", "hdfs://nn/x", OSError("disk on fire"))
    assert type(other) is HdfsError and "disk on fire" in str(other)
    refused = _fs._mapped_error("ls", "hdfs://nn/x", OSError("Connection refused"))
    assert isinstance(refused, ConnectionError)


def test_stuck_call_does_not_block_interpreter_exit(tmp_path) -> None:
    import subprocess
    import sys

    code = (
        "import time\n"
        "from tfyarn.data import fs\n"
        "f = fs.HdfsFileSystem('hdfs', '127.0.0.1:1', timeout=0.3)\n"
        "f._get_client = lambda: object()\n"
        "try:\n"
        "    f._call('stat', 'hdfs://x/y', lambda c: time.sleep(60))\n"
        "except fs.HdfsError as e:\n"
        "    print('deadline ok')\n"
    )
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    assert "deadline ok" in out.stdout
    assert time.monotonic() - start < 20  # not the 60 s of the stuck call


def test_silent_namenode_hits_the_deadline(monkeypatch) -> None:
    import socket

    # Accepts TCP connections (the kernel does) but never answers an RPC.
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        port = server.getsockname()[1]
        monkeypatch.setenv("TFYARN_HDFS_TIMEOUT", "2")
        fs = _fs.HdfsFileSystem("hdfs", f"127.0.0.1:{port}")
        start = time.monotonic()
        with pytest.raises(HdfsError, match=r"did not answer within 2 s"):
            fs.info(f"hdfs://127.0.0.1:{port}/x")
        assert time.monotonic() - start < 10


def test_server_stack_trace_is_not_in_the_message() -> None:
    exc = PermissionError(
        'Permission denied: user=bob, access=READ_EXECUTE, inode="/x"\n'
        "\tat org.apache.hadoop.hdfs.server.namenode.FSPermissionChecker.check(X.java:1)"
    )
    msg = str(_fs._mapped_error("list", "hdfs://nn/x", exc))
    assert "user=bob" in msg and "org.apache" not in msg


def test_rpc_error_form_is_shortened() -> None:
    class RPCError(Exception):
        pass

    exc = RPCError(
        "org.apache.hadoop.security.AccessControlException",
        'Permission denied: user=alice, access=EXECUTE, inode="/s":o:o:drwx------\n'
        "\tat org.apache.hadoop.hdfs.server.namenode.FSPermissionChecker.check(X:1)\n",
    )
    msg = str(_fs._mapped_error("create", "hdfs://nn/s/x", exc))
    assert "AccessControlException: Permission denied: user=alice" in msg
    assert "FSPermissionChecker" not in msg
    assert isinstance(_fs._mapped_error("create", "u", exc), PermissionError)


def test_rpc_error_repr_form_is_shortened() -> None:
    # What hdfs-native 0.14 actually raises: one string, the repr of its RPCError.
    exc = PermissionError(
        'RPCError("org.apache.hadoop.security.AccessControlException", '
        '"Permission denied: user=alice, access=READ_EXECUTE, '
        'inode=\\"/s\\":other:other:drwx------\\n\\tat org.apache.hadoop.hdfs.'
        'server.namenode.FSPermissionChecker.check(FSPermissionChecker.java:661)\\n")'
    )
    msg = str(_fs._mapped_error("glob", "hdfs://nn/s/*", exc))
    assert (
        "AccessControlException: Permission denied: user=alice, access=READ_EXECUTE, "
        'inode="/s":other:other:drwx------' in msg
    )
    assert "FSPermissionChecker" not in msg


def test_put_file_into_directory(tmp_path) -> None:
    (tmp_path / "a.txt").write_bytes(b"a")
    (tmp_path / "dst").mkdir()
    assert put(str(tmp_path / "a.txt"), str(tmp_path / "dst")) == [
        str(tmp_path / "dst" / "a.txt")
    ]
    assert put(str(tmp_path / "a.txt"), str(tmp_path / "new") + "/") == [
        str(tmp_path / "new" / "a.txt")
    ]
    assert (tmp_path / "new" / "a.txt").read_bytes() == b"a"
