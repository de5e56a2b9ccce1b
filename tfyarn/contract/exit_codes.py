"""What an exit code or a NodeManager diagnostic means, in words a user can act on.

A container's end reaches the user as a number ("Application driver failed
with exit code 127, see logs") or as one of YARN's canned sentences. The
client explains them under a failed job's diagnostics; the master may explain
its tasks' ends with the same functions. Everything here is pure (no I/O, no
imports beyond the standard library), so both sides can call it anywhere.

Three families of numbers never overlap:

- ``0..255``: a process's own exit status, ``128 + N`` when a shell reports
  death by signal ``N`` (137 = SIGKILL, 143 = SIGTERM);
- ``-1..-64``: death by signal ``N`` as Python's ``subprocess`` reports it (the
  runtime's ``ReportTaskEnd`` uses this form);
- ``<= -100``: YARN's ``ContainerExitStatus``: the NodeManager or the
  scheduler ended the container (lost node, preemption, memory limits).
"""

from __future__ import annotations

import re
import signal

# YARN's ContainerExitStatus (hadoop-yarn-api), the ones a user meets.
_YARN: dict[int, str] = {
    -100: "the container was released: its node was lost or went unhealthy, "
    "or YARN aborted it",
    -101: "the node's local disks failed (YARN's disk health checker)",
    -102: "the scheduler preempted the container to give its resources to "
    "another queue; submit to a queue with guaranteed capacity or retry",
    -103: "the container used more virtual memory than YARN allows; ask for "
    "more memory (--<role>_memory) or raise yarn.nodemanager.vmem-pmem-ratio",
    -104: "the container used more physical memory than it asked for; ask for "
    "more memory (--<role>_memory, --am_memory for the master)",
    -105: "the application master killed the container",
    -106: "the ResourceManager killed the container",
    -107: "the container was killed because its application had ended",
    -108: "the container scheduler killed it (opportunistic container displaced)",
    -109: "the container wrote more logs than YARN allows",
    -1000: "YARN reported no valid exit status",
}

_SHELL: dict[int, str] = {
    126: "the command was found but is not executable (permission denied, or "
    "not a program for this machine)",
    127: "the command was not found on the node: a wrong interpreter path "
    "(--python), a program missing from the node's PATH, or a shipped "
    "environment (--python_env) whose base interpreter the node lacks (its "
    "log names it)",
}

_SIGNALS: dict[int, str] = {
    signal.SIGKILL: "killed (SIGKILL): by YARN for exceeding its memory, by "
    "the kernel's out-of-memory killer, or by a kill without grace",
    signal.SIGTERM: "terminated (SIGTERM): stopped by tfyarn, YARN or an administrator",
    signal.SIGINT: "interrupted (SIGINT)",
    signal.SIGSEGV: "crashed with a segmentation fault (SIGSEGV), usually in "
    "native code (TensorFlow, a C extension)",
    signal.SIGABRT: "aborted (SIGABRT), usually a failed check in native code",
    signal.SIGBUS: "crashed with a bus error (SIGBUS), often a full /dev/shm "
    "or a truncated memory-mapped file",
}

# YARN's sentences in diagnostics (NodeManager, ResourceManager), in the order
# they are checked; each yields its explanation once.
_PHRASES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"running beyond physical memory limits", re.IGNORECASE), _YARN[-104]),
    (re.compile(r"running beyond virtual memory limits", re.IGNORECASE), _YARN[-103]),
    (re.compile(r"preempted", re.IGNORECASE), _YARN[-102]),
    (re.compile(r"released on a \*?lost\*? node", re.IGNORECASE), _YARN[-100]),
    (
        re.compile(r"(disks? (failed|are bad)|local-dirs (are|is) bad)", re.IGNORECASE),
        _YARN[-101],
    ),
)
# "exit code 127", "Exit code: 137", "exitCode=-104", "exit status -102".
_EXIT = re.compile(r"\bexit[ _]?(?:code|status)\b\s*[:=]?\s*(-?\d+)", re.IGNORECASE)


def explain_exit(code: int | None) -> str:
    """What an exit code means, or "" when it means nothing in particular.

    0 and ordinary error codes (1, 2, ...: the program's own) get "".

    Examples
    --------
    >>> explain_exit(127)[:37]
    'the command was not found on the node'
    >>> explain_exit(-104).startswith("the container used more physical memory")
    True
    >>> explain_exit(143) == explain_exit(-15)
    True
    >>> explain_exit(1)
    ''
    """
    if code is None:
        return ""
    if code in _YARN:
        return _YARN[code]
    if code in _SHELL:
        return _SHELL[code]
    if 128 < code < 128 + 65:
        return _signal_words(code - 128)
    if -65 < code < 0:
        return _signal_words(-code)
    return ""


def explain_diagnostics(diagnostics: str) -> list[str]:
    """One line per thing in YARN's diagnostics that a number or phrase hides.

    Each exit code mentioned (``exit code 127``) and each of YARN's canned
    sentences (``running beyond physical memory limits``) contributes its
    explanation, prefixed by the code; duplicates are dropped, order kept.

    Examples
    --------
    >>> explain_diagnostics("Application driver failed with exit code 127")[0][:32]
    'exit code 127: the command was n'
    >>> explain_diagnostics("everything fine")
    []
    """
    out: list[str] = []
    said: set[str] = set()
    for match in _EXIT.finditer(diagnostics):
        code = int(match.group(1))
        words = explain_exit(code)
        if words and words not in said:
            said.add(words)
            out.append(f"exit code {code}: {words}")
    for pattern, words in _PHRASES:
        if pattern.search(diagnostics) and words not in said:
            said.add(words)
            out.append(words)
    return out


# How a task says HDFS would not authenticate it: hdfs-native (GSSAPI, after
# the NameNode refused its token), Hadoop's Java client, tfyarn.data.fs.
_HDFS_AUTH = re.compile(
    r"GSS_S_NO_CRED|No Kerberos credentials|cannot authenticate via|"
    r"InvalidToken|token \(.*\) (is expired|can't be found)|"
    r"delegation token (for \S+ )?(expired|was refused)|no delegation token for",
    re.IGNORECASE,
)


def hdfs_auth_failure(text: str) -> bool:
    """Whether ``text`` (a task's stderr) shows HDFS refusing its credentials.

    Examples
    --------
    >>> hdfs_auth_failure('RuntimeError: GSSAPIError(... "GSS_S_NO_CRED" ...)')
    True
    >>> hdfs_auth_failure("ValueError: bad shape")
    False
    """
    return bool(_HDFS_AUTH.search(text))


def exit_codes(diagnostics: str) -> list[int]:
    """Every exit code mentioned in ``diagnostics``, in order."""
    return [int(m.group(1)) for m in _EXIT.finditer(diagnostics)]


def _signal_words(number: int) -> str:
    if number in _SIGNALS:
        return _SIGNALS[number]
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"ended by signal {number}"
    return f"ended by signal {number} ({name})"
