"""Refusals against the local cluster: never a hang, every refusal names its cause.

Each command runs as a user would run it (a subprocess), with the cluster's
environment from conftest, changed only where a test says so.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, TFYARN, Job, app_attempts

from tfyarn.client import connection, submission
from tfyarn.errors import TfyarnError
from tfyarn.spec import JobSpec

pytestmark = pytest.mark.yarn

# Far above the bound (20 s of retries, about 60 s for a silent RM, plus a
# driver start), far below the 1000+ s an unbounded client waited: only a hang
# fails this.
HANG = 180
SMALL = ["--am_memory", "512 MiB", "--worker_memory", "256 MiB", "--num_worker", "1"]


def tfyarn(
    *argv: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TFYARN, *argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        env=env,
        check=False,
    )


@pytest.fixture
def ok_script(tmp_path: Path) -> str:
    path = tmp_path / "ok.py"
    path.write_text("print('ok')\n")
    return str(path)


def assert_clean_refusal(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith("Error: "), done.stderr
    for word in words:
        assert word in done.stderr, (word, done.stderr)
    assert "Traceback" not in done.stderr and "Exception ignored" not in done.stderr


def conf_with_rm(tmp_path: Path, address: str) -> dict[str, str]:
    """The environment with a copy of the cluster's config whose RM is ``address``."""
    conf = tmp_path / address.replace(":", "_")
    shutil.copytree(os.environ["HADOOP_CONF_DIR"], conf)
    yarn_site = conf / "yarn-site.xml"
    text, n = re.subn(
        r"(<name>yarn\.resourcemanager\.address</name>\s*<value>)[^<]*(</value>)",
        rf"\g<1>{address}\g<2>",
        yarn_site.read_text(),
    )
    assert n == 1, "the cluster's yarn-site.xml names no RM address to change"
    yarn_site.write_text(text)
    env = {**os.environ, "HADOOP_CONF_DIR": str(conf)}
    env.pop("TFYARN_YARN_TIMEOUT", None)
    return env


