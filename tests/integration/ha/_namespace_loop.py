"""Change the namespace of ``hdfs://`` in a loop until a stop file appears.

Usage: ``python _namespace_loop.py BASE STOP``. Each round, through the
TensorFlow plugin and then through ``tfyarn.data.fs``: make a directory,
write a small file under a temporary name, rename it over the last one, and
every third round delete the result; the calls a failover can lose mid-call.
Several threads run rounds at once, each in folders of its own, so that
calls are in flight whenever the NameNode dies. Prints ``ready`` once every
thread has done a round, then one JSON line when stopped:
``{"rounds": N, "calls": N, "errors": ["<client> <op>: <message>", ...]}``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable

import tensorflow as tf

import tfyarn
from tfyarn.data.fs import resolve

PAYLOAD = b"x" * 20_000
THREADS = 8


def plugin_round(base: str, n: int) -> list[tuple[str, Callable[[], object]]]:
    folder = f"{base}/tf/d{n % 4}"

    def write() -> None:
        with tf.io.gfile.GFile(f"{folder}/f.tmp", "wb") as out:
            out.write(PAYLOAD)

    return [
        ("mkdirs", lambda: tf.io.gfile.makedirs(folder)),
        ("write", write),
        ("rename", lambda: tf.io.gfile.rename(f"{folder}/f.tmp", f"{folder}/f", True)),
        ("delete", lambda: n % 3 == 2 and tf.io.gfile.remove(f"{folder}/f")),
    ]


def data_round(base: str, n: int) -> list[tuple[str, Callable[[], object]]]:
    folder = f"{base}/data/d{n % 4}"
    fs = resolve(folder)

    def write() -> None:
        with fs.open_output(f"{folder}/f.tmp") as out:
            out.write(PAYLOAD)

    return [
        ("mkdirs", lambda: fs.mkdirs(folder)),
        ("write", write),
        ("rename", lambda: fs.rename(f"{folder}/f.tmp", f"{folder}/f", overwrite=True)),
        ("delete", lambda: n % 3 == 2 and fs.delete(f"{folder}/f")),
    ]


class Tally:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.rounds = self.calls = 0
        self.errors: list[str] = []
        self.started = threading.Barrier(THREADS + 1)


def run(base: str, stop: str, tally: Tally) -> None:
    n = 0
    while n == 0 or not os.path.exists(stop):
        for client, steps in (("plugin", plugin_round), ("data", data_round)):
            for op, call in steps(base, n):
                try:
                    call()
                except Exception as exc:  # noqa: BLE001 (every failure is the finding)
                    with tally.lock:
                        tally.errors.append(
                            f"{client} {op}: {type(exc).__name__}: {exc}"
                        )
                    break  # the round's later calls need this one
                finally:
                    with tally.lock:
                        tally.calls += 1
        with tally.lock:
            tally.rounds += 1
        n += 1
        if n == 1:
            tally.started.wait()


def main() -> None:
    base, stop = sys.argv[1], sys.argv[2]
    tfyarn.enable_hdfs()
    tally = Tally()
    threads = [
        threading.Thread(target=run, args=(f"{base}/t{i}", stop, tally))
        for i in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    tally.started.wait()
    print("ready", flush=True)
    for thread in threads:
        thread.join()
    print(
        json.dumps(
            {"rounds": tally.rounds, "calls": tally.calls, "errors": tally.errors}
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
