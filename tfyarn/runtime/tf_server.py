"""The script every task of a server set runs (``tfyarn servers``).

A TensorFlow server for its task in ``TF_CONFIG`` and nothing else: the
program that uses the servers runs on the gateway (tfyarn/client/servers.py).
The runtime gives it ``TF_CONFIG`` (ps and workers only) and
``TF_GRPC_REUSE_PORT=1``, so the server binds the port the runtime holds.
``hdfs://`` works in ops placed here: the runtime's ``sitecustomize`` loads
tfyarn's filesystem plugin before this line runs.
"""

from __future__ import annotations

import json
import os


def main() -> None:
    import tensorflow as tf

    config = json.loads(os.environ["TF_CONFIG"])
    task = config["task"]
    server = tf.distribute.Server(
        tf.train.ClusterSpec(config["cluster"]),
        job_name=task["type"],
        task_index=int(task["index"]),
        protocol="grpc",
        start=True,
    )
    print(f"serving {task['type']}:{task['index']} at {server.target}", flush=True)
    server.join()


if __name__ == "__main__":
    main()
