"""Gang allocation: a forming cluster does not hold part of its containers for long.

YARN grants containers one at a time. Two jobs that each need more than half
of a queue can each get part of what they need and then wait for each other
forever (TonY's and tf-yarn's known deadlock); the registration timeout only
ends such a job late. So while the TensorFlow cluster forms (the first time,
and after a cluster restart; never for a single task's replacement), a job
that still lacks containers ``allocation_timeout`` after asking gives back
every container it holds, cancels its outstanding requests (skein's
``kill_container`` on a REQUESTED container removes the request from YARN)
and asks again after a pause that grows with each round and is jittered, so
two such jobs fall out of step and one gets everything. Rounds stay within
``registration_timeout``, counted from the formation's first request.

:func:`decide` and :func:`pause` are pure (tested as a table); :class:`Gang`
turns them into a :class:`Step` once per reconcile pass, which the job carries
out (``JobState.check_gang``); it reads the job through :class:`Forming`, a
read-only protocol, and names the tasks to give back by key. The kills happen
in the reconcile loop's relaunch path, like any retired attempt's.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from am.decisions import TaskKey
from am.view import JobBasics, TaskView, key_of
from tfyarn.contract.status import Phase, TaskState


class Forming(JobBasics, Protocol):
    """What gang allocation reads of the job (JobState has it)."""

    @property
    def formed(self) -> bool: ...
    @property
    def cluster_restarts(self) -> int: ...
    @property
    def cluster_members(self) -> Sequence[TaskView]: ...


log = logging.getLogger(__name__)

# The longest pause between rounds, and the shortest (a pause of ~0 would
# send both jobs' requests into the same allocation again).
MAX_PAUSE = 300.0
MIN_PAUSE = 1.0
_FORMING = (Phase.REGISTERING, Phase.RESTARTING, Phase.WAITING_FOR_RESOURCES)


class Decision(str, Enum):
    WAIT = "wait"  # keep waiting for YARN
    GIVE_BACK = "give_back"  # release everything, ask again after a pause
    HOLD = "hold"  # too late for another round: keep what is held until the end


def pause_ceiling(rounds: int, allocation_timeout: float) -> float:
    """The longest pause after ``rounds`` earlier give-backs (doubles each round)."""
    return max(MIN_PAUSE, min(MAX_PAUSE, allocation_timeout * 2.0**rounds))


def pause(rounds: int, allocation_timeout: float, rng: random.Random) -> float:
    """Seconds to wait before asking again: full jitter under the ceiling."""
    return max(MIN_PAUSE, rng.uniform(0, pause_ceiling(rounds, allocation_timeout)))


def decide(
    *,
    waited: float,
    allocation_timeout: float,
    waiting: int,
    holding: int,
    time_left: float,
    rounds: int,
) -> Decision:
    """What a forming cluster does about containers YARN has not granted.

    ``waited``: seconds since this round's requests went out; ``waiting`` /
    ``holding``: members without / with a container; ``time_left``: seconds
    until the registration timeout; ``rounds``: give-backs so far.
    """
    if allocation_timeout <= 0 or waiting == 0 or waited < allocation_timeout:
        return Decision.WAIT
    if holding == 0:
        return Decision.WAIT  # holds nothing another job could use
    # Another round (the longest pause, then a full allocation_timeout) must
    # end before the registration timeout, or giving back only loses ground.
    if pause_ceiling(rounds, allocation_timeout) + allocation_timeout > time_left:
        return Decision.HOLD
    return Decision.GIVE_BACK


@dataclass(frozen=True)
class Step:
    """What one gang check asks of the job: move to ``phase``, and give back.

    ``give_back``: the members (by key) whose attempts end now (containers
    killed, requests cancelled), their next ones asked for at ``relaunch_at``;
    ``reason`` says why, in each task's history.
    """

    phase: Phase
    give_back: tuple[TaskKey, ...] = ()
    reason: str = ""
    relaunch_at: float = 0.0


class Gang:
    """One job's gang allocation: the rounds of its current formation."""

    def __init__(self, *, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()
        self.rounds = 0  # give-backs in the current formation (the backoff)
        self.gave_back = 0  # give-backs over the job's life (for diagnostics)
        self.round_started: float | None = None
        self._resume_phase = Phase.REGISTERING
        self._held = False  # HOLD logged for this formation
        self._formation = 0  # state.cluster_restarts when this formation began

    def check(self, state: Forming, now: float) -> Step | None:
        """One reconcile pass: start a round, or give everything back.

        Returns what the job does (None: nothing); the gang's own rounds are
        counted here.
        """
        if state.cluster_restarts != self._formation:
            # A cluster restart is a new formation with its own deadline.
            self._formation = state.cluster_restarts
            self.rounds, self._held = 0, False
        if not _forming(state):
            self.round_started = None
            if state.formed:
                self.rounds, self._held = 0, False
            return None
        members = state.cluster_members
        if any(t.state is TaskState.RELAUNCHING for t in members):
            # A restart's old containers are still stopping, or our own pause
            # runs: this round's requests are not all out yet.
            self.round_started = None
            return None
        if self.round_started is None:
            self.round_started = now
            if state.phase is Phase.WAITING_FOR_RESOURCES:
                return Step(phase=self._resume_phase)  # forming again
            return None
        waiting = [t for t in members if t.state is TaskState.REQUESTED]
        holding = [t for t in members if t.state.has_container() and _alive(t)]
        timeout = state.spec.allocation_timeout
        since = min(t.requested_at for t in members)
        waited = now - self.round_started
        decision = decide(
            waited=waited,
            allocation_timeout=timeout,
            waiting=len(waiting),
            holding=len(holding),
            time_left=since + state.spec.registration_timeout - now,
            rounds=self.rounds,
        )
        if decision is Decision.HOLD and not self._held:
            self._held = True
            log.warning(
                "gang allocation: %d container(s) still not granted; no time for "
                "another round before the registration timeout: holding %d",
                len(waiting),
                len(holding),
            )
        if decision is not Decision.GIVE_BACK:
            return None
        wait = pause(self.rounds, timeout, self.rng)
        self.rounds += 1
        self.gave_back += 1
        why = (
            f"gang allocation: YARN granted {len(holding)} of {len(members)} "
            f"containers in {waited:.0f} s (allocation_timeout {timeout:.0f} s); "
            f"gave back the {len(holding)} held, cancelled {len(waiting)} "
            f"request(s), asking again in {wait:.0f} s (round {self.rounds + 1})"
        )
        log.warning("%s", why)
        if state.phase is not Phase.WAITING_FOR_RESOURCES:
            self._resume_phase = state.phase
        self.round_started = None
        return Step(
            phase=Phase.WAITING_FOR_RESOURCES,
            give_back=tuple(key_of(t) for t in members),
            reason=why,
            relaunch_at=now + wait,
        )


def _forming(state: Forming) -> bool:
    return not state.formed and state.phase in _FORMING and not state.settled


def _alive(task: TaskView) -> bool:
    return not task.state.is_terminal()
