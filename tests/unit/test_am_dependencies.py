"""A master started with a Python that lacks tfyarn's modules names them and ends.

``python -m am`` runs in a subprocess whose import system refuses some modules
(as a node's system Python would not have them): the master must exit with
EX_CONFIG and a diagnostic naming the interpreter, its version, the node and
the modules, before any traceback, and end the application for good.
"""

from __future__ import annotations

import ast
import base64
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
from _fake_yarn import APP_ID, FakeYarn, Report

import tfyarn
from am import dependencies, unregister
from tfyarn.contract import env as contract_env
from tfyarn.contract.exit_codes import MASTER_LACKS_MODULES, explain_exit
from tfyarn.errors import JobFailedError

REPO = Path(__file__).resolve().parents[2]

# Refuses the modules named in argv[1] (comma-separated) the way a Python
# without them would, then runs `python -m am`.
RUN_AM_WITHOUT = """
import runpy, sys
blocked = set(sys.argv.pop(1).split(","))
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in blocked:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Absent())
sys.argv[0] = "am"
runpy.run_module("am", run_name="__main__", alter_sys=True)
"""


def run_master(
    tmp_path: Path, blocked: str, job: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(REPO),
        "NM_HOST": "node7.example",
        # No JVM to unregister with: the master says so and still exits.
        "JAVA_HOME": str(tmp_path / "no-jdk"),
    }
    if job is not None:
        env[dependencies.JOB_VARIABLE] = base64.b64encode(
            json.dumps(job).encode()
        ).decode()
    return subprocess.run(
        [sys.executable, "-c", RUN_AM_WITHOUT, blocked],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_python_without_grpc_health_is_named_with_node_version_and_fix(
    tmp_path: Path,
) -> None:
    done = run_master(tmp_path, "grpc_health,skein", {"python": sys.executable})
    assert done.returncode == dependencies.EXIT_MISSING_MODULES, done.stderr
    version = ".".join(str(n) for n in sys.version_info[:3])
    said = done.stderr
    assert "Traceback" not in said, said
    assert (
        f"tfyarn: the application master cannot start on node node7.example: the "
        f"Python {sys.executable} (Python {version}): it cannot import "
        "grpc_health, skein (No module named 'grpc_health')"
    ) in said
    assert "Give --python the path of a Python that has tfyarn installed" in said
    assert "--python_env auto" in said
    assert "could not unregister the application" in said  # and says why not


def test_a_shipped_environment_without_tfyarn_is_told_to_install_it(
    tmp_path: Path,
) -> None:
    done = run_master(
        tmp_path, "tfyarn", {"python": "/usr/bin/python3", "python_env": "auto"}
    )
    assert done.returncode == dependencies.EXIT_MISSING_MODULES, done.stderr
    assert "the Python shipped with --python_env auto" in done.stderr
    assert "cannot import tfyarn (No module named 'tfyarn')" in done.stderr
    assert "Install tfyarn into that environment" in done.stderr


def test_a_complete_python_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    ended: list[str] = []
    monkeypatch.setattr(dependencies, "end_application", ended.append)
    dependencies.require()  # this interpreter runs the tests: it has them all
    assert ended == []


def test_a_missing_dependency_of_a_module_is_the_one_named(tmp_path: Path) -> None:
    (tmp_path / "needs_other.py").write_text("import tfyarn_absent_dependency\n")
    sys.path.insert(0, str(tmp_path))
    try:
        found = dependencies.missing_modules(
            (("needs_other", "needs_other", "needs-other"),),
            (("tfyarn_absent_located", "tfyarn_absent_located", "x"),),
        )
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("needs_other", None)
    assert [name for name, _, _ in found] == [
        "tfyarn_absent_dependency",
        "tfyarn_absent_located",
    ]


def test_the_application_ends_once_for_good_then_skein_stops(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    def fake_unregister(status: str, diagnostics: str) -> None:
        calls.append(f"unregister {status}: {diagnostics}")

    class App:
        def shutdown(self, status: str, diagnostics: str) -> None:
            calls.append(f"skein {status}: {diagnostics}")

    skein = types.SimpleNamespace(
        ApplicationClient=types.SimpleNamespace(from_current=App)
    )
    monkeypatch.setattr(unregister, "unregister", fake_unregister)
    monkeypatch.setitem(sys.modules, "skein", skein)
    dependencies.end_application("no grpc")
    assert calls == ["unregister FAILED: no grpc", "skein FAILED: no grpc"]


def test_an_old_python_is_named_as_such() -> None:
    text = dependencies.diagnostic(
        [], python="/usr/bin/python3", version="3.6.8", node="n1", old=True
    )
    assert "(Python 3.6.8): it is older than the Python 3.10 tfyarn needs." in text


def test_the_entry_compiles_for_an_old_python() -> None:
    # The check must get to speak: nothing before it may be a syntax error
    # for a node's old python3 (`from __future__ import annotations` is one
    # before 3.7).
    for name in ("__main__.py", "dependencies.py"):
        tree = ast.parse((REPO / "am" / name).read_text(), feature_version=(3, 6))
        futures = [
            alias.name
            for node in tree.body
            if isinstance(node, ast.ImportFrom) and node.module == "__future__"
            for alias in node.names
        ]
        assert "annotations" not in futures, name
    main = (REPO / "am" / "__main__.py").read_text()
    first_import = re.search(r"^(from|import) \S+", main, re.MULTILINE)
    assert first_import and first_import.group() == "from am.dependencies"


def test_constants_agree_with_tfyarn() -> None:
    assert dependencies.EXIT_MISSING_MODULES == MASTER_LACKS_MODULES
    assert "EX_CONFIG" in explain_exit(MASTER_LACKS_MODULES)
    assert dependencies.JOB_VARIABLE == contract_env.JOB
    pyproject = (REPO / "pyproject.toml").read_text()
    wanted = re.search(r'^requires-python = "(.*)"$', pyproject, re.MULTILINE)
    assert wanted and wanted.group(1) == ">={}.{}".format(*dependencies.MIN_PYTHON)


def test_submit_prints_the_masters_diagnostic(tmp_path: Path) -> None:
    # What the master's unregistration leaves in YARN's report is what the
    # user reads at the end of `tfyarn submit`.
    script = tmp_path / "train.py"
    script.write_text("")
    node_python = "/opt/on-the-nodes-only/bin/python3"  # nothing to probe here
    said = dependencies.diagnostic(
        [("grpc_health", "grpcio-health-checking", "No module named 'grpc_health'")],
        python=node_python,
        version="3.11.2",
        node="node7",
    )
    fake = FakeYarn([Report(state="FINISHED", final_status="FAILED", diagnostics=said)])
    with pytest.raises(JobFailedError) as err:
        tfyarn.submit(str(script), python=node_python, wait=True, client=fake)
    text = str(err.value)
    assert f"the Python {node_python} (Python 3.11.2)" in text
    assert "cannot import grpc_health" in text and "node node7" in text


def test_an_unregistered_failure_is_still_explained_by_its_exit_code() -> None:
    # No JDK to unregister with and no skein: skein's AM reports the code.
    fake = FakeYarn(
        [
            Report(
                state="FINISHED",
                final_status="FAILED",
                diagnostics="Application driver failed with exit code 78, see "
                "logs for more information.",
            )
        ]
    )
    st = tfyarn.status(APP_ID, client=fake)
    assert "meaning: the application master exited with EX_CONFIG (78)" in (
        st.diagnostics
    )
    assert "lacks modules it needs" in st.diagnostics
