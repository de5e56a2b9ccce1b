"""The environment that carries a task's identity: names, and who sets what.

A task's container gets its identity one of two ways (``tfyarn.client.compile.to_skein``):

- **declared**: the job's initial tasks are the skein services' instances,
  requested with the application and started before the master knows their
  YARN containers. The container carries only the service's env (:data:`JOB`,
  :data:`ROLE`); the task index is the skein instance (``SKEIN_CONTAINER_ID``
  ``worker_3`` is worker 3), the attempt 0, and the master's address is read
  from skein's key-value store (``tfyarn.master``);
- **added** by the master (``add_container``: replacements, cluster restarts,
  gang give-backs): :func:`task_env` says it all, and the instance number is
  not the index (skein numbers every container of a service in turn).

Either way the runtime hands :func:`task_env` to the script, so user code (and
``tfyarn.report_progress``) sees the same TFYARN_* values.
"""

from __future__ import annotations

from collections.abc import Mapping

JOB = "TFYARN_JOB"  # base64 JSON of the JobSpec
ROLE = "TFYARN_ROLE"  # chief | worker | ps | evaluator
TASK_INDEX = "TFYARN_TASK_INDEX"
ATTEMPT = "TFYARN_ATTEMPT"  # which launch of this task (0 first)
MASTER_ADDRESS = "TFYARN_MASTER_ADDRESS"  # host:port of the master's gRPC service
RESTART = "TFYARN_RESTART"  # how many times the whole cluster was restarted
PORT = "TFYARN_PORT"  # a port to reuse (a replaced task keeps its address when it can)
# Long jobs on a secure cluster (longer than the HDFS delegation tokens'
# maximum lifetime, 7 days by default): with --principal/--keytab the keytab
# travels to the master alone, private to the application, under this name,
# and the principal in this variable (am/tokens.py).
KEYTAB_FILE = "tfyarn.keytab"
KEYTAB_PRINCIPAL = "TFYARN_KEYTAB_PRINCIPAL"
# The script's hdfs:// plugin for TensorFlow (a library path; tfyarn/hdfs.py).
HDFS_PLUGIN = "TFYARN_HDFS_PLUGIN"
# Set by skein in every container: "<service>_<instance>".
SKEIN_CONTAINER_ID = "SKEIN_CONTAINER_ID"


def task_env(
    *, index: int, attempt: int, master_address: str, restart: int, port: int = 0
) -> dict[str, str]:
    """A task's identity as environment values (the master's ``add_container``
    env, and what the runtime gives the script)."""
    env = {
        TASK_INDEX: str(index),
        ATTEMPT: str(attempt),
        MASTER_ADDRESS: master_address,
        RESTART: str(restart),
    }
    if port:
        env[PORT] = str(port)  # a replaced task keeps its address
    return env


def declared_container_id(role: str, index: int) -> str:
    """skein's id of the container the application spec requested for a task.

    >>> declared_container_id("worker", 3)
    'worker_3'
    """
    return f"{role}_{index}"


def task_index(env: Mapping[str, str]) -> int:
    """The task index: :data:`TASK_INDEX` if the master set it, else the skein
    instance of a declared container. Raises ValueError if neither is there.

    >>> task_index({"SKEIN_CONTAINER_ID": "worker_3"})
    3
    >>> task_index({"TFYARN_TASK_INDEX": "1", "SKEIN_CONTAINER_ID": "worker_7"})
    1
    """
    if env.get(TASK_INDEX):
        return int(env[TASK_INDEX])
    container = env.get(SKEIN_CONTAINER_ID, "")
    _, sep, instance = container.rpartition("_")
    if not sep or not instance.isdigit():
        raise ValueError(
            f"neither {TASK_INDEX} nor a skein container id "
            f"({SKEIN_CONTAINER_ID}={container!r}) gives the task index"
        )
    return int(instance)
