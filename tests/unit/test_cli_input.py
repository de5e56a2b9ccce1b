"""``tfyarn submit`` checks its input one way, dry run or not."""

from __future__ import annotations

import importlib.metadata
import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import tomllib
import yaml
from _fake_yarn import FakeYarn

import tfyarn
from tfyarn._options import schema
from tfyarn.cli import main
from tfyarn.client import connection
from tfyarn.errors import SpecError


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "train.py"
    path.write_text("print('training')\n")
    return str(path)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    monkeypatch.setattr(time, "sleep", lambda s: None)


def use(monkeypatch: pytest.MonkeyPatch, fake: FakeYarn | None) -> None:
    def connect() -> FakeYarn:
        if fake is None:
            raise AssertionError("the CLI connected to YARN but should not have")
        return fake

    monkeypatch.setattr(connection, "connect", connect)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[Any, str, str]:
    """(exit code, stdout, stderr); argparse's SystemExit becomes its code."""
    try:
        code: Any = main(argv)
    except SystemExit as exc:
        code = exc.code
    out, err = capsys.readouterr()
    return code, out, err


# -- one validation for --dry_run and a real submit -----------------------------


def _out_of_bounds() -> list[tuple[str, str]]:
    cases = []
    for key, rule in schema().items():
        lo, hi = rule.get("minimum"), rule.get("maximum")
        step = 1 if rule["type"] in ("int", "memory") else 0.05
        if lo is not None:
            cases.append((key, str(lo - step)))
        if hi is not None:
            cases.append((key, str(hi + step)))
    return cases


def test_every_bounded_option_has_a_case() -> None:
    # The schema's bounds are what the next test walks; it must see them all.
    keys = {key for key, _ in _out_of_bounds()}
    assert {"poll_interval", "num_chief", "worker_memory", "heartbeat_interval"} <= keys


@pytest.mark.parametrize(("key", "value"), _out_of_bounds())
def test_dry_run_and_submit_refuse_every_out_of_bounds_value(
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    capsys: pytest.CaptureFixture[str],
    key: str,
    value: str,
) -> None:
    use(monkeypatch, None)
    dry = run(["submit", "--dry_run", f"--{key}", value, script], capsys)
    real = run(["submit", f"--{key}", value, script], capsys)
    assert dry[0] == real[0] == 1
    assert dry[2] == real[2], (dry, real)
    assert dry[2].startswith(f"Error: invalid {key} (from the command line): must be")
    assert dry[1] == ""


@pytest.mark.parametrize(
    "argv",
    [
        ["--num_ps", "1", "--num_worker", "0"],
        ["--detach", "--poll_interval", "0"],
        ["--worker_memory", "2 parsecs"],
        ["--preimport", "not-a-module"],
        ["--files", "/nonexistent/file.txt"],
    ],
)
def test_dry_run_refuses_what_submit_refuses(
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
) -> None:
    use(monkeypatch, None)
    dry = run(["submit", "--dry_run", *argv, script], capsys)
    real = run(["submit", *argv, script], capsys)
    assert dry[0] == real[0] == 1 and dry[2] == real[2] and dry[2].startswith("Error:")


# -- memory units ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "mib"),
    [
        ("2G", 2048),
        ("2g", 2048),
        ("2GB", 2048),
        ("2 GiB", 2048),
        ("512mb", 512),
        ("512M", 512),
        ("1.5g", 1536),
        ("1t", 1024 * 1024),
        ("262144k", 256),
        ("262144 KB", 256),
        ("3000", 3000),
    ],
)
def test_memory_units_are_binary_like_spark_and_yarn(
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    capsys: pytest.CaptureFixture[str],
    text: str,
    mib: int,
) -> None:
    use(monkeypatch, FakeYarn(nodes=[(2**21, 8, 0)]))
    code, out, _ = run(["submit", "--dry_run", "--worker_memory", text, script], capsys)
    assert code == 0
    job = yaml.safe_load(out.split("OK: ")[0])
    assert job["tasks"]["worker"]["memory_mib"] == mib