def test_an_unreachable_resource_manager_is_named_not_waited_for(
    tmp_path: Path, ok_script: str
) -> None:
    # A shorter bound than the default 20 s, to show it is the one obeyed
    # (and to wait less: a silent RM costs about 2.5 times the bound).
    bound = {"TFYARN_YARN_TIMEOUT": "8"}
    refused = {**conf_with_rm(tmp_path, "127.0.0.1:1"), **bound}
    # A port that accepts connections and never answers: Hadoop's read timeout
    # (120 s, retried) made this hang for minutes even with connects bounded.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        silent_rm = f"127.0.0.1:{silent.getsockname()[1]}"
        runs = [
            (["submit", "--dry_run", *SMALL, ok_script], refused, "127.0.0.1:1"),
            (["list"], refused, "127.0.0.1:1"),
            (["list"], {**conf_with_rm(tmp_path, silent_rm), **bound}, silent_rm),
        ]
        # All at once: retrying drivers cost little CPU, and a third of the wait.
        procs = [
            subprocess.Popen(
                [*TFYARN, *argv],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=REPO,
                env=env,
            )
            for argv, env, _ in runs
        ]
        try:
            results = [p.communicate(timeout=HANG) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
    for (_, env, address), p, (out, err) in zip(runs, procs, results, strict=True):
        if address != silent_rm:  # refused: said before the wait, on one line
            notice, _, err = err.partition("\n")
            assert notice.startswith(
                f"tfyarn: no ResourceManager accepts connections at {address} "
            ), notice
        done = subprocess.CompletedProcess(p.args, p.returncode, out, err)
        yarn_site = str(Path(env["HADOOP_CONF_DIR"]) / "yarn-site.xml")
        assert_clean_refusal(
            done, address, yarn_site, "ResourceManager", "retrying for about 8 s"
        )


def test_an_unknown_queue_is_refused_before_submitting(ok_script: str) -> None:
    for argv in (["--dry_run"], []):
        done = tfyarn("submit", *argv, *SMALL, "--queue", "nosuchqueue", ok_script)
        assert_clean_refusal(done, "queue 'nosuchqueue' does not exist", "default")
        assert "Submitted" not in done.stdout


def test_a_missing_hdfs_file_is_refused_before_submitting(ok_script: str) -> None:
    url = f"hdfs:///tmp/tfyarn-missing-{uuid.uuid4().hex}.txt"
    for argv in (["--dry_run"], []):
        done = tfyarn("submit", *argv, *SMALL, "--files", url, ok_script)
        assert_clean_refusal(done, f"file not found: {url}")
        assert "Submitted" not in done.stdout


def test_yarns_reason_for_a_refused_submission_is_kept(skein_client: Any) -> None:
    # Past the pre-checks, straight to YARN: its own refusal, in full.
    import skein

    spec = skein.ApplicationSpec(
        name="tfyarn-test-refused",
        queue="nosuchqueue",
        master=skein.Master(script="true", resources=skein.Resources(256, 1)),
    )
    with pytest.raises(TfyarnError) as err, connection.yarn_errors():
        skein_client.submit(spec)
    assert "unknown queue: nosuchqueue" in str(err.value), str(err.value)


def test_a_missing_interpreter_is_named_and_kill_says_the_job_ended(
    ok_script: str,
) -> None:
    done = tfyarn("submit", *SMALL, "--python", "/usr/bin/python9", ok_script)
    assert_clean_refusal(done, "exit code 127", "/usr/bin/python9", "not found on node")
    app_id = re.search(r"application_\d+_\d+", done.stdout)
    assert app_id, done.stdout

    killed = tfyarn("kill", app_id.group())
    assert killed.returncode == 0, killed.stderr
    assert f"{app_id.group()} had already ended (FINISHED, final status FAILED)" in (
        killed.stdout
    )


def test_status_kill_and_logs_agree_on_an_unknown_application() -> None:
    # A well-formed id this cluster never issued.
    unknown = "application_1000000000000_9999"
    errors = []
    for command in ("status", "kill", "logs"):
        done = tfyarn(command, unknown)
        assert_clean_refusal(done, f"no application {unknown} on this cluster")
        errors.append(done.stderr)
    assert len(set(errors)) == 1, errors
    assert "appOwner" not in errors[0]


@pytest.mark.parametrize("layout", ["missing", "empty", "no yarn-site.xml"])
def test_a_bad_hadoop_conf_dir_is_refused(tmp_path: Path, layout: str) -> None:
    conf = tmp_path / "conf"
    if layout != "missing":
        conf.mkdir()
    if layout == "no yarn-site.xml":
        shutil.copy(Path(os.environ["HADOOP_CONF_DIR"]) / "core-site.xml", conf)
    done = tfyarn("list", env={**os.environ, "HADOOP_CONF_DIR": str(conf)})
    word = {"missing": "does not exist", "empty": "is empty"}.get(layout, layout)
    assert_clean_refusal(done, str(conf), word)


def test_no_traceback_when_yarn_is_not_on_path(ok_script: str) -> None:
    env = {**os.environ, "PATH": ""}
    done = tfyarn("submit", *SMALL, ok_script, env=env)
    assert_clean_refusal(done, "no YARN cluster", "yarn not found")


SYSTEM_PYTHON = "/usr/bin/python3"  # Debian's: no grpc, no tfyarn


@pytest.mark.skipif(
    not os.path.exists(SYSTEM_PYTHON), reason=f"no {SYSTEM_PYTHON} on this machine"
)
def test_a_python_without_tfyarn_is_refused_before_submitting(ok_script: str) -> None:
    done = tfyarn("submit", *SMALL, "--python", SYSTEM_PYTHON, ok_script)
    assert_clean_refusal(done, SYSTEM_PYTHON, "cannot import grpc", "--python_env")
    assert "Submitted" not in done.stdout


@pytest.mark.skipif(
    not os.path.exists(SYSTEM_PYTHON), reason=f"no {SYSTEM_PYTHON} on this machine"
)
def test_a_master_without_its_modules_ends_the_job_at_once_naming_them(
    skein_client: Any, ok_script: str
) -> None:
    # Past the client's check (a Python API caller, or an interpreter that
    # exists only on the nodes): the master itself finds what it lacks.
    spec = JobSpec(
        script=ok_script,
        python=SYSTEM_PYTHON,
        am_memory_mib=512,
        tasks={"worker": {"count": 1, "memory_mib": 256}},
    ).validate()
    app_id = submission.submit_spec(skein_client, spec)
    final = Job(app_id, skein_client).wait_for_end(timeout=HANG)
    assert final.final_status == "FAILED", final
    for word in (SYSTEM_PYTHON, "cannot import grpc", "--python_env", "on node"):
        assert word in final.diagnostics, (word, final.diagnostics)
    # An interpreter that lacks a module lacks it on the next attempt too.
    assert len(app_attempts(app_id)) == 1
