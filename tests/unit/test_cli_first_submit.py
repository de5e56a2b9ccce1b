"""What a newcomer's first commands print, and how they end when interrupted.

skein's first-run notice is not printed, "Next:" comes only with something
under it, a missing script is the usage error, and a SIGTERM or SIGHUP ends a
command through its cleanups (the temporary Hadoop configuration goes too).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import skein

from tfyarn import cli
from tfyarn.client import cli as client_cli

REPO = Path(__file__).resolve().parents[2]


def test_skeins_first_run_notice_is_not_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # skein creates its TLS credentials on a machine's first connection and
    # says so with a raw UserWarning; the credentials are still written.
    monkeypatch.setitem(skein.core.properties._mapping, "config_dir", str(tmp_path))

    def first_connection(_ns: object) -> int:
        skein.Security.from_default()
        warnings.warn("tfyarn's own warnings still show", UserWarning, stacklevel=1)
        return 0

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert client_cli._on_command_line(first_connection)(None) == 0
    assert [str(w.message) for w in seen] == ["tfyarn's own warnings still show"]
    assert (tmp_path / "skein.crt").is_file()


def test_next_comes_only_with_steps_under_it() -> None:
    app = "application_1_0001"
    assert client_cli.submitted_text(app, []) == f"Submitted {app}"
    text = client_cli.submitted_text(app, client_cli.next_steps(app))
    lines = text.splitlines()
    assert lines[:2] == [f"Submitted {app}", "Next:"]
    assert lines[2] == f"  tfyarn status {app}" and len(lines) == 6


def test_a_submit_without_a_script_names_the_script_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(["submit", "--num_worker", "2"])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err.rstrip().endswith("the following arguments are required: script")
    assert "args" not in err.rstrip().splitlines()[-1]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_ends_the_command_through_its_cleanups(
    sig: signal.Signals, tmp_path: Path
) -> None:
    # A command that made the bounded copy of the Hadoop configuration
    # (tfyarn-conf-*) when its process is told to end.
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "yarn-site.xml").write_text("<configuration></configuration>\n")
    program = (
        "import os, signal, sys, time\n"
        "from tfyarn.client import cli, hadoop_conf\n"
        "def command(ns):\n"
        f"    print(hadoop_conf.bounded_conf_dir({str(conf)!r}, 5.0), flush=True)\n"
        f"    os.kill(os.getpid(), {int(sig)})\n"
        "    time.sleep(30)\n"
        "    return 0\n"
        "sys.exit(cli._on_command_line(command)(None))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        env={**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 128 + sig, done.stderr
    overlay = Path(done.stdout.strip())
    assert overlay.parent == tmp_path and overlay.name.startswith("tfyarn-conf-")
    assert not overlay.exists()


def test_the_signal_handlers_are_given_back() -> None:
    before = signal.getsignal(signal.SIGTERM)
    assert client_cli._on_command_line(lambda _ns: 0)(None) == 0
    assert signal.getsignal(signal.SIGTERM) is before
