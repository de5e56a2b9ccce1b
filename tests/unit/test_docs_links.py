"""The Markdown docs hold together: relative links resolve, the README stays short.

A link to another file must name a file or directory of the repository; a
link with an anchor (``README.md#local-cluster``, ``#recovery``) must name a
heading of that file, by GitHub's rule for heading anchors.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README_LIMIT = 15_000  # bytes: a newcomer reads it to the end

_FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.MULTILINE | re.DOTALL)
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1", re.DOTALL)
_INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE_LINK = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.MULTILINE)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
_EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _markdown_files() -> list[Path]:
    """Every *.md git tracks or would track (not ignored), else every one found."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.md"],
            cwd=REPO,
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        listed = [
            str(p.relative_to(REPO))
            for p in REPO.rglob("*.md")
            if not any(part.startswith(".") for part in p.relative_to(REPO).parts)
        ]
    return sorted({REPO / name for name in listed if (REPO / name).is_file()})


def _prose(text: str) -> str:
    """The text without code blocks and code spans, where brackets are code."""
    return _CODE_SPAN.sub("", _FENCE.sub("", text))


def links(text: str) -> list[str]:
    """The link targets of a Markdown text (inline and reference style)."""
    prose = _prose(text)
    return _INLINE_LINK.findall(prose) + _REFERENCE_LINK.findall(prose)


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to -."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link's text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a Markdown text (repeats numbered: x, x-1, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in _HEADING.findall(_FENCE.sub("", text)):
        base = anchor(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def broken_links(path: Path) -> list[str]:
    """What is wrong with each relative link of one file."""
    text = path.read_text(encoding="utf-8")
    problems = []
    for target in links(text):
        if _EXTERNAL.match(target):
            continue  # http(s):, mailto: and the like are not checked here
        file_part, _, fragment = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        if not resolved.exists():
            problems.append(f"{target}: no such file or directory")
            continue
        if (
            fragment
            and resolved.suffix == ".md"
            and resolved.is_file()
            and fragment not in anchors(resolved.read_text(encoding="utf-8"))
        ):
            problems.append(f"{target}: no heading with anchor #{fragment}")
    return problems


def test_the_checks_catch_what_they_must() -> None:
    text = (
        "# Local cluster\n## Docker and GPUs\n## `--python_env`, shipped\n"
        "[a](x.md) [b](#local-cluster) `[c](code.md)` ![i](img.png)\n"
        "```\n[d](fenced.md)\n```\n[e]: ref.md\n[f](https://example.com)\n"
    )
    assert links(text) == [
        "x.md",
        "#local-cluster",
        "img.png",
        "https://example.com",
        "ref.md",
    ]
    assert anchors(text) == {
        "local-cluster",
        "docker-and-gpus",
        "--python_env-shipped",
    }


@pytest.mark.parametrize(
    "path", _markdown_files(), ids=lambda p: str(p.relative_to(REPO))
)
def test_relative_links_resolve(path: Path) -> None:
    problems = broken_links(path)
    assert not problems, f"{path.relative_to(REPO)} has broken links:\n" + "\n".join(
        problems
    )


def test_readme_is_short() -> None:
    size = len((REPO / "README.md").read_bytes())
    assert size <= README_LIMIT, (
        f"README.md is {size} bytes, more than {README_LIMIT}: move reference "
        "material beside the code it describes (a package's README.md) and link it"
    )
