"""The runtime's own fixed waits, named in one place so tests can shrink them.

The job's timeouts (``registration_timeout``, ``heartbeat_timeout``,
``stop_grace``...) come from the :class:`~tfyarn.spec.JobSpec`; these are the
bounds the runtime adds around them. A test passes ``Runtime(...,
timeouts=Timeouts(port_wait=0.5))`` instead of waiting 15 s.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Timeouts:
    """Seconds the task runtime waits on its own account."""

    #: How long a replaced task waits for its predecessor's port to be free
    #: (a TF server that outlived its task for a moment), and how often it looks.
    port_wait: float = 15.0
    port_poll: float = 0.5
    #: Beyond ``registration_timeout``: the master fails the job by then, so
    #: this only bounds a task whose master never says so.
    formation_slack: float = 30.0
    #: Reporting the script's exit to the master: the whole try, and one call.
    report_end: float = 15.0
    report_end_attempt: float = 5.0
    #: After reporting a failed script: how long to wait for the master's
    #: answer (a restart in place), which it sends before replying to the report.
    in_place_wait: float = 3.0
    #: Without a master for max(this, 3 x heartbeat_timeout) the job is over
    #: (YARN ends the containers of a dead master; this is the bound if not).
    master_lost_min: float = 60.0
    #: How long the stderr tee may take to drain once the script ended.
    tee_drain: float = 5.0
    #: How long a pre-started interpreter may tear down once its script
    #: returned and its atexit handlers ran (tfyarn/runtime/teardown.py); a
    #: teardown takes under a second when nothing hangs.
    teardown: float = 10.0


DEFAULT = Timeouts()
