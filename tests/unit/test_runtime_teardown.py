"""A script that returned ends its task promptly, however its interpreter's
teardown hangs (tfyarn/runtime/teardown.py).

The hang is TensorFlow's, seen on the HA local cluster after a NameNode kill:
a tf.data iterator freed with the script's globals waited in its destructor for
a prefetching thread, and SIGTERM was taken by TensorFlow's preemption
notifier. Here a global whose ``__del__`` never returns, with SIGTERM ignored,
stands for it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _am_support import LiveMaster, job, task_env

from tfyarn.contract.status import Phase
from tfyarn.runtime import BOOTSTRAP, Runtime, TaskContext, Timeouts
from tfyarn.runtime.teardown import RETURNED_FILE

# Its exit handler leaves a file; then its teardown never ends.
HANGS = """\
import atexit, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
atexit.register(lambda: open("atexit-ran", "w").close())

class Stuck:
    def __del__(self):
        time.sleep(3600)

stuck = Stuck()
print("LAST", flush=True)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
"""

# The other way the same race ends: tf.data's thread, unwound by the
# finalizing interpreter, aborts the process.
ABORTS = HANGS.replace("time.sleep(3600)", "__import__('os').abort()")


def start_bootstrap(
    script: Path, args: list[str], env: dict[str, str], output: int | None = None
) -> subprocess.Popen[bytes]:
    """The bootstrap in ``script``'s directory, handed ``args`` as the runtime
    hands them (a JSON message on a pipe)."""
    read_fd, write_fd = os.pipe()
    child = subprocess.Popen(
        [sys.executable, "-u", str(BOOTSTRAP), str(read_fd), str(script)],
        cwd=script.parent,
        pass_fds=(read_fd,),
        env={**os.environ, **env},
        stdout=output,
        stderr=output,
    )
    os.close(read_fd)
    os.write(write_fd, json.dumps({"env": {}, "args": args}).encode())
    os.close(write_fd)
    return child


def test_the_bootstrap_says_the_script_returned_after_its_exit_handlers(
    tmp_path: Path,
) -> None:
    script = tmp_path / "train.py"
    script.write_text(HANGS)
    returned = tmp_path / "returned-0"
    child = start_bootstrap(
        script, ["7"], {RETURNED_FILE: str(returned)}, output=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while not returned.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert returned.read_text() == "7"  # the code of sys.exit(7)
        assert (tmp_path / "atexit-ran").exists()  # written before it
        assert child.poll() is None  # and the teardown still hangs
    finally:
        child.kill()
        child.wait()


@pytest.mark.parametrize("script", [HANGS, ABORTS], ids=["hangs", "aborts"])
def test_a_teardown_that_hangs_or_aborts_ends_with_the_scripts_code(
    credentials: tuple[bytes, bytes], tmp_path: Path, script: str
) -> None:
    spec = job(tasks={"worker": 1}, preimport=("json",))
    (tmp_path / spec.script_name).write_text(script)
    master = LiveMaster(spec, credentials).start()
    master.grant_all()
    env = {**os.environ, **task_env(spec, master, "worker", 0)}
    rt = Runtime(
        TaskContext.from_env(env),
        credentials=credentials,
        workdir=tmp_path,
        env=env,
        timeouts=Timeouts(teardown=1.0, report_end=1.0, report_end_attempt=0.5),
    )
    codes: list[int] = []
    began = time.monotonic()
    runner = threading.Thread(target=lambda: codes.append(rt.run()), daemon=True)
    runner.start()
    runner.join(60)
    took = time.monotonic() - began
    assert codes == [0], f"exit codes {codes} after {took:.0f} s (none: still running)"
    phase, diagnostics = master.wait_done()
    assert phase is Phase.SUCCEEDED, diagnostics
    assert (tmp_path / "atexit-ran").exists()


# A child forked by the script ends through sys.exit, inside run_path too.
FORKS = """\
import os, sys
pid = os.fork()
if pid == 0:
    sys.exit(5)
os.waitpid(pid, 0)
open("marker-while-running", "w").write(str(os.path.exists(os.environ["RETURNED"])))
"""


def test_a_child_forked_by_the_script_does_not_say_the_script_returned(
    tmp_path: Path,
) -> None:
    script = tmp_path / "train.py"
    script.write_text(FORKS)
    returned = tmp_path / "returned-0"
    child = start_bootstrap(
        script, [], {RETURNED_FILE: str(returned), "RETURNED": str(returned)}
    )
    assert child.wait(60) == 0
    assert (tmp_path / "marker-while-running").read_text() == "False"
    assert returned.read_text() == "0"
