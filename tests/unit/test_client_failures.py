"""The YARN side of the client: never a hang, every refusal names its cause.

An unreachable ResourceManager is bounded and named; YARN's reason for a
refusal is kept whole (and queues and hdfs:// files are checked before
submitting); exit codes become words; a bad HADOOP_CONF_DIR is refused; an
unknown application reads the same in status, kill and logs; a failed driver
start leaves no traceback behind.
"""

from __future__ import annotations

import gc
import re
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import skein
from _fake_yarn import APP_ID, FakeYarn, Report

import tfyarn
from tfyarn.client import connection, hadoop_conf, jobs, narrator, preflight, tasklogs
from tfyarn.contract.exit_codes import exit_codes, explain_diagnostics, explain_exit
from tfyarn.contract.hadoop_conf import check_conf_dir, read_site
from tfyarn.contract.status import TaskState, TaskStatus
from tfyarn.errors import ClusterError, JobFailedError, SpecError, TfyarnError

SITE = """<?xml version="1.0"?>
<configuration>
{}
</configuration>
"""


def site(path: Path, **props: str) -> Path:
    body = "\n".join(
        f"  <property><name>{k.replace('_', '.')}</name><value>{v}</value></property>"
        for k, v in props.items()
    )
    path.write_text(SITE.format(body))
    return path


def props(path: Path) -> dict[str, str]:
    """What Hadoop reads from one site file."""
    return dict(read_site(path))


