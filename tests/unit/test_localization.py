"""A file YARN could not localize is named, with the node and the reason.

The diagnostics below have the shape YARN gives them: the ResourceManager's
sentence about the master's attempt, the localizer's Java exception and its
stack, or the NodeManager's words about a task's container.
"""

from __future__ import annotations

import pytest

from tfyarn._launch import ENV_DIR
from tfyarn.client.jobs import explain
from tfyarn.contract import localization
from tfyarn.contract.exit_codes import explain_diagnostics

ARCHIVE = "hdfs://nn:8020/user/alice/.tfyarn/envs/venv-proj-0123abcd.tar.gz"
TRACE = (
    "\n\tat org.apache.hadoop.yarn.util.FSDownload.verifyAndCopy(FSDownload.java:273)"
    "\n\tat org.apache.hadoop.yarn.util.FSDownload.access$000(FSDownload.java:67)"
    "\n\tat java.base/java.util.concurrent.FutureTask.run(FutureTask.java:264)"
)


def am_attempt(cause: str) -> str:
    """The ResourceManager's diagnostics of a master attempt that never ran."""
    return (
        "Application application_1795314317772_0042 failed 1 times due to AM "
        "Container for appattempt_1795314317772_0042_000001 exited with  "
        "exitCode: -1000\nFailing this attempt.Diagnostics: "
        f"[2025-01-02 10:11:12.345]{cause}{TRACE}\nFor more detailed output, "
        "check the application tracking page: http://rm:8088/cluster/app/"
        "application_1795314317772_0042 Then click on links to logs of each "
        "attempt.\n. Failing the application."
    )


CHANGED_3 = (
    f"java.io.IOException: Resource {ARCHIVE} changed on src filesystem - "
    'expected: "2025-01-02T10:10:00.000+0000", was: "2025-01-02T10:11:00.000+0000"'
    ', current time: "2025-01-02T10:11:12.345+0000"'
)
CHANGED_2 = (
    f"java.io.IOException: Resource {ARCHIVE} changed on src filesystem "
    "(expected 1735812600000, was 1735812660000"
)
HDFS_DENIED = (
    "org.apache.hadoop.security.AccessControlException: Permission denied: "
    'user=bob, access=EXECUTE, inode="/user/alice/.tfyarn/envs":alice:'
    "supergroup:drwx------"
)
UNTAR_STREAM = (
    "org.apache.hadoop.yarn.exceptions.YarnException: Download and unpack failed"
    "\n\tat org.apache.hadoop.yarn.util.FSDownload.downloadAndUnpack(FSDownload"
    ".java:334)\nCaused by: java.io.IOException: Error executing command. gzip "
    "-dc | (cd '/data/nm/usercache/alice/filecache/12_tmp/broken-env.tar.gz' && "
    "tar -x ) Process exited with exit code 1."
)
UNTAR_FILE = (
    "java.io.IOException: Error untarring file /data/nm/usercache/alice/"
    "filecache/12_tmp/broken-env.tar.gz. Tar process exited with exit code 2"
)


@pytest.mark.parametrize("cause", [CHANGED_3, CHANGED_2])
def test_a_file_replaced_after_submission(cause: str) -> None:
    lines = explain_diagnostics(am_attempt(cause), node="node3.example")
    assert lines[0].startswith(
        f"YARN could not localize {ARCHIVE} on node node3.example: it changed "
        "after the job was submitted"
    )
    # The number's "no valid exit status" gives way to the reason.
    assert not any("no valid exit status" in line for line in lines)


def test_hdfs_refusing_the_jobs_user_names_user_access_and_path() -> None:
    (line,) = explain_diagnostics(am_attempt(HDFS_DENIED))
    assert "hdfs:/user/alice/.tfyarn/envs" in line
    assert "the job's user bob may not EXECUTE it on HDFS (Permission denied)" in line
    assert "hdfs dfs -chmod" in line


