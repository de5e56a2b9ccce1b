"""The master's one reconcile loop: every effect on YARN happens here.

Like dask's ``SpecCluster._correct_state``, each pass compares what should be
with what is: it polls YARN's view of the containers, asks the deciders
(:mod:`am.checks`) what it and what did not happen in time (a container
gone, a silent task, a missed registration, a stall) mean, kills what was
told to stop and did not, launches replacements once their predecessor's
container has ended, publishes the status, and at the end shuts the
application down. It changes the job only through ``apply`` (the state's
one applier), with decisions (:mod:`am.decisions`): what the deciders
returned, and what its own calls to YARN did. It sees the job through
:class:`Job`, a narrow protocol, not the state's class.

Tests drive it a pass at a time: :meth:`Reconciler.start`, then
:meth:`Reconciler.reconcile_once` as often as they like.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from am import checks
from am.checks import Account, Held
from am.decisions import (
    AskAccount,
    ContainersPolled,
    Decision,
    Ended,
    Finish,
    Launched,
    Mark,
    Note,
    NotRelaunched,
    Relaunching,
    RestartsSaving,
    RetireKilled,
    TaskKey,
)
from am.launcher import Launcher
from am.model import KILL_MARGIN, Task, stop_event
from am.policy import Failure
from am.view import JobView, key_of
from tfyarn.contract import env as _env
from tfyarn.contract.status import Phase, TaskState
from tfyarn.spec import ROLES

if TYPE_CHECKING:
    from am.elastic import Elastic
    from am.gpus import GpuLedger
    from am.notice import Notices
    from am.publish import Publisher
    from am.resize import Resizer

log = logging.getLogger(__name__)

MIN_PASS_GAP = 0.05
# A container kill that YARN refuses (busy, or the container already gone) is
# tried again on the next passes, this many times in all; then the master goes
# on without it (ending the application ends every container with it).
KILL_ATTEMPTS = 5
# YARN preempts a container with a SIGTERM (and SIGKILL 250 ms later), which
# the runtime passes on to the script: a script ended so is judged only once
# YARN says whether it took the container back, or after this long. Shorter
# than the runtime's wait for a restart in place (3 s) after it reports.
SIGTERM_HOLD = 2.5
# ... and how long when the runtime was sent SIGTERM too: its container is
# being ended from outside and cannot restart in place, and YARN's word on it
# (the NodeManager's heartbeat, the ResourceManager's, skein's allocate
# heartbeat, the master's poll) took longer than SIGTERM_HOLD on a loaded
# two-core host.
CONTAINER_END_HOLD = 30.0
# A script's exit code for SIGTERM: as Popen gives it, and as a shell does.
SIGTERM_EXITS = frozenset({-signal.SIGTERM, 128 + signal.SIGTERM})


class Job(JobView, Protocol):
    """What the loop reads of the job and may call; changes go through ``apply``."""

    @property
    def tasks(self) -> Mapping[TaskKey, Task]: ...
    @property
    def lead(self) -> Task: ...
    @property
    def launcher(self) -> Launcher: ...
    @property
    def publisher(self) -> Publisher: ...
    @property
    def gpus(self) -> GpuLedger: ...
    @property
    def elastic(self) -> Elastic: ...
    @property
    def notices(self) -> Notices: ...
    @property
    def resizer(self) -> Resizer: ...
    @property
    def relaunch(self) -> Collection[Task]: ...
    @property
    def outcome(self) -> tuple[Phase, str] | None: ...
    @property
    def restarts_unsaved(self) -> bool: ...
    @property
    def wakeup(self) -> asyncio.Event: ...
    @property
    def tick(self) -> float: ...
    @property
    def clock(self) -> Callable[[], float]: ...
    @property
    def master_address(self) -> str: ...
    @property
    def cluster_restarts(self) -> int: ...
    @property
    def last_status(self) -> str: ...

    def apply(self, decisions: Iterable[Decision]) -> None: ...
    def check_gang(self, now: float) -> None: ...
    def poke(self) -> None: ...
    def restart_record(self) -> dict[str, Any]: ...


class Reconciler:
    """Runs one job's reconcile loop; owns every call that changes YARN."""

    def __init__(self, state: Job) -> None:
        self.state = state
        self._polled_at = float("-inf")
        self._summary = ""  # the last summary line a big job logged
        # The restart record being saved (one at a time, so the newest lands last).
        self._saving: asyncio.Task[None] | None = None
        self._kill_failures: dict[str, int] = {}  # container id: failed attempts
        # The NodeManager's words on containers that ended unreported (skein
        # drops YARN's diagnostics), asked for when the end is first seen.
        self._accounts: dict[str, asyncio.Task[str]] = {}
        # Set when the client that stopped the job never came back to kill it.
        self._shutdown_killed = False
        # Scripts ended by a SIGTERM nobody here sent, waiting for YARN's word
        # on their container.
        self._held: dict[Task, Held] = {}

    def _carry_out(self, decisions: list[Decision]) -> None:
        """Hand decisions to the job's applier; the ones about YARN stay here."""
        if not decisions:
            return
        rest: list[Decision] = []
        for d in decisions:
            if isinstance(d, AskAccount):
                info = d.container
                self._accounts[info.id] = asyncio.create_task(
                    self.state.launcher.container_account(info)
                )
                continue
            if isinstance(d, Finish) and d.end_app:
                self._shutdown_killed = True
            rest.append(d)
        self.state.apply(rest)

    async def start(self) -> None:
        """Publish the first status and ask YARN for every task's container."""
        state = self.state
        await state.publisher.publish(force=True)
        try:
            await self._launch_all()
        except Exception as exc:  # YARN refused a request: nothing will run
            log.exception("launching containers failed")
            if state.outcome is None:
                why = f"tfyarn master could not request containers: {exc}"
                state.apply([Finish(Phase.FAILED, why)])

    async def until_decided(self) -> tuple[Phase, str]:
        """Reconcile pass after pass until the outcome is decided; return it.

        The job then enters the outcome's phase and :meth:`finish` ends the app.
        """
        state = self.state
        while True:
            try:
                await self.reconcile_once()
            except Exception:  # one bad pass must not kill the master
                log.exception("reconcile pass failed; retrying")
            if state.outcome is not None:
                break
            state.wakeup.clear()
            try:
                await asyncio.wait_for(state.wakeup.wait(), state.tick)
            except asyncio.TimeoutError:
                pass
            # Events wake the loop early, but a burst of them (thousands of
            # registrations) costs one pass per MIN_PASS_GAP, not one each.
            await asyncio.sleep(MIN_PASS_GAP)
        return state.outcome

    async def reconcile_once(self) -> None:
        """One pass, as the loop runs it (tests call it to step the master)."""
        state = self.state
        now = state.clock()
        # Scans over every task run once per tick; events in between (a burst
        # of registrations) only pay for the cheap checks below.
        if now - self._polled_at >= state.tick:
            self._polled_at = now
            try:
                state.apply([ContainersPolled(await state.launcher.poll())])
            except Exception:  # the timeouts below must still fire
                log.warning(
                    "polling containers failed; using the last view", exc_info=True
                )
            if self._accounts:
                await asyncio.sleep(0)  # let NodeManager accounts asked for finish
            for task in list(state.tasks.values()):  # a failure may drop one
                self._watch_container(task, now)
            await state.gpus.reconcile()  # GPUs of registered tasks (am/gpus.py)
            self._judge_held(now)
            if not state.log_each:
                self._log_summary()
            state.elastic.check(now)  # before gang allocation gives back all
            state.check_gang(now)
            self._carry_out(checks.registration(state, now))
            limit = checks.silence_limit(state)
            for task in list(state.tasks.values()):  # a failure may drop one
                self._carry_out(checks.silent(state, task, now, limit))
            self._carry_out(checks.stall(state, now))
            self._carry_out(checks.lease_expiry(state, now))
            state.notices.check(now)
            await self._enforce_stops(now)
            await state.resizer.check(now)
            await self._relaunch_ready(now)
        else:
            # Between scans, what an event may have settled (every script saved
            # for a notice, a standby worker registered): a resize waits a
            # tick on neither.
            state.notices.check(now)
            state.elastic.check(now)
            await self._relaunch_ready(now)
        if state.finishing_since is not None:
            self._carry_out(checks.finishing(state, now))
        if state.stopping_since is not None:
            self._carry_out(checks.stopping(state, now))
        if state.restarts_unsaved and (self._saving is None or self._saving.done()):
            state.apply([RestartsSaving()])
            self._saving = asyncio.create_task(self._save_restarts())
        await state.publisher.publish()

    # -- launching ------------------------------------------------------------------

    async def _launch_all(self) -> None:
        """The job's initial containers: declared in the application spec, so
        skein asked YARN for them with its first heartbeat; nothing to call.
        Replacements and restarts go through :meth:`_launch`."""
        state = self.state
        now = state.clock()
        for role in ROLES:
            tasks = [t for t in state.tasks.values() if t.role is role]
            for task in tasks:
                info = await state.launcher.declared(role.value, task.index)
                note = f"container {info.id} requested"
                launched = Launched(
                    key_of(task), info.id, note, quiet=True, requested_at=now
                )
                state.apply([launched])
            if tasks:
                # One log line per role, not one per task: a big job has thousands.
                log.info(
                    "%d %s container(s) requested with the application: %s .. %s",
                    len(tasks),
                    role.value,
                    tasks[0].container_id,
                    tasks[-1].container_id,
                )

    async def _launch(self, task: Task) -> None:
        state = self.state
        env = _env.task_env(
            index=task.index,
            attempt=task.attempt,
            master_address=state.master_address,
            restart=state.cluster_restarts,
            port=task.port or 0,  # a replaced task keeps its address
        )
        info = await state.launcher.start(task.role.value, env)
        state.apply([Launched(key_of(task), info.id, f"requested container {info.id}")])

    async def _relaunch_ready(self, now: float) -> None:
        """Launch new attempts whose predecessor's container has ended."""
        state = self.state
        for task in sorted(state.relaunch, key=lambda t: (t.role.value, t.index)):
            if state.outcome is not None:
                return
            key = key_of(task)
            if state.finishing_since is not None:
                # The lead finished meanwhile: nothing to bring back.
                if task.retiring and not await self._kill(task.retiring):
                    continue  # tried again on the next pass
                why = "not relaunched: the job finished"
                state.apply([NotRelaunched(key, why)])
                continue
            old = task.retiring
            if old is not None:
                info = state.containers.get(old)
                if info is None or not info.ended:
                    if now < task.retire_by:
                        continue
                    if not task.retire_killed:
                        if old not in self._kill_failures:
                            state.apply([Note(key, f"killing the old container {old}")])
                        if not await self._kill(old):
                            continue  # tried again on the next pass
                        state.apply([RetireKilled(key, now + KILL_MARGIN)])
                        continue
                    # Killed and still not confirmed ended: go on (bounded).
            if now < task.relaunch_at:
                continue  # a gang give-back's pause (am/gang.py)
            state.apply([Relaunching(key, state.clock())])
            await self._launch(task)

    # -- killing --------------------------------------------------------------------

    async def _kill(self, container_id: str) -> bool:
        """Kill a container; False if YARN refused and the next pass should retry.

        Every kill goes through here, so a refused one never aborts a pass: it
        is logged once, tried again on the next passes and, after
        KILL_ATTEMPTS, given up (True: the caller goes on, as it would after
        a kill YARN never confirms).
        """
        failed = self._kill_failures.get(container_id, 0)
        if failed >= KILL_ATTEMPTS:
            return True
        try:
            await self.state.launcher.kill(container_id)
        except Exception as exc:
            failed = self._kill_failures[container_id] = failed + 1
            if failed == 1:
                log.warning(
                    "killing container %s failed (%s); trying again on the next "
                    "passes, %d times at most",
                    container_id,
                    exc,
                    KILL_ATTEMPTS - 1,
                    exc_info=True,
                )
            if failed < KILL_ATTEMPTS:
                return False
            log.warning(
                "gave up killing container %s after %d attempts (%s); it ends "
                "with the application at the latest",
                container_id,
                failed,
                exc,
            )
        return True

    def _kill_given_up(self, container_id: str) -> bool:
        return self._kill_failures.get(container_id, 0) >= KILL_ATTEMPTS

    async def _enforce_stops(self, now: float) -> None:
        state = self.state
        for task in list(state.tasks.values()):  # a failure may drop one
            if task.stop_requested_at is None or task.state.is_terminal():
                continue
            if task in state.relaunch:
                # No container of its own: its old one is killed, and the
                # task ended, where relaunches are dropped (_relaunch_ready).
                continue
            # A task no stream told to stop cannot hear it: kill its container
            # now. One that heard it gets its grace to end the script and report.
            heard = task.stop_delivered and task.state.is_registered()
            if heard and now - task.stop_requested_at < task.stop_grace + KILL_MARGIN:
                continue
            cid = task.container_id
            if cid and not await self._kill(cid):
                continue  # tried again on the next pass
            if cid and self._kill_given_up(cid):
                why = (
                    f"the master could not kill container {cid} "
                    f"({KILL_ATTEMPTS} attempts); it ends with the application"
                )
            else:
                why = "container killed by the master"
            state.apply([Mark(key_of(task), TaskState.KILLED, why)])

    # -- what YARN shows, and what did not happen in time ---------------------------

    def _log_summary(self) -> None:
        state = self.state
        counts: dict[str, int] = {}
        for task in state.tasks.values():
            counts[task.state.value] = counts.get(task.state.value, 0) + 1
        line = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        if line != self._summary:
            self._summary = line
            log.info("%d tasks: %s", len(state.tasks), line)

    def _watch_container(self, task: Task, now: float) -> None:
        cid = task.container_id or ""
        asked = self._accounts.get(cid)
        account = None
        if asked is not None:
            done = asked.done()
            words = asked.result() if done and not asked.exception() else ""
            account = Account(done, words)
        self._carry_out(checks.container_seen(self.state, task))
        decisions = checks.watch_container(self.state, task, now, account)
        if any(isinstance(d, Mark) and d.status is TaskState.LOST for d in decisions):
            self._accounts.pop(cid, None)  # its verdict is in: the account is spent
        self._carry_out(decisions)

    def hold(
        self,
        task: Task,
        code: int,
        reason: str,
        kind: Failure,
        *,
        container_ending: bool = False,
    ) -> bool:
        """Hold a script failure that a SIGTERM caused until YARN says why.

        ``JobState.task_end`` asks first; False: not held, decide now. A held
        one is judged by :func:`am.checks.judge_held`: a disruption if YARN
        took the container back (preempted), else ``reason`` and ``kind`` as
        reported.
        """
        state = self.state
        if state.settled or (code not in SIGTERM_EXITS and not container_ending):
            return False
        bound = CONTAINER_END_HOLD if container_ending else SIGTERM_HOLD
        self._held[task] = Held(task.attempt, reason, kind, state.clock() + bound)
        why = "ended by SIGTERM: waiting for YARN's word on its container"
        state.apply([Note(key_of(task), why)])
        state.poke()
        return True

    def _judge_held(self, now: float) -> None:
        for task, held in list(self._held.items()):
            decisions = checks.judge_held(self.state, task, held, now)
            if decisions is None:
                continue
            del self._held[task]
            self._carry_out(decisions)

    # -- the end ----------------------------------------------------------------------

    async def _save_restarts(self) -> None:
        try:
            await self.state.launcher.save_restarts(self.state.restart_record())
        except Exception:  # a later attempt then starts its budget afresh
            log.warning("could not save the restart record", exc_info=True)

    async def finish(self, phase: Phase, diagnostics: str) -> tuple[Phase, str]:
        """End the application with the job's outcome (its phase already entered).

        Every task is told to stop, the final status published and kept as
        the job's record (am/record.py), and YARN told (unless YARN is killing
        the application already); returns the phase and the diagnostics as
        YARN keeps them.
        """
        state = self.state
        launcher = state.launcher
        if launcher.app_id and phase is not Phase.SUCCEEDED:
            diagnostics += (
                f"\nAll task logs: yarn logs -applicationId {launcher.app_id}"
            )
        state.apply([Ended(diagnostics)])
        log.info("job %s: %s", phase.value, diagnostics)
        for task in state.tasks.values():
            task.tell_stop(
                stop_event(f"the job {phase.value.lower()}", state.spec.stop_grace)
            )
        try:
            await state.publisher.publish(force=True)
            await launcher.set_progress(1.0)
        except Exception as exc:
            if phase is Phase.KILLED:  # YARN may have ended skein's master already
                log.warning("could not publish the final status: %s", exc)
            else:
                log.exception("could not publish the final status")
        # The key-value store ends with the application: keep the snapshot
        # just published where `tfyarn status` reads it afterwards (bounded).
        from am.record import keep_final

        await keep_final(launcher, state.last_status)
        # A killed app is already being torn down by YARN, unless the client
        # that stopped it never came back to kill it.
        if phase is not Phase.KILLED or self._shutdown_killed:
            await launcher.shutdown(phase.value, diagnostics)
        return phase, diagnostics