def test_a_nonsense_unit_names_the_accepted_ones(
    monkeypatch: pytest.MonkeyPatch, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    use(monkeypatch, None)
    code, _, err = run(["submit", "--worker_memory", "2 gigs", script], capsys)
    assert code == 1
    assert "unknown memory unit 'gigs'" in err
    assert "k, m, g, t, KB, MB, GB, TB, KiB, MiB, GiB, TiB" in err


def test_help_says_what_memory_units_mean(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["submit", "--help"], capsys)
    assert code == 0
    flat = " ".join(out.split())
    assert "a plain number is MiB" in flat and "2g = 2GB = 2 GiB = 2048 MiB" in flat


# -- options after the script --------------------------------------------------


def test_a_tfyarn_option_after_the_script_warns(
    monkeypatch: pytest.MonkeyPatch, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    use(monkeypatch, FakeYarn())
    argv = ["submit", "--dry_run", script, "--num_worker", "2", "--steps", "3"]
    code, out, err = run(argv, capsys)
    assert code == 0  # a warning, not an error: the script may want it
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("Warning: --num_worker after ")
    assert "goes to the script" in lines[0] and "before the script" in lines[0]
    job = yaml.safe_load(out.split("OK: ")[0])
    assert job["args"] == ["--num_worker", "2", "--steps", "3"]
    assert job["tasks"]["worker"]["count"] == 1


@pytest.mark.parametrize(
    "args",
    [["--steps", "3"], ["--config", "c.yaml", "--name", "x"], ["--epochs=2"]],
)
def test_the_script_s_own_options_do_not_warn(
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
) -> None:
    use(monkeypatch, FakeYarn())
    code, _, err = run(["submit", "--dry_run", script, *args], capsys)
    assert code == 0 and err == ""


def test_the_warning_catches_dashed_and_inline_spellings(
    monkeypatch: pytest.MonkeyPatch, script: str, capsys: pytest.CaptureFixture[str]
) -> None:
    use(monkeypatch, FakeYarn())
    argv = ["submit", "--dry_run", script, "--worker-memory=4g", "--detach"]
    code, _, err = run(argv, capsys)
    assert code == 0 and "Warning: --worker-memory, --detach after" in err


# -- the command line itself -------------------------------------------------------


def test_version(capsys, monkeypatch, tmp_path) -> None:
    # A yarn on PATH answers `yarn version`; the plugin is named but absent.
    yarn = tmp_path / "yarn"
    yarn.write_text("#!/bin/sh\n[ \"$1\" = version ] && echo 'Hadoop 3.4.2'\n")
    yarn.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("TFYARN_HDFS_PLUGIN", str(tmp_path / "absent.so"))
    code, out, _ = run(["--version"], capsys)
    lines = out.strip().splitlines()
    assert code == 0, out
    # One version, written once: pyproject.toml's, read from the metadata.
    pyproject = tomllib.loads(
        (Path(__file__).parents[2] / "pyproject.toml").read_text()
    )
    assert tfyarn.__version__ == pyproject["project"]["version"]
    assert lines[0].startswith(f"tfyarn {tfyarn.__version__} (")
    assert lines[1] == f"TensorFlow {importlib.metadata.version('tensorflow-cpu')}"
    assert lines[2] == "skein 0.8.2"
    assert lines[3].startswith(f"Python {sys.version.split()[0]} ")
    assert lines[4] == f"Hadoop client: Hadoop 3.4.2 ({yarn})"
    assert lines[5].startswith("hdfs:// plugin: absent: tfyarn's HDFS plugin")
    assert "pip install tfyarn-*.whl" in lines[5]


@pytest.mark.parametrize(
    ("argv", "usage"),
    [
        (["submit", "--bogus", "train.py"], "usage: tfyarn submit "),
        (["status", "--bogus", "application_1_1"], "usage: tfyarn status "),
        (["logs", "--bogus", "application_1_1"], "usage: tfyarn logs "),
    ],
)
def test_a_bad_option_prints_its_command_s_usage(
    capsys: pytest.CaptureFixture[str], argv: list[str], usage: str
) -> None:
    code, _, err = run(argv, capsys)
    assert code == 2
    assert err.startswith(usage), err
    assert "unrecognized arguments: --bogus" in err


def test_underscores_are_the_spelling_shown(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(["submit", "--help"], capsys)
    assert "--dry_run" in out and "--no_legacy_flags" in out
    assert "--dry-run" not in out and "--no-legacy" not in out
    assert "--worker-memory" not in out
    _, out, _ = run(["cluster", "start", "--help"], capsys)
    assert "--base_dir" in out and "--port_offset" in out
    assert "--base-dir" not in out and "--port-offset" not in out


@pytest.mark.parametrize(
    ("argv", "key", "value"),
    [
        (["--dry-run", "--num-worker", "3"], "count", 3),
        (["--dry_run", "--worker-memory", "1g"], "memory_mib", 1024),
        (["--dry_run", "--legacy-flags"], "legacy_flags", True),
        (["--dry_run", "--legacy_flags", "--no-legacy_flags"], "legacy_flags", False),
        (["--dry_run", "--legacy_flags", "--no_legacy_flags"], "legacy_flags", False),
        (["--dry_run", "--no-preimport"], "preimport", []),
        (["--dry_run", "--env", "A=1", "--env", "B=2"], "env", {"A": "1", "B": "2"}),
        (["--dry_run", "--env", "A=1", "--env-var-typo", "B=2"], None, None),
    ],
)
def test_dashed_spellings_still_work(
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    key: str | None,
    value: object,
) -> None:
    use(monkeypatch, FakeYarn())
    code, out, err = run(["submit", *argv, script], capsys)
    if key is None:
        assert code == 2 and "unrecognized arguments: --env-var-typo" in err
        return
    assert code == 0, err
    job = yaml.safe_load(out.split("OK: ")[0])
    got = job["tasks"]["worker"][key] if key in ("count", "memory_mib") else job[key]
    assert got == value


def test_cluster_flags_keep_their_dashed_spelling() -> None:
    from tfyarn.cli import build_parser

    parser = build_parser()
    for argv in (
        ["--base-dir", "/x", "--port-offset", "7", "--token-lifetime", "60"],
        ["--base_dir", "/x", "--port_offset", "7", "--token_lifetime", "60"],
    ):
        ns = parser.parse_args(["cluster", "start", "--secure", *argv])
        assert (ns.base_dir, ns.port_offset, ns.token_lifetime) == ("/x", 7, 60)
        assert ns.secure is True
    for off in ("--no-secure", "--no_secure"):
        assert parser.parse_args(["cluster", "start", off]).secure is False
    assert parser.parse_args(["cluster", "start"]).secure is None


# -- config files ------------------------------------------------------------------


def test_every_problem_of_a_config_file_is_reported_at_once(
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    conf = tmp_path / "job.yaml"
    conf.write_text("num_pss: 1\nnum_worker: two\nworker_memory: 2 gigs\nqueue: q\n")
    use(monkeypatch, None)
    code, _, err = run(["submit", "--config", str(conf), script], capsys)
    assert code == 1
    assert err.startswith(f"Error: 3 problems in {conf}: ")
    assert "'num_pss': did you mean 'num_ps'" in err
    assert "num_worker" in err and "expected a whole number" in err
    assert "unknown memory unit 'gigs'" in err
    assert len(err.strip().splitlines()) == 1  # one paragraph


def test_a_key_set_twice_in_a_config_file_is_refused(
    monkeypatch: pytest.MonkeyPatch,
    script: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    conf = tmp_path / "job.yaml"
    conf.write_text("num_worker: 2\nqueue: q\nnum_worker: 3\n")
    use(monkeypatch, None)
    code, _, err = run(["submit", "--config", str(conf), script], capsys)
    assert code == 1
    assert "key 'num_worker' is set twice, on lines 1 and 3" in err
    assert str(conf) in err


def test_nested_duplicates_are_refused_too(tmp_path: Path) -> None:
    from tfyarn.client import config

    conf = tmp_path / "job.yaml"
    conf.write_text("env:\n  A: '1'\n  A: '2'\n")
    with pytest.raises(SpecError, match="key 'A' is set twice, on lines 2 and 3"):
        config.load(conf)
