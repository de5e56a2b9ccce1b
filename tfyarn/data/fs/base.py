"""The filesystem interface, and the operations composed from its primitives
(atomic writes, copies to and from local disk)."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO

from tfyarn.data.fs.errors import PathNotFoundError
from tfyarn.errors import HdfsError

# Reading in large pieces matters: each chunk crosses from Rust to Python once.
READ_CHUNK = 8 << 20


@dataclass(frozen=True)
class FileInfo:
    """What a listing says about one path."""

    url: str
    size: int
    is_dir: bool


class FileSystem:
    """The operations tfyarn needs from a filesystem.

    Paths given to the methods are full URLs (or local paths); the returned
    ``FileInfo.url`` values use the same form, so they can be passed back.
    """

    def glob(self, pattern: str) -> list[FileInfo]:
        """Files and directories matching a shell pattern, sorted by URL."""
        raise NotImplementedError

    def info(self, url: str) -> FileInfo:
        """Status of one path; :class:`PathNotFoundError` if missing."""
        raise NotImplementedError

    def exists(self, url: str) -> bool:
        """Whether the path exists."""
        try:
            self.info(url)
        except PathNotFoundError:
            return False
        return True

    def ls(self, url: str) -> list[FileInfo]:
        """Entries of a directory, sorted by URL."""
        raise NotImplementedError

    def read_chunks(self, url: str, chunk_size: int = READ_CHUNK) -> Iterator[bytes]:
        """Stream a whole file as a sequence of byte chunks."""
        raise NotImplementedError

    def read_bytes(self, url: str) -> bytes:
        """A whole (small) file."""
        return b"".join(self.read_chunks(url))

    def open_input(self, url: str) -> IO[bytes]:
        """A seekable binary file object (for pyarrow's Parquet reader)."""
        raise NotImplementedError

    def open_output(self, url: str) -> IO[bytes]:
        """A new file for writing (overwrites). Prefer :meth:`put_file`/:meth:`write_atomic`."""
        raise NotImplementedError

    def mkdirs(self, url: str) -> None:
        """Create a directory and its parents; no error if it exists."""
        raise NotImplementedError

    def rename(self, src: str, dst: str, *, overwrite: bool = False) -> None:
        """Rename within this filesystem (atomic on HDFS and POSIX)."""
        raise NotImplementedError

    def delete(self, url: str, *, recursive: bool = False) -> None:
        """Delete a file or directory; no error if it is already gone."""
        raise NotImplementedError

    # -- composed operations ---------------------------------------------------

    def write_atomic(self, url: str, data: bytes | Callable[[IO[bytes]], None]) -> None:
        """Write a file under a temporary name, then rename it into place.

        A reader never sees a partial file: either the old content (or nothing)
        or the whole new file. ``data`` is bytes or a function that writes to the
        open file.
        """
        tmp = _temp_sibling(url)
        try:
            with self.open_output(tmp) as out:
                if callable(data):
                    data(out)
                else:
                    out.write(data)
            self.rename(tmp, url, overwrite=True)
        except BaseException:
            self._discard(tmp)
            raise

    def put_file(self, local_path: str, url: str) -> None:
        """Copy a local file to ``url`` atomically (temp name, then rename)."""

        def copy(out: IO[bytes]) -> None:
            with open(local_path, "rb") as src:
                shutil.copyfileobj(src, out, READ_CHUNK)

        self.write_atomic(url, copy)

    def get_file(self, url: str, local_path: str) -> None:
        """Copy ``url`` to a local file (written under a temp name, then renamed)."""
        tmp = f"{local_path}.tmp-{uuid.uuid4().hex[:8]}"
        try:
            with open(tmp, "wb") as out:
                out.writelines(self.read_chunks(url))
            os.replace(tmp, local_path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise

    def _discard(self, url: str) -> None:
        try:
            self.delete(url)
        except HdfsError:
            pass  # best effort: the original error matters more


def _temp_sibling(url: str) -> str:
    head, _, name = url.rpartition("/")
    # Leading "_" and "." hide the temp file from the usual part-* patterns.
    return (
        f"{head}/._tmp.{name}.{uuid.uuid4().hex[:12]}"
        if head
        else (f"._tmp.{name}.{uuid.uuid4().hex[:12]}")
    )
