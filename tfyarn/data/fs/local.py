"""Local disk behind the same interface and error mapping as HDFS."""

from __future__ import annotations

import errno
import glob as _glob
import os
import shutil
from collections.abc import Callable, Iterator
from typing import IO, TypeVar
from urllib.parse import urlparse

from tfyarn.data.fs.base import READ_CHUNK, FileInfo, FileSystem
from tfyarn.data.fs.errors import mapped_error

T = TypeVar("T")


class LocalFileSystem(FileSystem):
    """Local disk, with the same error mapping as HDFS (``HdfsError``)."""

    @staticmethod
    def _path(url: str) -> str:
        return urlparse(url).path if url.startswith("file:") else url

    def _wrap(self, op: str, url: str, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except OSError as exc:
            raise mapped_error(op, url, exc) from exc

    def glob(self, pattern: str) -> list[FileInfo]:
        path = self._path(pattern)
        return sorted((self._info(p) for p in _glob.glob(path)), key=lambda i: i.url)

    def _info(self, path: str) -> FileInfo:
        st = os.stat(path)
        return FileInfo(url=path, size=st.st_size, is_dir=os.path.isdir(path))

    def info(self, url: str) -> FileInfo:
        return self._wrap("stat", url, lambda: self._info(self._path(url)))

    def ls(self, url: str) -> list[FileInfo]:
        path = self._path(url)
        names = self._wrap("list", url, lambda: os.listdir(path))
        return sorted(
            (self._info(os.path.join(path, n)) for n in names), key=lambda i: i.url
        )

    def read_chunks(self, url: str, chunk_size: int = READ_CHUNK) -> Iterator[bytes]:
        path = self._path(url)
        with self._wrap("open", url, lambda: open(path, "rb")) as f:
            while True:
                chunk = f.read(chunk_size)
                if not chunk:
                    return
                yield chunk

    def open_input(self, url: str) -> IO[bytes]:
        path = self._path(url)
        return self._wrap("open", url, lambda: open(path, "rb"))

    def open_output(self, url: str) -> IO[bytes]:
        path = self._path(url)
        return self._wrap("create", url, lambda: open(path, "wb"))

    def mkdirs(self, url: str) -> None:
        path = self._path(url)
        self._wrap("mkdir", url, lambda: os.makedirs(path, exist_ok=True))

    def rename(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        s, d = self._path(src), self._path(dst)

        def do() -> None:
            if not overwrite and os.path.exists(d):
                raise FileExistsError(errno.EEXIST, "destination exists", d)
            os.replace(s, d)

        self._wrap("rename", src, do)

    def delete(self, url: str, *, recursive: bool = False) -> None:
        path = self._path(url)

        def do() -> None:
            if os.path.isdir(path) and not os.path.islink(path):
                if recursive:
                    shutil.rmtree(path)
                else:
                    os.rmdir(path)
            elif os.path.lexists(path):
                os.unlink(path)

        self._wrap("delete", url, do)
