"""conf/README.md, the options reference, is what its generator makes of conf/."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfyarn import _options, _options_reference

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "conf" / "README.md"


def test_committed_reference_is_current() -> None:
    expected = _options_reference.generate(REPO / "conf")
    current = REFERENCE.read_text() if REFERENCE.is_file() else ""
    assert current == expected, (
        "conf/README.md is stale (conf/tfyarn-schema.yaml or conf/tfyarn.yaml "
        f"changed since it was generated): regenerate it with "
        f"`{_options_reference.COMMAND}` and commit the result"
    )


def test_every_key_is_documented_with_its_default() -> None:
    text = _options_reference.generate(REPO / "conf")
    defaults = _options.read_yaml(REPO / "conf" / _options.DEFAULTS_FILE)
    rows = {
        line.split("`")[1]: line for line in text.splitlines() if line.startswith("| `")
    }
    assert set(rows) == set(_options.schema())
    assert "`2 GiB`" in rows["worker_memory"]
    assert "`[tensorflow]`" in rows["preimport"]
    assert "0 to 1" in rows["num_chief"]
    assert "`--no_legacy_flags`" in rows["legacy_flags"]
    assert set(defaults) <= set(rows)


def test_client_keys_have_their_own_section() -> None:
    text = _options_reference.generate(REPO / "conf")
    client = text.split("## The client", 1)[1]
    for key in _options.client_keys():
        assert f"| `{key}`" in client
    assert "| `num_worker`" not in client


def test_table_cells_survive_pipes_and_angle_brackets() -> None:
    schema = {
        "docker_mount": {"type": "list", "help": "SRC:DST[:ro|rw] for <you>"},
    }
    text = _options_reference.render(schema, {"docker_mount": []})
    row = next(line for line in text.splitlines() if line.startswith("| `"))
    # Four cells: the escaped pipes do not split the row.
    assert row.replace("\\|", "").count("|") == 5
    assert "&lt;you&gt;" in row


def test_check_reports_a_stale_file_with_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "README.md"
    target.write_text("old\n")
    assert _options_reference.main(["--check", "--output", str(target)]) == 1
    assert _options_reference.COMMAND in capsys.readouterr().err
    assert target.read_text() == "old\n"

    assert _options_reference.main(["--output", str(target)]) == 0
    assert target.read_text() == _options_reference.generate()
    assert _options_reference.main(["--check", "--output", str(target)]) == 0
