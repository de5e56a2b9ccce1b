"""What a failed task's stderr says went wrong, in one line.

The runtime reports the last lines of a script's stderr with its exit code;
the master puts them in the job's diagnostics and compares them between
attempts (the same error twice is a bug, not bad luck), and the client shows
them. All three need the same reading of a Python traceback, so it lives here.
"""

from __future__ import annotations

import re

# Python 3.11+ marks the failing expression with ~~~ and ^^^ under the code.
_MARKERS = re.compile(r"^\s*[~^]+\s*$")
# "ValueError: x", "tensorflow.python.framework.errors_impl.NotFoundError: x",
# "KeyboardInterrupt": an exception's name (dotted), optionally a message.
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt|Warning)\b")


def error_line(stderr_tail: str) -> str:
    """The line that names the error: the last traceback's exception line.

    Falls back to the last line that is not traceback scaffolding (frames,
    source lines, markers), then to "". Whitespace is trimmed.

    Examples
    --------
    >>> error_line('''Traceback (most recent call last):
    ...   File "train.py", line 3, in <module>
    ...     x = [][1]
    ...         ~~^^^
    ... IndexError: list index out of range''')
    'IndexError: list index out of range'
    >>> error_line("tfyarn: the script train.py is not in the container")
    'tfyarn: the script train.py is not in the container'
    """
    lines = [line.rstrip() for line in stderr_tail.splitlines() if line.strip()]
    for line in reversed(lines):
        if not line.startswith((" ", "\t")) and _EXCEPTION.match(line):
            return line.strip()
    for line in reversed(lines):
        if _MARKERS.match(line) or line.startswith((" ", "\t", "Traceback (")):
            continue
        return line.strip()
    return ""


def error_first(stderr_tail: str, *, lines: int = 15) -> str:
    """The tail for diagnostics: the error line first, then the last ``lines``
    lines without the ``^^^`` markers (which say nothing in a log excerpt),
    indented. The error line is not said twice when it also ends the tail.

    Examples
    --------
    >>> print(error_first("Traceback (most recent call last):\\n"
    ...                   '  File "train.py", line 3, in <module>\\n'
    ...                   "    x = [][1]\\n"
    ...                   "        ~~^^^\\n"
    ...                   "IndexError: list index out of range"))
    IndexError: list index out of range
      Traceback (most recent call last):
        File "train.py", line 3, in <module>
          x = [][1]
    """
    kept = [
        line.rstrip()
        for line in stderr_tail.rstrip().splitlines()
        if line.strip() and not _MARKERS.match(line)
    ]
    head = error_line(stderr_tail)
    if not head:
        return "\n".join(kept[-lines:])
    if kept and kept[-1].strip() == head:
        kept.pop()  # it is the first line already
    return "\n".join([head, *(f"  {line}" for line in kept[-(lines - 1) :])])


def first_line(text: str) -> str:
    """A failure's or restart's reason as one line (status lists, diagnostics)."""
    text = str(text).strip()
    return text.splitlines()[0] if text else ""