def test_a_local_file_the_jobs_user_cannot_read() -> None:
    cause = "java.io.FileNotFoundException: /home/alice/data.csv (Permission denied)"
    (line,) = explain_diagnostics(am_attempt(cause))
    assert line.startswith("YARN could not localize /home/alice/data.csv: ")
    assert "may not read it (Permission denied)" in line


@pytest.mark.parametrize(
    ("cause", "file"),
    [
        (
            "java.io.FileNotFoundException: File does not exist: /user/a/x.zip",
            "/user/a/x.zip",
        ),
        (
            "java.io.FileNotFoundException: File file:/tmp/x.py does not exist",
            "file:/tmp/x.py",
        ),
    ],
)
def test_a_file_deleted_after_submission(cause: str, file: str) -> None:
    (line,) = explain_diagnostics(am_attempt(cause))
    assert line.startswith(f"YARN could not localize {file}: it does not exist")


@pytest.mark.parametrize("cause", [UNTAR_STREAM, UNTAR_FILE])
def test_an_archive_that_does_not_unpack_is_named(cause: str) -> None:
    (line,) = explain_diagnostics(am_attempt(cause), node="n1")
    assert line.startswith("YARN could not localize broken-env.tar.gz on node n1:")
    assert "not a valid archive" in line and "tar -tzf" in line


def test_a_zip_that_does_not_open() -> None:
    cause = (
        "org.apache.hadoop.yarn.exceptions.YarnException: Download and unpack "
        "failed\nCaused by: java.util.zip.ZipException: zip END header not found"
    )
    (line,) = explain_diagnostics(am_attempt(cause))
    assert line.startswith("YARN could not localize an archive:")
    assert "not a valid archive" in line


def test_an_unknown_localization_failure_still_says_localization() -> None:
    cause = (
        "org.apache.hadoop.yarn.exceptions.YarnException: Download and unpack failed"
    )
    (line,) = explain_diagnostics(am_attempt(cause))
    assert line.startswith("YARN could not localize one of the container's files")


def test_minus_1000_alone_is_explained_by_its_number() -> None:
    (line,) = explain_diagnostics("Container exited with exitCode: -1000")
    assert line.startswith("exit code -1000: YARN reported no valid exit status")
    assert "localize" in line


@pytest.mark.parametrize("quote", ["'", "\u2018"])
def test_yarns_listing_stopped_by_the_shipped_pythons_link(quote: str) -> None:
    # A task's container: YARN's launch script ran `find -L` before the
    # command, which could not follow env/bin/python3 (exit code 1).
    end = "'" if quote == "'" else "\u2019"
    nm = (
        "Exception from container-launch.\nContainer id: container_1_0001_01_000002"
        "\nExit code: 1\n[2025-01-02 10:11:12.345]Container exited with a "
        "non-zero exit code 1. Error file: prelaunch.err.\nLast 4096 bytes of "
        f"prelaunch.err :\nfind: {quote}./{ENV_DIR}/bin/python3{end}: "
        "Permission denied\n"
    )
    lines = explain_diagnostics(nm, node="node4.example")
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        "the container on node node4.example cannot run the shipped Python "
        f"(--python_env): ./{ENV_DIR}/bin/python3 leads to a directory the "
        "container's user cannot enter (Permission denied)"
    )


def test_yarns_listing_stopped_by_another_file() -> None:
    lines = localization.explain_localization("find: './data/x': Permission denied")
    expected = (
        "YARN's listing of the container's files could not enter ./data/x "
        "(Permission denied), which stopped the container before its command "
        "ran: a shipped file or link the container's user cannot read"
    )
    assert lines == [expected]


def test_the_client_explains_a_master_that_could_not_be_localized() -> None:
    meaning = explain(am_attempt(CHANGED_3))
    assert meaning[0].startswith(f"meaning: YARN could not localize {ARCHIVE}: ")


def test_the_env_dir_is_the_launchers() -> None:
    assert localization.ENV_DIR == ENV_DIR