@pytest.fixture
def conf_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A client configuration whose ResourceManager is 127.0.0.1:1."""
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "core-site.xml").write_text(SITE.format(""))
    (conf / "yarn-site.xml").write_text(
        SITE.format(
            "  <property><name>yarn.resourcemanager.address</name>"
            "<value>127.0.0.1:1</value></property>\n"
            "  <property><name>yarn.resourcemanager.connect.max-wait.ms</name>"
            "<value>900000</value></property>"
        )
    )
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    monkeypatch.delenv(hadoop_conf.TIMEOUT_ENV, raising=False)
    return conf


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(time, "sleep", lambda s: None)


# -- 1. an unreachable ResourceManager is bounded and named ---------------------


def test_the_bounded_copy_overrides_the_retry_settings(conf_dir: Path) -> None:
    bounded = hadoop_conf.bounded_conf_dir(conf_dir, 20.0)
    assert bounded != conf_dir
    assert (bounded / "core-site.xml").read_text() == (
        conf_dir / "core-site.xml"
    ).read_text()
    got = props(bounded / "yarn-site.xml")
    assert got["yarn.resourcemanager.address"] == "127.0.0.1:1"  # the rest is kept
    assert got["yarn.resourcemanager.connect.max-wait.ms"] == "20000"  # not 900000
    assert int(got["ipc.client.connect.max.retries"]) <= 1
    assert int(got["ipc.client.connect.max.retries.on.timeouts"]) <= 1
    # Each property once: Hadoop would take the last, but say it once.
    names = [
        p.findtext("name")
        for p in ET.parse(bounded / "yarn-site.xml").getroot().iter("property")
    ]
    assert len(names) == len(set(names))
    assert props(conf_dir / "yarn-site.xml")[
        "yarn.resourcemanager.connect.max-wait.ms"
    ] == ("900000")  # the user's own file is untouched


def test_retry_settings_bound_both_layers() -> None:
    s = hadoop_conf.retry_settings(30.0)
    wait_ms = int(s["yarn.resourcemanager.connect.max-wait.ms"])
    interval = int(s["yarn.resourcemanager.connect.retry-interval.ms"])
    assert wait_ms == 30000 and 1000 <= interval <= wait_ms
    # Per RM attempt: at most 2 connects of <= 5 s each, and a bounded wait
    # for an answer (Hadoop's 120 s default made a silent RM hang for minutes).
    assert int(s["ipc.client.connect.timeout"]) <= 5000
    assert int(s["ipc.client.rpc-timeout.ms"]) <= wait_ms
    assert wait_ms // interval <= 5  # RMProxy counts attempts, not time


def test_an_ha_pair_is_searched_for_the_whole_timeout() -> None:
    # RMProxy counts failovers on an HA pair; each refused try costs only the
    # sleep between them (0.5-1.5 x the base), so attempts x base ~ timeout.
    # Its default (max-wait / retry-interval) gave two: a takeover of ~10 s
    # under load made the call fail a second before the new RM answered.
    for timeout in (20.0, 45.0):
        s = hadoop_conf.retry_settings(timeout)
        base = int(s["yarn.client.failover-sleep-base-ms"])
        cap = int(s["yarn.client.failover-sleep-max-ms"])
        attempts = int(s["yarn.client.failover-max-attempts"])
        assert base == cap <= 2000
        assert 0.9 * timeout <= attempts * base / 1000 <= 1.1 * timeout


def test_the_timeout_is_configurable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(hadoop_conf.TIMEOUT_ENV, raising=False)
    assert hadoop_conf.yarn_timeout() == hadoop_conf.DEFAULT_YARN_TIMEOUT
    monkeypatch.setenv(hadoop_conf.TIMEOUT_ENV, "45")
    assert hadoop_conf.yarn_timeout() == 45.0
    for bad in ("0", "-3", "soon"):
        monkeypatch.setenv(hadoop_conf.TIMEOUT_ENV, bad)
        with pytest.raises(ClusterError, match=hadoop_conf.TIMEOUT_ENV):
            hadoop_conf.yarn_timeout()


def test_the_driver_reads_the_bounded_copy(
    conf_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, str] = {}

    def start_driver(**kwargs: Any) -> Any:
        import os

        seen["conf"] = os.environ["HADOOP_CONF_DIR"]
        raise skein.exceptions.DriverError("Failed to start java process")

    monkeypatch.setattr(skein.core, "_start_driver", start_driver)
    with pytest.raises(TfyarnError, match="could not start skein's YARN driver"):
        connection.connect()
    assert seen["conf"] != str(conf_dir)
    assert props(Path(seen["conf"]) / "yarn-site.xml")[
        "yarn.resourcemanager.connect.max-wait.ms"
    ] == str(int(hadoop_conf.DEFAULT_YARN_TIMEOUT * 1000))
    import os

    assert os.environ["HADOOP_CONF_DIR"] == str(conf_dir)  # restored


UNREACHABLE = (
    "Failed to get node reports, exception:\n"
    "Call From vm/127.0.0.1 to localhost:1 failed on connection exception: "
    "java.net.ConnectException: Connection refused; For more details see:  "
    "http://wiki.apache.org/hadoop/ConnectionRefused"
)


def test_an_unreachable_rm_is_named(conf_dir: Path) -> None:
    with (
        pytest.raises(connection.YarnUnreachableError) as err,
        connection.yarn_errors(),
    ):
        raise skein.exceptions.DriverError(UNREACHABLE)
    text = str(err.value)
    assert "127.0.0.1:1" in text
    assert str(conf_dir / "yarn-site.xml") in text
    assert "Connection refused" in text and "wiki.apache" not in text
    assert isinstance(err.value, ConnectionError)


def test_an_unreachable_namenode_is_not_called_the_rm(conf_dir: Path) -> None:
    # While skein's driver uploads a job's files, the NameNode is called.
    message = UNREACHABLE.replace("localhost:1 ", "nn.example:8020 ")
    with pytest.raises(TfyarnError) as err, connection.yarn_errors():
        raise skein.exceptions.DriverError(message)
    text = str(err.value)
    assert text.startswith("could not reach nn.example:8020")
    assert "NameNode" in text and "ResourceManager" not in text


def test_a_namenode_of_an_ha_name_service_is_named_with_its_service(
    conf_dir: Path,
) -> None:
    # With HA, fs.defaultFS is hdfs://ns1: the address is in hdfs-site.xml.
    (conf_dir / "hdfs-site.xml").write_text(
        SITE.format(
            "<property><name>dfs.nameservices</name><value>ns1</value></property>"
            "<property><name>dfs.ha.namenodes.ns1</name><value>nn1,nn2</value>"
            "</property><property><name>dfs.namenode.rpc-address.ns1.nn1</name>"
            "<value>nn.example:8020</value></property><property><name>"
            "dfs.namenode.rpc-address.ns1.nn2</name><value>nn2.example:8020"
            "</value></property>"
        )
    )
    message = UNREACHABLE.replace("localhost:1 ", "nn.example:8020 ")
    with pytest.raises(TfyarnError) as err, connection.yarn_errors():
        raise skein.exceptions.DriverError(message)
    text = str(err.value)
    assert text.startswith("could not reach nn.example:8020")
    assert "name service ns1 (nn1 at nn.example:8020, nn2 at nn2.example:8020" in text
    assert "`hdfs haadmin -ns ns1 -getAllServiceState`" in text
    assert "ResourceManager" not in text


# -- 2. YARN's reason is kept whole, and checked before submitting --------------


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (
            (
                "Failed to submit application, exception:\nFailed to submit "
                "application_1_0001 to YARN : Application application_1_0001 submitted "
                "by user root to unknown queue: nosuchqueue"
            ),
            "unknown queue: nosuchqueue",
        ),
        (
            (
                "Failed to submit application, exception:\n"
                "File does not exist: hdfs:/missing.txt"
            ),
            "File does not exist: hdfs:/missing.txt",
        ),
        (
            (
                "Failed to submit application, exception:\n"
                "org.apache.hadoop.security.AccessControlException: Permission denied\n"
                "\tat org.apache.hadoop.Foo.bar(Foo.java:1)"
            ),
            "Failed to submit application: Permission denied",
        ),
    ],
)
def test_the_cause_after_the_first_line_is_kept(message: str, reason: str) -> None:
    with pytest.raises(TfyarnError) as err, connection.yarn_errors():
        raise skein.exceptions.DriverError(message)
    text = str(err.value)
    assert reason in text
    assert not text.rstrip().endswith("exception:")
    assert " at org.apache" not in text


def test_an_unknown_queue_is_refused_naming_the_known_ones() -> None:
    fake = FakeYarn(queues={"default": ("RUNNING", []), "gpu": ("RUNNING", [])})
    with pytest.raises(SpecError, match=r"'nosuch' does not exist.*default, gpu"):
        preflight.check_queue(fake, "nosuch")


def test_a_stopped_or_parent_queue_is_refused() -> None:
    fake = FakeYarn(
        queues={"root": ("RUNNING", ["a"]), "a": ("RUNNING", []), "b": ("STOPPED", [])}
    )
    preflight.check_queue(fake, "a")
    with pytest.raises(SpecError, match=r"'root' is a parent queue.*\(a\)"):
        preflight.check_queue(fake, "root")
    with pytest.raises(SpecError, match="'b' is STOPPED"):
        preflight.check_queue(fake, "b")


def test_submit_to_an_unknown_queue_submits_nothing(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    fake = FakeYarn()
    with pytest.raises(SpecError, match="queue 'nosuch'"):
        tfyarn.submit(str(script), queue="nosuch", client=fake)
    assert fake.submitted == []


class _Fs:
    def __init__(self, missing: set[str], dirs: set[str]) -> None:
        self.missing, self.dirs = missing, dirs
        self.asked: list[str] = []

    def info(self, url: str) -> Any:
        from tfyarn.data import fs

        self.asked.append(url)
        if url in self.missing:
            raise fs.PathNotFoundError(f"{url} not found")
        return fs.FileInfo(url=url, size=1, is_dir=url in self.dirs)


def test_missing_hdfs_files_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tfyarn.data import fs

    fake_fs = _Fs({"hdfs:///missing.txt"}, {"hdfs:///dir"})
    monkeypatch.setattr(fs, "resolve", lambda url: fake_fs)
    preflight.check_remote_files(["local.txt", "s3a://b/k", "hdfs:///there.txt"])
    assert fake_fs.asked == ["hdfs:///there.txt"]  # local and s3a are not ours
    with pytest.raises(
        SpecError, match=re.escape("file not found: hdfs:///missing.txt")
    ):
        preflight.check_remote_files(["hdfs:///there.txt", "hdfs:///missing.txt"])
    with pytest.raises(SpecError, match=re.escape("hdfs:///dir is a directory")):
        preflight.check_remote_files(["hdfs:///dir"])

    script = tmp_path / "train.py"
    script.write_text("")
    fake = FakeYarn()
    with pytest.raises(SpecError, match=re.escape("missing.txt")):
        tfyarn.submit(str(script), files=["hdfs:///missing.txt"], client=fake)
    assert fake.submitted == []


# -- 3. exit codes and NodeManager messages in words ----------------------------


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (127, "not found"),
        (126, "not executable"),
        (137, "SIGKILL"),
        (-9, "SIGKILL"),
        (143, "SIGTERM"),
        (-15, "SIGTERM"),
        (139, "SIGSEGV"),
        (-100, "node was lost"),
        (-102, "preempted"),
        (-103, "virtual memory"),
        (-104, "physical memory"),
        (0, ""),
        (1, ""),
        (2, ""),
        (None, ""),
    ],
)
def test_explain_exit(code: int | None, words: str) -> None:
    got = explain_exit(code)
    assert (words in got) if words else got == ""


@pytest.mark.parametrize(
    ("diagnostics", "words"),
    [
        (
            (
                "Container [pid=1,containerID=c_1] is running 300MB beyond the "
                "'PHYSICAL' memory limit... is running beyond physical memory limits."
            ),
            "physical memory",
        ),
        ("Container preempted by scheduler", "preempted"),
        ("Container released on a *lost* node", "node was lost"),
        ("worker:1 exited with Exit code: 137", "exit code 137: killed (SIGKILL)"),
        ("exitCode=-104", "exit code -104"),
    ],
)
def test_explain_diagnostics(diagnostics: str, words: str) -> None:
    assert any(words in line for line in explain_diagnostics(diagnostics))


def test_explain_diagnostics_says_each_thing_once() -> None:
    text = "exit code 137\nexit code 137\nexit code 1"
    assert len(explain_diagnostics(text)) == 1
    assert exit_codes(text) == [137, 137, 1]
    assert explain_diagnostics("all went well") == []


MASTER_127 = (
    "Application driver failed with exit code 127, see logs for more information."
)


def test_a_missing_interpreter_is_named_with_its_node(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    fake = FakeYarn(
        [
            Report(
                state="FINISHED",
                final_status="FAILED",
                diagnostics=MASTER_127,
                host="node7",
            )
        ]
    )
    with pytest.raises(JobFailedError) as err:
        tfyarn.submit(str(script), python="/usr/bin/python9", wait=True, client=fake)
    text = str(err.value)
    assert "/usr/bin/python9" in text and "not found on node node7" in text
    assert "exit code 127" in text  # YARN's own words stay


def test_status_explains_without_knowing_the_interpreter() -> None:
    fake = FakeYarn(
        [Report(state="FINISHED", final_status="FAILED", diagnostics=MASTER_127)]
    )
    st = tfyarn.status(APP_ID, client=fake)
    assert "--python" in st.diagnostics and "not found on node node1" in st.diagnostics
    # Read back (e.g. from JSON), the explanation is not added twice.
    assert jobs.explain(st.diagnostics) == []


def test_a_task_killed_over_memory_is_explained() -> None:
    diag = "worker:0 (container_1) on node1 exited -104"
    assert jobs.explain(diag) == []  # no "exit code" words: nothing guessed
    diag = "worker:0 failed, exit code -104"
    (line,) = jobs.explain(diag)
    assert line.startswith(jobs.MEANING) and "physical memory" in line


@pytest.mark.parametrize(
    ("state", "code", "words"),
    [
        (TaskState.FAILED, 137, "exit code 137: killed (SIGKILL)"),
        (TaskState.FAILED, -9, "exit code -9: killed (SIGKILL)"),
        (TaskState.FAILED, 1, "exit code 1)"),
        (TaskState.KILLED, -15, "exit code -15)"),  # the master's own stop
    ],
)
def test_task_lines_explain_an_unasked_end(
    state: TaskState, code: int, words: str
) -> None:
    task = TaskStatus(
        task="worker:1", role="worker", index=1, state=state, exit_code=code
    )
    assert words in narrator.describe_task(task)


# -- 4. a bad HADOOP_CONF_DIR is refused ------------------------------------------


def test_a_missing_conf_dir_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path / "nope"))
    with pytest.raises(ClusterError, match=f"{tmp_path / 'nope'} does not exist"):
        connection.use_cluster()


def test_an_empty_conf_dir_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HADOOP_CONF_DIR", str(tmp_path))
    with pytest.raises(ClusterError, match="it is empty"):
        connection.use_cluster()


def test_a_conf_dir_without_site_files_is_refused(tmp_path: Path) -> None:
    (tmp_path / "hdfs-site.xml").write_text(SITE.format(""))
    with pytest.raises(ClusterError) as err:
        check_conf_dir(tmp_path)
    assert "core-site.xml and no yarn-site.xml" in str(err.value)
    site(tmp_path / "core-site.xml")
    with pytest.raises(ClusterError, match=re.escape("no yarn-site.xml")):
        check_conf_dir(tmp_path)
    site(tmp_path / "yarn-site.xml")
    assert check_conf_dir(tmp_path) == tmp_path
    (tmp_path / "file").write_text("")
    with pytest.raises(ClusterError, match="not a directory"):
        check_conf_dir(tmp_path / "file")


def test_a_conf_dir_with_a_broken_site_file_is_refused(tmp_path: Path) -> None:
    site(tmp_path / "core-site.xml")
    (tmp_path / "yarn-site.xml").write_text("<configuration><property>")
    with pytest.raises(ClusterError) as err:
        check_conf_dir(tmp_path)
    assert f"{tmp_path / 'yarn-site.xml'} (from HADOOP_CONF_DIR)" in str(err.value)


def test_no_conf_dir_and_no_local_cluster_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import tfyarn.cluster

    # use_local_cluster returns None (sets nothing) when no cluster runs.
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.setattr(tfyarn.cluster, "use_local_cluster", lambda: None)
    with pytest.raises(ClusterError, match="no YARN cluster"):
        connection.use_cluster()


# -- 5. unknown applications and ended jobs ---------------------------------------

UNKNOWN = "application_1700000000000_0999"


def test_status_kill_and_logs_say_the_same_of_an_unknown_app(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def yarn_logs(app_id: str, timeout: float) -> str:
        raise tasklogs.YarnLogsError("Can not find the appOwner")

    monkeypatch.setattr(tasklogs, "yarn_logs", yarn_logs)
    messages = []
    for call in (tfyarn.status, tfyarn.kill, tfyarn.logs):
        with pytest.raises(connection.UnknownApplicationError) as err:
            call(UNKNOWN, client=FakeYarn())
        messages.append(str(err.value))
    assert len(set(messages)) == 1, messages
    assert messages[0].startswith(f"no application {UNKNOWN} on this cluster")
    assert "appOwner" not in messages[0]


def test_logs_of_a_known_app_keep_yarns_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def yarn_logs(app_id: str, timeout: float) -> str:
        raise tasklogs.YarnLogsError("`yarn logs` failed: disk on fire")

    monkeypatch.setattr(tasklogs, "yarn_logs", yarn_logs)
    with pytest.raises(tasklogs.YarnLogsError, match="disk on fire"):
        tfyarn.logs(APP_ID, client=FakeYarn())


def test_kill_of_an_ended_job_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobs, "_stop_tasks_gracefully", lambda yarn, app_id, **_: None)
    fake = FakeYarn([Report(state="FINISHED", final_status="SUCCEEDED")])
    st = tfyarn.kill(APP_ID, client=fake)
    assert st.already_ended and fake.killed == []
    assert st.summary() == (
        f"{APP_ID} had already ended (FINISHED, final status SUCCEEDED); "
        "nothing to kill"
    )
    fake = FakeYarn([Report(state="RUNNING")])
    st = tfyarn.kill(APP_ID, client=fake)
    assert not st.already_ended and fake.killed == [APP_ID]
    assert st.summary().startswith(f"{APP_ID} killed: state KILLED")


def test_the_kill_command_prints_the_summary_and_exits_0(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tfyarn.cli import main

    fake = FakeYarn([Report(state="FINISHED", final_status="FAILED")])
    monkeypatch.setattr(connection, "connect", lambda: fake)
    assert main(["kill", APP_ID]) == 0
    assert (
        "had already ended (FINISHED, final status FAILED)" in capsys.readouterr().out
    )


# -- 6. a failed driver start leaves no traceback ---------------------------------


def test_a_failed_driver_start_leaves_nothing_for_del(
    conf_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def start_driver(**kwargs: Any) -> Any:
        raise FileNotFoundError(2, "No such file or directory", "yarn")

    unraisable: list[Any] = []
    monkeypatch.setattr(skein.core, "_start_driver", start_driver)
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    with pytest.raises(ClusterError, match="yarn not found"):
        connection.connect()
    gc.collect()
    assert unraisable == []
