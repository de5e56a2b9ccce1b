"""``tfyarn image build|check``: argv to :mod:`tfyarn.image` calls."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from tfyarn.image import build as _build
from tfyarn.image import check as _check
from tfyarn.image._engine import ImageError


def add_commands(subparsers: Any) -> None:
    image = subparsers.add_parser(
        "image",
        help="build or check a Docker image for tasks",
        description="Docker images for YARN's Docker runtime (--docker_image).",
    )
    sub = image.add_subparsers(dest="image_command", metavar="COMMAND")
    sub.required = True
    p = sub.add_parser(
        "build",
        help="build an image with this client's job environment",
        description="Build an image from --base with this client's Python "
        "environment (tfyarn and what it requires, and --with distributions) "
        f"in a venv at {_build.VENV}; the base needs Python {_build._PY}.",
    )
    p.add_argument(
        "--tag", required=True, help="the image's name (what --docker_image gets)"
    )
    p.add_argument(
        "--base",
        help=f"the base image (default {_build.default_base()}, which needs a registry)",
    )
    p.add_argument(
        "--with",
        dest="with_distributions",
        action="append",
        default=[],
        metavar="DIST",
        help="also this installed distribution and what it requires (repeatable)",
    )
    p.set_defaults(func=_build_cmd)
    p = sub.add_parser(
        "check",
        help="run an image the way YARN would and check a task can run in it",
        description="Run TAG as YARN's Docker runtime would (unprivileged user, "
        "host network, Hadoop configuration mounted read-only) and check that "
        "tfyarn and TensorFlow import, HDFS answers through hdfs-native and a "
        "TensorFlow server starts. Exit code 0 when all pass.",
    )
    p.add_argument("tag", help="the image")
    p.add_argument("--hadoop_conf", metavar="DIR", help="default: $HADOOP_CONF_DIR")
    p.add_argument("--docker_python", default=None, help="the interpreter in the image")
    p.set_defaults(func=_check_cmd)


def _build_cmd(ns: argparse.Namespace) -> int:
    try:
        built = _build.build(
            ns.tag, base=ns.base, with_distributions=ns.with_distributions
        )
    except ImageError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    layer = (
        f"their layer {built.environment} was there already, tfyarn copied"
        if built.reused_environment
        else f"their layer kept as {built.environment} for the next build"
    )
    print(
        f"Built {built.tag} from {built.base}: {len(built.distributions)} "
        f"distributions ({layer}), {built.files} files, "
        f"{built.size_bytes / 2**20:.0f} MiB in {built.seconds:.0f} s; tasks run "
        f"{_build.VENV}/bin/python ({built.python}).\n"
        f"Next: tfyarn image check {built.tag}"
    )
    return 0


def _check_cmd(ns: argparse.Namespace) -> int:
    python = ns.docker_python or _build.VENV.joinpath("bin", "python").as_posix()
    try:
        results = _check.check(ns.tag, hadoop_conf=ns.hadoop_conf, python=python)
    except ImageError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    for r in results:
        print(r.line())
    return 0 if all(r.ok for r in results) else 1
