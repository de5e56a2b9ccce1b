"""What ``--python_env`` adds to a submit once the environment is cached.

Usage (a cluster running, e.g. after ``eval "$(tfyarn cluster env)"``)::

    python tests/benchmarks/python_env.py [--env auto] [--repeat 5]

The first call may pack and upload (timed apart, with the archive sizes); the
next ones find every archive in the HDFS cache: the cost a cached resubmit
adds (goal: under 1 s). The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from tfyarn.client import pyenv
from tfyarn.client.pyenv import key, layers, parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="auto")
    parser.add_argument("--repeat", type=int, default=5)
    opts = parser.parse_args()

    began = time.monotonic()
    interpreter = pyenv.ship(opts.env, say=print)
    first = time.monotonic() - began
    cached = []
    for _ in range(opts.repeat):
        began = time.monotonic()
        pyenv.ship(opts.env)
        cached.append(time.monotonic() - began)
    source = parse(opts.env)
    began = time.monotonic()
    if source.packed:
        outside = layers.find(source.location)
        key.environment(
            source.location,
            kind=source.kind,
            base_python=source.base_python(),
            excluded=outside.excluded,
        )
    keys = time.monotonic() - began
    result = {
        "benchmark": "python_env",
        "env": source.location,
        "archives": sorted(a.url for a in interpreter.files.values()),
        "first_s": round(first, 3),
        "cached_s": [round(c, 3) for c in cached],
        "cached_median_s": round(statistics.median(cached), 3),
        "environment_key_s": round(keys, 3),
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
