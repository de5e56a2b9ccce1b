"""``preimport``: the script's interpreter imports TensorFlow while the cluster forms.

On the local YARN cluster, through ``tfyarn submit`` as a user runs it: with
the shipped default the script finds TensorFlow already imported at its first
line, together with everything only known after formation; ``--no_preimport``
starts a plain interpreter after formation.
"""

from __future__ import annotations

import json
import re
import textwrap
import time
from pathlib import Path

import pytest
from helpers import SMALL, run_cli

pytestmark = pytest.mark.yarn

SMALL_ARGS = [a for k, v in SMALL.items() for a in (f"--{k}", v)]

# What the script sees at its first line, as one JSON log line.
FIRST_LINE = """\
import json, os, sys, time
seen = {
    "tensorflow_loaded": "tensorflow" in sys.modules,
    "name": __name__,
    "file": os.path.basename(__file__),
    "argv": sys.argv[1:],
    "task": json.loads(os.environ["TF_CONFIG"])["task"],
    "reuse_port": os.environ.get("TF_GRPC_REUSE_PORT"),
}
print("SEEN " + json.dumps(seen), flush=True)
if "--fail" in sys.argv and seen["task"]["index"] == 1:
    raise ValueError("the model exploded")
if "--fail" in sys.argv:
    time.sleep(1200)  # the lead would run long: the failure must end the job
"""


def submit(tmp_path: Path, *options: str) -> tuple[str, str]:
    """Submit FIRST_LINE with ``options``; return (app id, worker:1's stdout)."""
    script = tmp_path / "first_line.py"
    script.write_text(textwrap.dedent(FIRST_LINE))
    done = run_cli(
        "submit", *SMALL_ARGS, "--num_worker", "2", "--name", "test-preimport",
        "--max_restarts", "0", *options, str(script), "--steps", "{task_index}",
    )  # fmt: skip
    app_id = re.search(r"application_\d+_\d+", done.stdout)
    assert app_id, done.stdout + done.stderr
    logs = run_cli("logs", app_id.group(), "--task", "worker:1")
    assert logs.returncode == 0, logs.stderr
    return app_id.group(), done.stdout + done.stderr + logs.stdout


def seen_in(text: str) -> dict[str, object]:
    found = re.search(r"^SEEN (\{.*\})$", text, re.MULTILINE)
    assert found, text[-3000:]
    return dict(json.loads(found.group(1)))


def test_the_script_starts_with_tensorflow_imported_and_its_cluster_known(
    tmp_path: Path,
) -> None:
    _, out = submit(tmp_path)
    assert "final status: SUCCEEDED" in out, out[-3000:]
    assert "pre-started the script's interpreter" in out
    assert seen_in(out) == {
        "tensorflow_loaded": True,
        "name": "__main__",
        "file": "first_line.py",
        "argv": ["--steps", "1"],
        "task": {"type": "worker", "index": 1},
        "reuse_port": "1",
    }


def test_no_preimport_starts_a_plain_interpreter_after_formation(
    tmp_path: Path,
) -> None:
    _, out = submit(tmp_path, "--no_preimport")
    assert "final status: SUCCEEDED" in out, out[-3000:]
    assert "pre-started" not in out
    seen = seen_in(out)
    assert seen["tensorflow_loaded"] is False
    assert seen["task"] == {"type": "worker", "index": 1}


def test_an_exception_in_the_script_fails_the_job_with_its_traceback(
    tmp_path: Path,
) -> None:
    script = tmp_path / "first_line.py"
    script.write_text(textwrap.dedent(FIRST_LINE))
    started = time.monotonic()
    done = run_cli(
        "submit", *SMALL_ARGS, "--num_worker", "2", "--name", "test-preimport-fail",
        "--max_restarts", "0", str(script), "--fail",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    # Far below the lead's 1200 s sleep, far above a loaded machine's start.
    assert time.monotonic() - started < 500, "the job waited for the sleeping lead"
    assert "final status: FAILED" in done.stdout
    err = done.stderr
    assert err.startswith("Error: application_"), err
    assert "Traceback (most recent call last)" not in err.split("\n")[0]
    assert "worker:1" in err and "exited with code 1" in err, err
    assert 'first_line.py", line 12, in <module>' in err, err
    assert "ValueError: the model exploded" in err
    assert "_bootstrap" not in err and "runpy" not in err  # no bootstrap frames
    assert "yarn logs -applicationId application_" in err


# Returns at once, then hangs in the interpreter's teardown with SIGTERM
# ignored, as TensorFlow's tf.data destructors did after a NameNode kill
# (tfyarn/runtime/teardown.py).
HANGS_IN_TEARDOWN = """\
import signal, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)

class Stuck:
    def __del__(self):
        time.sleep(3600)

stuck = Stuck()
print("LAST", flush=True)
"""


def test_a_lead_whose_teardown_hangs_ends_the_job_promptly_as_succeeded(
    tmp_path: Path,
) -> None:
    script = tmp_path / "hangs.py"
    script.write_text(HANGS_IN_TEARDOWN)
    done = run_cli(
        "submit", *SMALL_ARGS, "--num_worker", "1", "--name", "test-teardown",
        "--max_restarts", "0", str(script), timeout=300,
    )  # fmt: skip
    out = done.stdout + done.stderr
    assert done.returncode == 0 and "final status: SUCCEEDED" in out, out[-3000:]
    app_id = re.search(r"application_\d+_\d+", out)
    assert app_id, out
    logs = run_cli("logs", app_id.group(), "--task", "worker:0").stdout
    assert "still tearing down" in logs and "reported as 0" in logs, logs[-3000:]
