"""An application's diagnostics as sentences: tfyarn's part first, YARN's after.

YARN keeps one diagnostics string per application and appends to it without
a separator: a job that lived through a ResourceManager restart ends with
``Attempt recovered after RM restarttfyarn: worker:0 finished successfully``.
"""

from __future__ import annotations

# How the master's own words begin (its success, its refusals to start).
OURS = "tfyarn: "
# How YARN's words are introduced once moved after tfyarn's.
YARNS = "YARN: "


def separate(diagnostics: str, ours: str = "") -> str:
    """``diagnostics`` with tfyarn's part first and YARN's on a line of its own.

    ``ours``: the master's diagnostics as it published them (its final status),
    found in YARN's text exactly; without them, the master's part is the text
    from an ``tfyarn: `` glued to YARN's (YARN adds no space or line break).

    Examples
    --------
    >>> separate("Attempt recovered after RM restarttfyarn: worker:0 finished")
    'tfyarn: worker:0 finished\\nYARN: Attempt recovered after RM restart'
    """
    ours = ours.strip()
    if ours and ours in diagnostics and diagnostics.strip() != ours:
        yarns = diagnostics.replace(ours, " ", 1).strip()
        return f"{ours}\n{YARNS}{yarns}"
    start = diagnostics.find(OURS)
    if start > 0 and not diagnostics[start - 1].isspace():
        yarns = diagnostics[:start].strip()
        return f"{diagnostics[start:].rstrip()}\n{YARNS}{yarns}"
    return diagnostics
