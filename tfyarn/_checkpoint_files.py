"""The files of a TensorFlow checkpoint directory, as both checkpoint routes see them.

A directory holds a ``checkpoint`` state file naming the newest checkpoint and
the ones kept, and per checkpoint a ``<prefix>.index``, its
``<prefix>.data-NNNNN-of-NNNNN`` shards and, from a TF1 ``Saver``, a
``<prefix>.meta`` graph.
"""

from __future__ import annotations

from tfyarn.errors import HdfsError

STATE_FILE = "checkpoint"


def checkpoint_prefix(name: str) -> str | None:
    """``ckpt-12`` for ``ckpt-12.index`` / ``ckpt-12.data-00000-of-00001``."""
    if name.endswith(".index"):
        return name[: -len(".index")]
    if ".data-" in name:
        return name.split(".data-", 1)[0]
    if name.endswith(".meta"):  # TF1 Saver's graph, part of its checkpoint
        return name[: -len(".meta")]
    return None


def require_complete(directory: str, prefix: str, names: list[str]) -> None:
    """Refuse a checkpoint the state file names whose index or data is missing.

    Parameters
    ----------
    directory : str
        The checkpoint directory (for the message).
    prefix : str
        The checkpoint, e.g. ``ckpt-12``.
    names : list of str
        The file names found for it.

    Raises
    ------
    HdfsError
        The ``.index`` or every ``.data-`` file is missing.
    """
    if prefix + ".index" in names and any(".data-" in n for n in names):
        return
    base = directory.rstrip("/")
    raise HdfsError(
        f"checkpoint {base}/{prefix} is listed in {base}/{STATE_FILE} but its "
        f"files are incomplete (found {names}). Delete the state file to start "
        "over, or restore an older checkpoint by hand."
    )
