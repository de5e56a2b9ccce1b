"""The pre-started script interpreter: the bootstrap alone, then inside the runtime.

The bootstrap (tfyarn/runtime/_bootstrap/preload.py) runs as the runtime runs it: a subprocess of
this interpreter, by path, reading its message from an inherited pipe. Its
behaviour is compared with ``python -u SCRIPT`` on the same script.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from _am_support import LiveMaster, job

from tfyarn import runtime
from tfyarn.client import config
from tfyarn.contract.status import Phase
from tfyarn.errors import SpecError
from tfyarn.runtime import BOOTSTRAP, Runtime, TaskContext, Timeouts

# Reporting the end to a master already gone gives up after 1 s, not 15 s.
FAST = Timeouts(report_end=1.0, report_end_attempt=0.5)

# Imported by the bootstrap before the message: records what it saw then.
# Written whole, then renamed: a test that sees heavy.json reads all of it.
HEAVY = """\
import json, os
with open("heavy.json.part", "w") as f:
    json.dump({"pid": os.getpid(), "tf_config": os.environ.get("TF_CONFIG")}, f)
os.replace("heavy.json.part", "heavy.json")
"""

# Reports what `python -u SCRIPT` shows a script at its first line.
PROBE = """\
import json, os, pickle, sys
class Point:
    pass
seen = {
    "name": __name__,
    "file": __file__,
    "argv": sys.argv,
    "path0": sys.path[0],
    "tf_config": os.environ.get("TF_CONFIG"),
    "heavy_loaded": "heavy" in sys.modules,
    "pickled": type(pickle.loads(pickle.dumps(Point()))).__qualname__,
    "pid": os.getpid(),
}
with open("probe.json", "w") as f:
    json.dump(seen, f)
"""


def bootstrap(
    script: Path,
    args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    modules: Sequence[str] = ("heavy",),
    message: bytes | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the bootstrap as the runtime does and hand it ``args`` and ``env``."""
    read_fd, write_fd = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-u", str(BOOTSTRAP), str(read_fd), str(script), *modules],
        cwd=script.parent,
        pass_fds=(read_fd,),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    os.close(read_fd)
    if message is None:
        message = json.dumps({"env": env or {}, "args": list(args)}).encode()
    try:
        os.write(write_fd, message)
    finally:
        os.close(write_fd)
    out, err = child.communicate(timeout=60)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


