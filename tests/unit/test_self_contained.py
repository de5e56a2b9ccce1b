"""The project stands on its own: no tracked file points outside the repository.

A comment, docstring or message must state its fact, not cite a number on a
tracker that is not in the repository (the word "issue" or "issues" followed
by a number) nor a notes file that is not in it. Other projects' public
trackers may be cited by the project's name and number (``keras#18624``).
Binary files and the CI's own scripts (``.ci/``) are not read.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Spelt in pieces, so that this file does not cite them itself.
_NOTES = "FIELD" + "_NOTES"
_SHARED = r"\.\./" + r"shared\b"
CITATION = re.compile(
    r"\bissues?[\s:#-]*\d+|" + _NOTES + "|" + _SHARED,
    re.IGNORECASE,
)


def citations(text: str) -> list[tuple[int, str]]:
    """``(line number, line)`` of each line of ``text`` that cites outside."""
    return [
        (number, line.strip())
        for number, line in enumerate(text.splitlines(), start=1)
        if CITATION.search(line)
    ]


def _tracked_files() -> list[str]:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout: the tracked files are unknown")
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    return [name for name in out.decode().split("\0") if name]


def _text(path: Path) -> str | None:
    """The file's text; ``None`` for a binary (or missing) file."""
    try:
        data = path.read_bytes()
    except (FileNotFoundError, IsADirectoryError):
        return None
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


@pytest.mark.parametrize(
    "line",
    [
        # Split so that this file does not cite a tracker itself.
        "see issue" + " 12",
        "(Issue" + " #3)",
        "issues" + " 4 and 5",
        "fixed in issue" + "-7",
        "measured (" + _NOTES + ")",
        "as in ../" + "shared/notes.md",
    ],
)
def test_a_citation_is_found(line: str) -> None:
    assert citations(f"first line\n{line}\n") == [(2, line)]


@pytest.mark.parametrize(
    "line",
    [
        "keras#18624 made the callback write twice",
        "TonY #146",
        "the token was issued at 110.0",
        "issue the request again",
        "../" + "sharedlib is not a citation of a notes directory",
    ],
)
def test_a_fact_is_not_a_citation(line: str) -> None:
    assert citations(line) == []


def test_no_tracked_file_cites_a_tracker_or_notes_outside_the_repository() -> None:
    found = []
    for name in _tracked_files():
        if name.startswith(".ci/"):
            continue
        text = _text(ROOT / name)
        if text is None:
            continue
        found += [f"{name}:{number}: {line}" for number, line in citations(text)]
    assert not found, (
        "state the fact (what was measured or decided, and why) instead of "
        "pointing outside the repository:\n" + "\n".join(found)
    )
