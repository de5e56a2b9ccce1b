"""Run inside an image by ``tfyarn image check``: can a tfyarn task run here?

Prints one JSON line per check (``{"check", "ok", "detail"}``); stdlib only
until each check imports what it checks, so a broken image still reports.
"""

from __future__ import annotations

import json
import os
import socket
import sys
from collections.abc import Callable


def _tfyarn() -> str:
    import tfyarn

    return f"tfyarn {tfyarn.__version__} from {os.path.dirname(tfyarn.__file__)}"


def _tensorflow() -> str:
    import tensorflow as tf

    return f"TensorFlow {tf.__version__}"


def _hdfs() -> str:
    from tfyarn.contract.hadoop_conf import explicit_conf_dir

    conf = explicit_conf_dir() or ""
    if not conf:
        return "skipped: no Hadoop configuration mounted"
    import hdfs_native

    client = hdfs_native.Client()
    entries = list(client.list_status("/"))
    return f"listed / through hdfs-native ({len(entries)} entries; config {conf})"


def _tf_server() -> str:
    import tensorflow as tf

    with socket.socket() as s:
        s.bind(("localhost", 0))
        port = s.getsockname()[1]
    cluster = tf.train.ClusterSpec({"worker": [f"localhost:{port}"]})
    server = tf.distribute.Server(cluster, job_name="worker", task_index=0, start=True)
    return f"a TensorFlow server started on {server.target}"


CHECKS: tuple[tuple[str, Callable[[], str]], ...] = (
    ("tfyarn imports", _tfyarn),
    ("TensorFlow imports", _tensorflow),
    ("HDFS answers", _hdfs),
    ("TensorFlow server starts", _tf_server),
)


def main() -> int:
    failed = 0
    for name, check in CHECKS:
        try:
            detail, ok = check(), True
        except Exception as exc:  # noqa: BLE001 (each failure is one line)
            detail, ok = f"{type(exc).__name__}: {exc}".splitlines()[0], False
            failed += 1
        print(json.dumps({"check": name, "ok": ok, "detail": detail}), flush=True)
    print(json.dumps({"check": "user", "ok": True, "detail": f"uid {os.getuid()}"}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