def plain(script: Path, args: Sequence[str] = ()) -> subprocess.CompletedProcess[str]:
    """``python -u SCRIPT ARGS`` as the runtime starts it without preimport."""
    return subprocess.run(
        [sys.executable, "-u", str(script), *args],
        cwd=script.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_script_sees_what_python_script_would_show_it(tmp_path: Path) -> None:
    (tmp_path / "heavy.py").write_text(HEAVY)
    script = tmp_path / "train.py"
    script.write_text(PROBE)
    tf_config = '{"cluster": {"worker": ["h:1"]}}'
    done = bootstrap(script, ["--steps", "3"], {"TF_CONFIG": tf_config})
    assert done.returncode == 0, done.stderr
    seen = json.loads((tmp_path / "probe.json").read_text())
    heavy = json.loads((tmp_path / "heavy.json").read_text())
    assert seen == {
        "name": "__main__",
        "file": str(script),
        "argv": [str(script), "--steps", "3"],
        "path0": str(tmp_path),
        "tf_config": tf_config,  # already there at the first line
        "heavy_loaded": True,
        "pickled": "Point",  # classes defined in the script pickle
        "pid": heavy["pid"],  # imported in the same interpreter...
    }
    assert heavy["tf_config"] is None  # ...before the cluster was known
    # The plain way agrees on everything the cluster does not change.
    (tmp_path / "probe.json").unlink()
    assert plain(script, ["--steps", "3"]).returncode == 0
    alone = json.loads((tmp_path / "probe.json").read_text())
    for key in ("name", "file", "argv", "path0", "pickled"):
        assert alone[key] == seen[key], key


def test_the_tfyarn_package_does_not_shadow_modules(tmp_path: Path) -> None:
    """tfyarn/ holds tensorboard.py and config.py; none of it is on sys.path."""
    script = tmp_path / "train.py"
    script.write_text(
        "import sys\n"
        f"assert {str(BOOTSTRAP.parent)!r} not in sys.path, sys.path\n"
        "import config\n"
    )
    done = bootstrap(script, modules=())
    assert done.returncode == 1
    assert "ModuleNotFoundError: No module named 'config'" in done.stderr
    # The bootstrap is alone in its directory, which Python puts first on
    # sys.path while it starts: nothing there can shadow what it imports.
    alone = {p.name for p in BOOTSTRAP.parent.iterdir()} - {"__pycache__"}
    assert alone == {BOOTSTRAP.name}


@pytest.mark.parametrize(
    "body",
    [
        "import sys\nsys.exit(5)\n",
        "raise SystemExit('bad flags: --steps must be positive')\n",
        "def f():\n    raise ValueError('the model exploded')\n\nf()\n",
        "x = (\n",  # a syntax error
        "import sys\nprint('fine', file=sys.stderr)\n",
        "raise KeyboardInterrupt\n",
    ],
    ids=["exit-5", "exit-message", "exception", "syntax-error", "ok", "ctrl-c"],
)
def test_exit_codes_and_stderr_are_those_of_python_script(
    tmp_path: Path, body: str
) -> None:
    script = tmp_path / "train.py"
    script.write_text(body)
    expected = plain(script)
    got = bootstrap(script, modules=("json",))
    assert (got.returncode, got.stdout) == (expected.returncode, expected.stdout)
    if "KeyboardInterrupt" in body:
        # Re-raised for the interpreter to end on SIGINT: its traceback shows
        # where it was raised from, the bootstrap's frames, then the script's.
        assert got.stderr.strip().endswith("KeyboardInterrupt")
        assert f'File "{BOOTSTRAP}"' in got.stderr, got.stderr
        assert f'File "{script}"' in got.stderr, got.stderr
    else:
        # Same traceback: no frame of the bootstrap or runpy.
        assert got.stderr == expected.stderr


def test_a_failing_preimport_is_left_to_the_script(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("import no_such_module_tfyarn\n")
    got = bootstrap(script, modules=("no_such_module_tfyarn", "json"))
    assert got.returncode == 1
    assert got.stderr == plain(script).stderr  # reported once, by the script


def test_no_message_ends_the_bootstrap_without_running_the_script(
    tmp_path: Path,
) -> None:
    script = tmp_path / "train.py"
    script.write_text("open('ran', 'w').close()\n")
    got = bootstrap(script, message=b"")
    assert got.returncode == 3 and got.stderr == ""
    assert not (tmp_path / "ran").exists()


def test_sigterm_reaches_the_script_as_before(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text(
        "import signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    read_fd, write_fd = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-u", str(BOOTSTRAP), str(read_fd), str(script)],
        cwd=tmp_path,
        pass_fds=(read_fd,),
        stdout=subprocess.PIPE,
        text=True,
    )
    os.close(read_fd)
    os.write(write_fd, b'{"env": {}, "args": []}')
    os.close(write_fd)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGTERM)
    assert child.wait(30) == 7


def test_preimport_config_is_checked_before_submit(tmp_path: Path) -> None:
    (tmp_path / "empty.yaml").write_text("")  # not the user's own config

    def spec(**overrides: object) -> tuple[str, ...]:
        cfg = config.load(config_file=tmp_path / "empty.yaml", overrides=overrides)
        return config.to_spec("train.py", (), cfg).preimport

    assert spec() == ("tensorflow",)  # the shipped default
    assert spec(preimport=["numpy, numpy.linalg", "json"]) == (
        "numpy",
        "numpy.linalg",
        "json",
    )
    assert spec(preimport=[]) == ()
    for bad in ("tensor-flow", "numpy..linalg", "import"):
        with pytest.raises(SpecError, match=f"preimport: '{bad}' is not a module name"):
            spec(preimport=[bad])


# -- inside the runtime ------------------------------------------------------------


def task_env(spec_env: str, address: str, index: int = 0) -> dict[str, str]:
    return {
        **os.environ,
        "TFYARN_JOB": spec_env,
        "TFYARN_ROLE": "worker",
        "TFYARN_TASK_INDEX": str(index),
        "TFYARN_ATTEMPT": "0",
        "TFYARN_MASTER_ADDRESS": address,
        "NM_HOST": "127.0.0.1",
    }


def gone(pid: int) -> bool:
    """Dead and reaped: no process, not even a zombie, has this pid."""
    return not Path(f"/proc/{pid}").exists()


def test_the_script_runs_in_the_pre_started_interpreter(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    spec = job(tasks={"worker": 2}, preimport=("heavy",), args=("--x={task_index}",))
    (tmp_path / "heavy.py").write_text(HEAVY)
    (tmp_path / spec.script_name).write_text(PROBE)
    master = LiveMaster(spec, credentials).start()
    master.grant_all()
    codes: dict[int, int] = {}
    dirs = [tmp_path / "w0", tmp_path / "w1"]

    def one(index: int) -> None:
        for name in ("heavy.py", spec.script_name):
            (dirs[index] / name).write_text((tmp_path / name).read_text())
        env = task_env(spec.to_env(), master.address, index)
        rt = Runtime(
            TaskContext.from_env(env),
            credentials=credentials,
            workdir=dirs[index],
            env=env,
        )
        codes[index] = rt.run()

    for d in dirs:
        d.mkdir()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    phase, diagnostics = master.wait_done()
    assert phase is Phase.SUCCEEDED, diagnostics
    assert codes == {0: 0, 1: 0}
    seen = json.loads((dirs[1] / "probe.json").read_text())
    heavy = json.loads((dirs[1] / "heavy.json").read_text())
    assert seen["pid"] == heavy["pid"] and seen["heavy_loaded"]
    assert heavy["tf_config"] is None
    assert json.loads(seen["tf_config"])["task"] == {"type": "worker", "index": 1}
    assert seen["argv"] == [str(dirs[1] / spec.script_name), "--x=1"]


def test_stopping_before_formation_kills_and_reaps_the_pre_started_interpreter(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    # Two workers, one ever starts: the cluster never forms; the job is killed.
    spec = job(tasks={"worker": 2}, preimport=("heavy",))
    # A slow import (TensorFlow's takes seconds): killed, not waited for.
    (tmp_path / "heavy.py").write_text(HEAVY + "import time\ntime.sleep(60)\n")
    (tmp_path / spec.script_name).write_text("open('ran', 'w').close()\n")
    master = LiveMaster(spec, credentials).start()
    master.grant_all()
    env = task_env(spec.to_env(), master.address)
    rt = Runtime(
        TaskContext.from_env(env),
        credentials=credentials,
        workdir=tmp_path,
        env=env,
        timeouts=FAST,
    )
    result: list[int] = []
    task = threading.Thread(target=lambda: result.append(rt.run()))
    task.start()
    deadline = time.monotonic() + 30
    while not (tmp_path / "heavy.json").exists():
        assert time.monotonic() < deadline, "the interpreter was not pre-started"
        time.sleep(0.05)
    pid = json.loads((tmp_path / "heavy.json").read_text())["pid"]
    assert not gone(pid)  # waiting for its message
    state = master.state
    assert state is not None
    master.call(lambda: state.request_kill("test over"))
    task.join(30)
    assert result == [runtime.EXIT_RUNTIME_ERROR]
    assert gone(pid)
    assert not (tmp_path / "ran").exists()
    assert rt.stderr_tail[-1] == "tfyarn: the job killed"  # the reason, last
    master.wait_done()


def test_unreachable_master_kills_the_pre_started_interpreter(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    spec = job(registration_timeout=1.5, preimport=("heavy",))
    (tmp_path / "heavy.py").write_text(HEAVY)
    (tmp_path / spec.script_name).write_text("open('ran', 'w').close()\n")
    env = task_env(spec.to_env(), "127.0.0.1:1")  # nobody listens
    rt = Runtime(
        TaskContext.from_env(env),
        credentials=credentials,
        workdir=tmp_path,
        env=env,
        timeouts=FAST,
    )
    assert rt.run() == runtime.EXIT_RUNTIME_ERROR
    assert rt.prestarted is None
    pid = json.loads((tmp_path / "heavy.json").read_text())["pid"]
    assert gone(pid)
    assert not (tmp_path / "ran").exists()


def test_an_interpreter_that_died_importing_is_replaced_by_a_plain_start(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    spec = job(tasks={"worker": 2}, preimport=("crash",))
    master = LiveMaster(spec, credentials).start()
    master.grant_all()
    dirs = [tmp_path / "w0", tmp_path / "w1"]
    for d in dirs:
        d.mkdir()
        (d / spec.script_name).write_text(PROBE)
    # Like a crash in an extension module: the process ends, no exception.
    (dirs[0] / "crash.py").write_text(
        "import os\nopen('crash.pid', 'w').write(str(os.getpid()))\nos._exit(9)\n"
    )
    runtimes = []
    for index in (0, 1):
        env = task_env(spec.to_env(), master.address, index)
        runtimes.append(
            Runtime(
                TaskContext.from_env(env),
                credentials=credentials,
                workdir=dirs[index],
                env=env,
            )
        )
    codes: dict[int, int] = {}
    first = threading.Thread(target=lambda: codes.update({0: runtimes[0].run()}))
    first.start()
    # Worker 1 (so the cluster) only comes once worker 0's interpreter is dead.
    deadline = time.monotonic() + 30
    while not (dirs[0] / "crash.pid").exists() or not _dead(
        int((dirs[0] / "crash.pid").read_text() or 0)
    ):
        assert time.monotonic() < deadline, "the interpreter did not crash"
        time.sleep(0.05)
    codes[1] = runtimes[1].run()
    first.join(30)
    phase, diagnostics = master.wait_done()
    assert phase is Phase.SUCCEEDED, diagnostics
    assert codes == {0: 0, 1: 0}
    seen = json.loads((dirs[0] / "probe.json").read_text())
    assert json.loads(seen["tf_config"])["task"] == {"type": "worker", "index": 0}
    assert not seen["heavy_loaded"]


def _dead(pid: int) -> bool:
    """Exited: gone, or a zombie its parent has not reaped yet."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ValueError):
        return pid > 0


def test_a_stop_while_the_interpreter_still_imports_ends_it_before_the_script(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    """As a stop before formation does: the script, which never ran, never runs."""
    spec = job(preimport=("heavy",), stop_grace=5)
    (tmp_path / "heavy.py").write_text(HEAVY + "import time\ntime.sleep(60)\n")
    (tmp_path / spec.script_name).write_text("open('ran', 'w').close()\n")
    master = LiveMaster(spec, credentials).start()
    master.grant_all()
    env = task_env(spec.to_env(), master.address)
    rt = Runtime(
        TaskContext.from_env(env),
        credentials=credentials,
        workdir=tmp_path,
        env=env,
        timeouts=FAST,
    )
    result: list[int] = []
    task = threading.Thread(target=lambda: result.append(rt.run()))
    task.start()
    assert rt.session.cluster_ready.wait(30)  # formed, the message handed over
    state = master.state
    assert state is not None
    master.call(lambda: state.request_kill("test over"))
    task.join(40)
    assert result == [128 + signal.SIGTERM]  # SIGTERM, not the grace's SIGKILL
    assert not (tmp_path / "ran").exists()
    master.wait_done()


def big_job_runtime(
    credentials: tuple[bytes, bytes], tmp_path: Path, heavy: str, script: str
) -> tuple[LiveMaster, Runtime]:
    """A task whose hand-over message (100 kB of arguments) exceeds a pipe's buffer."""
    spec = job(preimport=("heavy",), args=("x" * 100_000,), stop_grace=5)
    (tmp_path / "heavy.py").write_text(heavy)
    (tmp_path / spec.script_name).write_text(script)
    master = LiveMaster(spec, credentials).start()
    master.grant_all()
    env = task_env(spec.to_env(), master.address)
    # The script's environment without TFYARN_JOB: its 130 kB would exceed
    # Linux's limit for one environment string when the interpreter starts.
    base = {k: v for k, v in env.items() if k != "TFYARN_JOB"}
    rt = Runtime(
        TaskContext.from_env(env),
        credentials=credentials,
        workdir=tmp_path,
        env=base,
        timeouts=FAST,
    )
    return master, rt


def test_a_message_larger_than_the_pipe_reaches_the_script(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    master, rt = big_job_runtime(
        credentials,
        tmp_path,
        HEAVY + "import time\ntime.sleep(1)\n",
        "import sys\nopen('argv.txt', 'w').write(str(len(sys.argv[1])))\n",
    )
    assert rt.run() == 0
    assert (tmp_path / "argv.txt").read_text() == "100000"
    phase, diagnostics = master.wait_done()
    assert phase is Phase.SUCCEEDED, diagnostics


def test_a_stop_is_handled_while_a_large_message_waits_for_the_imports(
    credentials: tuple[bytes, bytes], tmp_path: Path
) -> None:
    master, rt = big_job_runtime(
        credentials,
        tmp_path,
        HEAVY + "import time\ntime.sleep(60)\n",
        "open('ran', 'w').close()\n",
    )
    result: list[int] = []
    task = threading.Thread(target=lambda: result.append(rt.run()))
    task.start()
    assert rt.session.cluster_ready.wait(30)
    state = master.state
    assert state is not None
    master.call(lambda: state.request_kill("test over"))
    task.join(40)
    assert result == [128 + signal.SIGTERM]
    assert not (tmp_path / "ran").exists()
    master.wait_done()


def test_the_message_pipe_becomes_dev_null_once_the_script_runs(tmp_path: Path) -> None:
    """The script's opens do not take the pipe's number, and from outside the
    number no longer names a pipe (how fault injection finds a started script)."""
    script = tmp_path / "fds.py"
    script.write_text(
        "import os\n"
        "# python -u preload.py FD SCRIPT: the command line the runtime started\n"
        "fd = int(open('/proc/self/cmdline', 'rb').read().split(b'\\0')[3])\n"
        "opened = os.open(__file__, os.O_RDONLY)\n"
        "print(os.readlink(f'/proc/self/fd/{fd}'), opened != fd,"
        " os.get_inheritable(fd))\n"
    )
    done = bootstrap(script, modules=())
    assert done.returncode == 0, done.stderr
    held, not_reused, inheritable = done.stdout.split()
    assert held == os.devnull and not_reused == "True" and inheritable == "False"
