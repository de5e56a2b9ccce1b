"""``tfyarn data put|make-example|ls|cat-count``: move data sets to and from HDFS."""

from __future__ import annotations

import argparse
import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from tfyarn.contract.noise import is_startup_noise

# Read when TensorFlow loads (later, inside a command): its C++ INFO start-up
# lines (cpu_feature_guard, oneDNN) would be most of a data command's output.
# A user's own setting wins.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")
# How long the filter may take to pass on what a command wrote last.
_DRAIN_S = 5.0

_EPILOG = """\
examples:
  tfyarn data make-example hdfs:///tmp/tfyarn/digits --shards 8
  tfyarn data put ./train hdfs:///user/me/train
  tfyarn data ls 'hdfs:///tmp/tfyarn/digits/train-*'
  tfyarn data count 'hdfs:///tmp/tfyarn/digits/train-*'
"""


_BARE = (
    "a bare path means fs.defaultFS, as in `hdfs dfs` (file:///... is the local disk)"
)


def add_commands(subparsers: Any) -> None:
    """Add ``tfyarn data ...`` to the ``tfyarn`` parser."""
    data = subparsers.add_parser(
        "data",
        help="put data sets on HDFS, list and check them",
        description="Put data sets on HDFS, write the example data set, list files.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = data.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    sub.required = True

    p = sub.add_parser(
        "put",
        help="copy a local file or directory to HDFS (each file atomically)",
        description="Copy a local file or directory tree to an hdfs:// (or local) "
        "destination. Each file is written under a temporary name and renamed, so "
        "readers never see partial files.",
    )
    p.add_argument("local", help="local file or directory")
    p.add_argument("remote", help=f"destination, e.g. hdfs:///user/me/data; {_BARE}")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing destination (a directory is replaced whole)",
    )
    p.set_defaults(func=_put)

    p = sub.add_parser(
        "make-example",
        help="write the synthetic digits data set as shards",
        description="Write the synthetic 8x8 digits data set (learnable, "
        "deterministic, no download) as train-* and test-* shards.",
    )
    p.add_argument(
        "directory", help=f"destination, e.g. hdfs:///tmp/tfyarn/digits; {_BARE}"
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="replace an existing DIRECTORY whole (old shards gone, never a mix)",
    )
    p.add_argument("--shards", type=int, default=8, help="files per split (8)")
    p.add_argument("--train", type=int, default=8000, help="training examples")
    p.add_argument("--test", type=int, default=2000, help="test examples")
    p.add_argument("--seed", type=int, default=0, help="generator seed (0)")
    p.add_argument(
        "--format",
        choices=("tfrecord", "parquet", "both"),
        default="tfrecord",
        help="file format (both: Parquet goes under DIRECTORY/parquet)",
    )
    p.set_defaults(func=_make_example)

    p = sub.add_parser("ls", help="list files matching a pattern or in a directory")
    p.add_argument("pattern", help=f"URL, directory or glob; {_BARE}")
    p.set_defaults(func=_ls)

    p = sub.add_parser(
        "count", help="count (and CRC-check) the records of TFRecord files"
    )
    p.add_argument("pattern", help=f"URL, directory or glob of TFRecord files; {_BARE}")
    p.add_argument(
        "--compression",
        default="auto",
        type=str.upper,
        choices=("AUTO", "GZIP", "ZLIB", "NONE"),
        help="auto (by extension), GZIP, ZLIB or NONE",
    )
    p.set_defaults(func=_count)


@contextlib.contextmanager
def _startup_lines_dropped() -> Iterator[None]:
    """Pass everything written to stderr (fd 2) through but TensorFlow's
    start-up lines: on CPUs where oneDNN is on, its notice is logged before
    absl reads TF_CPP_MIN_LOG_LEVEL, so the setting above cannot stop it."""
    sys.stderr.flush()
    original = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def pump() -> None:
        with os.fdopen(read_end, "rb") as pipe:
            for line in pipe:
                if not is_startup_noise(line.decode(errors="replace")):
                    view = memoryview(line)
                    while view:
                        view = view[os.write(original, view) :]

    thread = threading.Thread(target=pump, name="stderr-filter", daemon=True)
    thread.start()
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(original, 2)  # closes the pipe's write end: the pump sees EOF
        thread.join(_DRAIN_S)
        os.close(original)


def _quiet(command: Callable[[argparse.Namespace], int]) -> Callable[..., int]:
    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        with _startup_lines_dropped():
            return command(args)

    return run


@_quiet
def _put(args: argparse.Namespace) -> int:
    from tfyarn.data import fs as _fs
    from tfyarn.data import writers

    remote = _fs.qualify(args.remote)
    try:
        written = writers.put(args.local, remote, force=args.force)
    except FileNotFoundError as exc:
        if isinstance(exc, _fs.HdfsError):
            raise
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    where = remote if len(written) != 1 else written[0]
    print(f"Wrote {len(written)} file(s) to {where}")
    return 0


@_quiet
def _make_example(args: argparse.Namespace) -> int:
    from tfyarn.data import example
    from tfyarn.data import fs as _fs

    if args.shards < 1:
        print("Error: --shards must be >= 1", file=sys.stderr)
        return 1
    written = example.write_digits(
        _fs.qualify(args.directory),
        force=args.force,
        shards=args.shards,
        train=args.train,
        test=args.test,
        seed=args.seed,
        fmt=args.format,
    )
    for split, urls in written.items():
        print(f"{split}: {len(urls)} shard(s), e.g. {urls[0]}")
    first = next(iter(written.values()))[0].rsplit("/", 1)[0]
    print(f"Next: tfyarn data count '{first}/train-*'")
    return 0


@_quiet
def _ls(args: argparse.Namespace) -> int:
    from tfyarn.data import fs as _fs

    pattern = _fs.qualify(args.pattern)
    fs = _fs.resolve(pattern)
    glob = _fs.has_magic(pattern)
    if glob:
        infos = fs.glob(pattern)
    else:
        info = fs.info(pattern)
        infos = fs.ls(pattern) if info.is_dir else [info]
    for info in infos:
        kind = "d" if info.is_dir else "-"
        print(f"{kind} {info.size:>12d}  {info.url}")
    if glob and not infos:  # an empty directory lists nothing, as `ls` does
        print(f"Error: nothing matches {pattern}", file=sys.stderr)
        return 1
    return 0


@_quiet
def _count(args: argparse.Namespace) -> int:
    from tfyarn.data import fs as _fs
    from tfyarn.data import sharding, tfrecord

    total = 0
    for url in sharding.list_files(_fs.qualify(args.pattern)):
        n = sum(
            len(b)
            for b in tfrecord.read_record_batches(url, compression=args.compression)
        )
        print(f"{n:>10d}  {url}")
        total += n
    print(f"{total:>10d}  total")
    return 0
