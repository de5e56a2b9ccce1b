"""YARN applications by id and state: what tfyarn's jobs are called and in.

Every tfyarn application carries the YARN tag :data:`TAG`; its id has the
form ``application_<cluster start>_<sequence>``; its YARN state is
:data:`ACTIVE` or :data:`DONE`.
"""

from __future__ import annotations

import re

from tfyarn.errors import SpecError, TfyarnError

TAG = "tfyarn"  # every tfyarn application carries this YARN tag
_APP_ID = re.compile(r"^application_\d+_\d+$")
# YARN's application states.
ACTIVE = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING")
DONE = ("FINISHED", "FAILED", "KILLED")


class UnknownApplicationError(TfyarnError, LookupError):
    """The cluster knows no application of that id."""


def no_application(app_id: str, detail: str = "") -> UnknownApplicationError:
    """The one message for an application id the cluster does not know.

    ``tfyarn status``, ``kill`` and ``logs`` all raise it, whichever of YARN's
    interfaces noticed.
    """
    why = f" ({detail})" if detail else ""
    return UnknownApplicationError(
        f"no application {app_id} on this cluster{why}; "
        "`tfyarn list --all` shows the known ones"
    )


def check_app_id(app_id: str) -> str:
    """``app_id`` stripped, or a :class:`SpecError` naming the expected form."""
    app_id = app_id.strip()
    if not _APP_ID.match(app_id):
        raise SpecError(
            f"expected an application id like application_1700000000000_0001, "
            f"got {app_id!r}"
        )
    return app_id


def app_order(app_id: str) -> tuple[int, int]:
    """Sort key: cluster start time, then sequence number."""
    _, ts, seq = app_id.split("_")
    return int(ts), int(seq)
