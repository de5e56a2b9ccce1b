"""Where a job's final record lives, and how its writer tells the client it is done.

The master keeps the job's last ``tfyarn.status`` snapshot on HDFS when the
job ends (am/record.py), because the application's key-value store ends with
the application; ``tfyarn status`` reads it back once YARN reports the job
ended. Both sides find the file by :func:`record_url`, written only here.

skein's application directory (``.skein/<app_id>/``) is no place for it: it is
deleted when the application ends. The record goes to tfyarn's own per-user
directory instead, one file per job, readable by its owner only.
"""

from __future__ import annotations

# Under the user's HDFS home, beside tfyarn's caches (.tfyarn/envs, .tfyarn/am).
RECORD_DIR = ".tfyarn/jobs"
# A snapshot names hosts, containers and the scripts' error lines: the owner's only.
FILE_MODE = 0o600
DIR_MODE = 0o700
# How long the master gives HDFS to keep the record before it ends the
# application anyway (with a warning in its log).
WRITE_DEADLINE = 15.0

# skein key-value store key: whether the master has kept the record. ``tfyarn
# kill`` stops the tasks, then kills the application, which leaves the master
# a fraction of a second: the client waits (bounded) until this key leaves
# PENDING before it kills. A master that keeps no record never sets the key.
RECORD_KEY = "tfyarn.record"
PENDING = "pending"
WRITTEN = "written"
FAILED = "failed"


def record_dir(user: str) -> str:
    """The directory of ``user``'s job records.

    Examples
    --------
    >>> record_dir("alice")
    'hdfs:///user/alice/.tfyarn/jobs'
    """
    # hdfs:/// is fs.defaultFS, the same file system the master's markers use.
    return f"hdfs:///user/{user}/{RECORD_DIR}"


def record_url(user: str, app_id: str) -> str:
    """The final record of the application ``app_id`` that ``user`` ran.

    Examples
    --------
    >>> record_url("alice", "application_1700000000000_0001")
    'hdfs:///user/alice/.tfyarn/jobs/application_1700000000000_0001.json'
    """
    return f"{record_dir(user)}/{app_id}.json"
