"""Why YARN could not bring a container its files, from the NodeManager's words.

Before a container runs, the NodeManager's localizer downloads each of its
files (the master's code, ``--files``, the ``--python_env`` archive) into the
node's cache and unpacks the archives (Hadoop's ``FSDownload`` and
``FileUtil``). When that fails the container never runs: YARN reports exit
status -1000 ("no valid exit status") and a Java stack trace whose first lines
say which file and why. This module reads those lines: the file, and the
reason in words a user can act on. Pure, standard library only: the master
and the client both call it, through
:func:`tfyarn.contract.exit_codes.explain_diagnostics`.

Also read here: YARN's launch script lists the container's directory before
the command runs (``find -L . -maxdepth 5 -ls``, when the NodeManager logs
container debug info, the default since Hadoop 3) and stops the container with
exit code 1 when ``find`` cannot enter a path. A shipped virtualenv whose
``bin/python`` links to a base interpreter the container's user cannot reach
ends there, before tfyarn's own check of the interpreter could run.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Where YARN unpacks --python_env (tfyarn._launch.ENV_DIR; env-1, env-2 for
# code layers, env.pex for a pex): a path the environment's check speaks of.
ENV_DIR = "env"

_WHY_CHANGED = (
    "it changed after the job was submitted (YARN localizes a file only with "
    "the modification time it had at submission): it was overwritten or "
    "uploaded again while the job started. Submit again, and leave a job's "
    "files alone until its containers run"
)
_WHY_GONE = (
    "it does not exist (any more): deleted or moved after the job was "
    "submitted, or a wrong path. Upload it again or fix the path"
)
_WHY_NOT_READABLE = (
    "the job's user may not read it (Permission denied): YARN localizes a "
    "container's files as that user. Give it read access to the file and "
    "execute access to every directory above it, or put the file where it can"
)
_WHY_NOT_AN_ARCHIVE = (
    "it is not a valid archive of its kind (.tar.gz, .tgz, .tar, .zip): a "
    "truncated or interrupted upload, or a name that does not match its "
    "format. Check that it unpacks (tar -tzf FILE, unzip -l FILE) and upload "
    "it again; a --python_env archive is made by venv-pack or conda-pack"
)
_WHY_NOT_PUBLIC = (
    "it was asked for with PUBLIC visibility, which needs it and every "
    "directory above it readable by everyone"
)

# "Resource hdfs://nn/x.tar.gz changed on src filesystem - expected: ..."
# (Hadoop 3) or "(expected 1700000000000, was 1700000000001" (Hadoop 2).
_CHANGED = re.compile(r"Resource (\S+) changed on src filesystem")
_NOT_PUBLIC = re.compile(r"Resource (\S+) is not publicly accessible")
# HDFS refusing the job's user: AccessControlException from the NameNode.
_HDFS_DENIED = re.compile(
    r"Permission denied: user=(?P<user>[^,\s]+), access=(?P<access>\w+), "
    r"inode=\"(?P<path>[^\"]+)\""
)
# A local file (file:// resources): java.io.FileNotFoundException's words.
_LOCAL_DENIED = re.compile(r"FileNotFoundException: (\S+) \(Permission denied\)")
_GONE = re.compile(
    r"FileNotFoundException: (?:File does not exist: (\S+)|File (\S+) does not exist)"
)
# Unpacking: the untar command on the downloaded stream (Hadoop 3.3+), or on
# the downloaded file (earlier); the path ends with the file's own name.
_UNTAR_STREAM = re.compile(
    r"Error executing command\. (?:gzip -dc \| \()?cd '(?P<path>[^']+)' && tar -x"
)
_UNTAR_FILE = re.compile(r"Error untarring file (?P<path>\S+?)\.? Tar process exited")
_BAD_ZIP = re.compile(
    r"(?:java\.util\.zip\.ZipException|ZipException): (?P<why>[^\n]+)|"
    r"not a valid (?:zip|tar|gzip )?(?:file|archive)|Not in GZIP format",
    re.IGNORECASE,
)
# Signs that the localizer failed, when none of the above says why.
_LOCALIZER = re.compile(
    r"Download and unpack failed|org\.apache\.hadoop\.yarn\.util\.FSDownload|"
    r"ContainerLocalizer|ResourceLocalizationService"
)
# GNU find's complaint in YARN's launch script (its quotes depend on the locale).
# (\u2018 and \u2019: the curly quotes of a UTF-8 locale).
_FIND_DENIED = re.compile(
    r"find: [\u2018'`](?P<path>\./[^\u2019'`]+)[\u2019'`]: Permission denied"
)


def explain_localization(diagnostics: str, *, node: str = "") -> list[str]:
    """One line per file YARN could not localize: which file, where, and why.

    ``node``: the container's node when the caller knows it (the message says
    "on node NODE"). Empty when the diagnostics show no localization failure.

    Examples
    --------
    >>> explain_localization(
    ...     "java.io.IOException: Resource hdfs://nn/user/a/x.tar.gz changed on "
    ...     "src filesystem - expected: ...", node="n1")[0][:63]
    'YARN could not localize hdfs://nn/user/a/x.tar.gz on node n1: i'
    >>> explain_localization("ValueError: x")
    []
    """
    where = f" on node {node}" if node else ""
    out: list[str] = []

    def say(file: str, why: str) -> None:
        line = f"YARN could not localize {file}{where}: {why}"
        if line not in out:
            out.append(line)

    readers: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], None]], ...] = (
        (_CHANGED, lambda m: say(m.group(1), _WHY_CHANGED)),
        (_NOT_PUBLIC, lambda m: say(m.group(1), _WHY_NOT_PUBLIC)),
        (
            _HDFS_DENIED,
            lambda m: say(
                f"hdfs:{m['path']}",
                f"the job's user {m['user']} may not {m['access']} it on HDFS "
                f"(Permission denied): YARN localizes a container's files as "
                "that user. Give it read access to the file and execute access "
                "to every directory above it (hdfs dfs -chmod), or upload the "
                "file where it can read it",
            ),
        ),
        (_LOCAL_DENIED, lambda m: say(m.group(1), _WHY_NOT_READABLE)),
        (_GONE, lambda m: say(m.group(1) or m.group(2), _WHY_GONE)),
        (_UNTAR_STREAM, lambda m: say(_name(m["path"]), _WHY_NOT_AN_ARCHIVE)),
        (_UNTAR_FILE, lambda m: say(_name(m["path"]), _WHY_NOT_AN_ARCHIVE)),
    )
    for pattern, read in readers:
        for match in pattern.finditer(diagnostics):
            read(match)
    if not out and _BAD_ZIP.search(diagnostics) and _LOCALIZER.search(diagnostics):
        say("an archive", _WHY_NOT_AN_ARCHIVE)
    for match in _FIND_DENIED.finditer(diagnostics):
        line = _unreachable(match["path"], where)
        if line not in out:
            out.append(line)
    if not out and _LOCALIZER.search(diagnostics):
        out.append(
            f"YARN could not localize one of the container's files{where}; the "
            "Java exception above names it (the first line after the date)"
        )
    return out


def _name(local_path: str) -> str:
    """The file's own name: the localizer unpacks into ``.../<n>_tmp/<name>``."""
    return local_path.rstrip("/").rsplit("/", 1)[-1]


def _unreachable(path: str, where: str) -> str:
    """What a path ``find`` could not enter means; the shipped Python's
    case in the words of tfyarn's own check (tfyarn._launch.launch_script)."""
    top = path[2:].split("/", 1)[0]
    if top == ENV_DIR or top.startswith(f"{ENV_DIR}-") or top == f"{ENV_DIR}.pex":
        return (
            f"the container{where} cannot run the shipped Python (--python_env): "
            f"{path} leads to a directory the container's user cannot enter "
            "(Permission denied); a virtualenv's bin/python links to its base "
            "interpreter, which every node needs at the same path, readable and "
            "executable by the job's user. YARN's listing of the container's "
            "files stopped on it before tfyarn could start. Fix the "
            "permissions of that interpreter's directories on the nodes, or "
            "ship a conda environment (it brings its own Python)"
        )
    return (
        f"YARN's listing of the container's files{where} could not enter {path} "
        "(Permission denied), which stopped the container before its command "
        "ran: a shipped file or link the container's user cannot read"
    )
