"""Every ``>>>`` example in tfyarn/ and am/ runs as a doctest: they are documentation.

The modules are found by reading their source, so collecting these tests
imports none of them; each test imports its own. Examples that need a live
cluster, HDFS or TensorFlow carry ``# doctest: +SKIP``; every other one runs
and must print what it shows. They run where a user would type them: in a
directory holding a ``train.py``, with a Hadoop configuration whose
fs.defaultFS is the local cluster's NameNode and no tfyarn config of one's own.
"""

from __future__ import annotations

import doctest
import importlib
import io
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("tfyarn", "am")
CORE_SITE = (
    "<configuration><property><name>fs.defaultFS</name>"
    "<value>hdfs://127.0.0.1:8020</value></property></configuration>\n"
)


def example_lines(path: Path) -> int:
    """How many lines of ``path`` start an example (``>>>``)."""
    text = path.read_text(encoding="utf-8")
    return sum(1 for line in text.splitlines() if line.lstrip().startswith(">>>"))


def modules_with_examples() -> list[str]:
    """Dotted names of the modules of PACKAGES whose source holds an example."""
    names = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if example_lines(path):
                parts = path.relative_to(REPO).with_suffix("").parts
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                names.append(".".join(parts))
    return names


MODULES = modules_with_examples()


def test_the_scan_finds_the_examples_of_both_packages() -> None:
    # An empty scan would leave the parametrized test below with nothing to run.
    assert {"am.token_schedule", "tfyarn.contract.exit_codes"} <= set(MODULES)
    assert "tfyarn.client.submission" in MODULES


@pytest.fixture
def users_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with a script, and the local cluster's Hadoop config."""
    (tmp_path / "train.py").write_text("print('training')\n")
    conf = tmp_path / "hadoop-conf"
    conf.mkdir()
    (conf / "core-site.xml").write_text(CORE_SITE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return tmp_path


@pytest.mark.usefixtures("users_directory")
@pytest.mark.parametrize("name", MODULES)
def test_examples_run_and_show_what_they_print(name: str) -> None:
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder().find(module)
    # Every >>> of the source is an example doctest runs or skips, none in a
    # comment or an object the finder does not visit.
    found = sum(len(test.examples) for test in tests)
    assert module.__file__ is not None
    assert found == example_lines(Path(module.__file__)), (
        f"{name}: doctest sees {found} of its examples"
    )
    report = io.StringIO()
    runner = doctest.DocTestRunner()
    for test in tests:
        runner.run(test, out=report.write)
    assert runner.failures == 0, report.getvalue()
