"""The master's one reconcile loop: every effect on YARN happens here.

Like dask's ``SpecCluster._correct_state``, each pass compares what should be
with what is: it polls YARN's view of the containers, turns what it sees and
what did not happen in time (a container gone, a silent task, a missed
registration, a stall) into failures for :class:`am.state.JobState` to decide
on, kills what was told to stop and did not, launches replacements once their
predecessor's container has ended, publishes the status, and at the end shuts
the application down. It never moves the job's phase: the job does
(:meth:`am.state.JobState.move_to`), with what this loop returns.

Tests drive it a pass at a time: :meth:`Reconciler.start`, then
:meth:`Reconciler.reconcile_once` as often as they like.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import TYPE_CHECKING

from am import lease, nodemanager
from am.launcher import PENDING_STATES, ContainerInfo
from am.model import KILL_MARGIN, Task, stop_event
from am.policy import Failure
from tfyarn.contract import env as _env
from tfyarn.contract.exit_codes import (
    MEANING,
    disruption,
    exit_codes,
    explain_diagnostics,
)
from tfyarn.contract.failure import first_line
from tfyarn.contract.heartbeat import heartbeat_interval, heartbeat_timeout
from tfyarn.contract.status import Phase, TaskState
from tfyarn.spec import ROLES, JobSpec, Role

if TYPE_CHECKING:
    from am.state import JobState

log = logging.getLogger(__name__)

# A runtime reports its script's end before its container exits; when YARN says
# a container ended, wait this long for that report before calling it lost.
END_REPORT_GRACE = 3.0
MIN_PASS_GAP = 0.05
# How long a lost container's verdict may wait for its NodeManager's account
# (am/nodemanager.py: two requests of at most HTTP_TIMEOUT each).
ACCOUNT_WAIT = END_REPORT_GRACE + 2 * nodemanager.HTTP_TIMEOUT
# After `tfyarn kill` stopped every task, how long the master waits for the
# client's YARN kill before ending the application KILLED itself.
STOPPED_LINGER = 30.0
# A container kill that YARN refuses (busy, or the container already gone) is
# tried again on the next passes, this many times in all; then the master goes
# on without it (ending the application ends every container with it).
KILL_ATTEMPTS = 5
# A successful job's diagnostics name its first restarts, one line each.
RESTARTS_LISTED = 5
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


class Reconciler:
    """Acts on one :class:`~am.state.JobState`; owns every call that changes YARN."""

    def __init__(self, state: JobState) -> None:
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
        # on their container: task -> (attempt, reason, kind, since).
        self._held: dict[Task, tuple[int, str, Failure, float]] = {}

    async def start(self) -> None:
        """Publish the first status and ask YARN for every task's container."""
        state = self.state
        await state.publisher.publish(force=True)
        try:
            await self._launch_all()
        except Exception as exc:  # YARN refused a request: nothing will run
            log.exception("launching containers failed")
            if state.outcome is None:
                state.outcome = (
                    Phase.FAILED,
                    f"tfyarn master could not request containers: {exc}",
                )

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
                state.containers = await state.launcher.poll()
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
            self._check_registration(now)
            self._check_heartbeats(now)
            self._check_stall(now)
            self._check_lease(now)
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
            self._check_finishing(now)
        if state.stopping_since is not None:
            self._check_stopping(now)
        if state.restarts_unsaved and (self._saving is None or self._saving.done()):
            state.restarts_unsaved = False
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
                task.container_id = info.id
                task.requested_at = now
                state.note(task, f"container {info.id} requested", quiet=True)
            if tasks:
                # One log line per role, not one per task: a big job has thousands.
                log.info(
                    "%d %s container(s) requested with the application: %s .. %s",
                    len(tasks),
                    role.value,
                    tasks[0].container_id,
                    tasks[-1].container_id,
                )

    async def _launch(self, task: Task, *, quiet: bool = False) -> None:
        state = self.state
        env = _env.task_env(
            index=task.index,
            attempt=task.attempt,
            master_address=state.master_address,
            restart=state.cluster_restarts,
            port=task.port or 0,  # a replaced task keeps its address
        )
        # A gang give-back's new request still counts from the formation's start.
        since, task.waiting_since = task.waiting_since, None
        task.requested_at = state.clock() if since is None else since
        info = await state.launcher.start(task.role.value, env)
        task.container_id = info.id
        state.note(task, f"requested container {info.id}", quiet=quiet)

    async def _relaunch_ready(self, now: float) -> None:
        """Launch new attempts whose predecessor's container has ended."""
        state = self.state
        for task in sorted(state.relaunch, key=lambda t: (t.role.value, t.index)):
            if state.outcome is not None:
                return
            if state.finishing_since is not None:
                # The lead finished meanwhile: nothing to bring back.
                if task.retiring and not await self._kill(task.retiring):
                    continue  # tried again on the next pass
                state.relaunch.discard(task)
                state.mark(task, TaskState.KILLED, "not relaunched: the job finished")
                continue
            old = task.retiring
            if old is not None:
                info = state.containers.get(old)
                if info is None or not info.ended:
                    if now < task.retire_by:
                        continue
                    if not task.retire_killed:
                        if old not in self._kill_failures:
                            state.note(task, f"killing the old container {old}")
                        if not await self._kill(old):
                            continue  # tried again on the next pass
                        task.retire_killed = True
                        task.retire_by = now + KILL_MARGIN
                        continue
                    # Killed and still not confirmed ended: go on (bounded).
            if now < task.relaunch_at:
                continue  # a gang give-back's pause (am/gang.py)
            task.retiring = None
            state.relaunch.discard(task)
            state.mark(task, TaskState.REQUESTED, f"attempt {task.attempt}")
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
                state.mark(
                    task,
                    TaskState.KILLED,
                    f"the master could not kill container {cid} "
                    f"({KILL_ATTEMPTS} attempts); it ends with the application",
                )
            else:
                state.mark(task, TaskState.KILLED, "container killed by the master")

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
        state = self.state
        info = state.containers.get(task.container_id or "")
        # Restarting in place, unless the master killed it meanwhile (the job
        # is ending): a killed restart is over, not retried in a new container.
        if task.in_place_stop is not None and not task.state.is_terminal():
            if info is not None and info.ended:
                state.attempts.in_place_failed(
                    task, f"its container ended {info.state}"
                )
            elif now > task.in_place_by:
                state.attempts.in_place_failed(
                    task, "it did not register again in time"
                )
            return
        if info is None or task.state.is_terminal():
            return
        if info.yarn_container_id and not task.yarn_container_id:
            task.yarn_container_id = info.yarn_container_id
        if info.node:
            task.node = info.node
        if task.state is TaskState.REQUESTED and info.state == "RUNNING":
            state.mark(
                task,
                TaskState.ALLOCATED,
                f"got {info.yarn_container_id} on {info.node}",
                quiet=not state.log_each,
            )
        if not info.ended:
            return
        if task.container_ended_at is None:
            task.container_ended_at = now
            if task.stop_requested_at is None and info.state == "FAILED":
                self._accounts[info.id] = asyncio.create_task(
                    state.launcher.container_account(info)
                )
            return
        if now - task.container_ended_at < END_REPORT_GRACE:
            return
        # The container is gone and the runtime never said how its script ended.
        if task.stop_requested_at is not None:
            state.mark(task, TaskState.KILLED, f"container {info.state}")
            return
        message = info.exit_message.strip() or "no message from YARN"
        # The ResourceManager's words (skein's exit message) say it was taken
        # back; then the NodeManager's account is not waited for.
        word = disruption(info.exit_message)
        asked = self._accounts.get(info.id)
        waited = now - task.container_ended_at
        pending = asked is not None and not asked.done()
        if not word and pending and waited < ACCOUNT_WAIT:
            return
        self._accounts.pop(info.id, None)
        if asked is not None and asked.done() and not asked.exception():
            words = asked.result().strip()
            if words:
                message += "; the NodeManager: " + words.replace("\n", " | ")
                # Its exit status and diagnostics, not the script's stderr.
                word = word or disruption(words.split("\nstderr: ", 1)[0])
        if word:
            state.mark(task, TaskState.LOST, f"{word}: container {info.state}")
            self._on_disruption(task, info, word, message)
            return
        state.mark(task, TaskState.LOST, f"container {info.state}: {message}")
        meaning = "".join(
            f"\n{MEANING}{line}"
            for line in container_end_meaning(state.spec, task.role, message)
        )
        state.on_failure(
            task,
            f"{task.key} ({task.where()}) was lost: its container ended "
            f"{info.state} without the task reporting an exit code "
            f"(YARN: {message}){meaning}",
            Failure.LOST,
        )

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
        one is judged by :meth:`_judge_held`: a disruption if YARN took the
        container back (preempted), else ``reason`` and ``kind`` as reported.
        """
        state = self.state
        if state.settled or (code not in SIGTERM_EXITS and not container_ending):
            return False
        bound = CONTAINER_END_HOLD if container_ending else SIGTERM_HOLD
        self._held[task] = (task.attempt, reason, kind, state.clock() + bound)
        state.note(task, "ended by SIGTERM: waiting for YARN's word on its container")
        state.poke()
        return True

    def _judge_held(self, now: float) -> None:
        state = self.state
        for task, (attempt, reason, kind, until) in list(self._held.items()):
            if task.attempt != attempt:  # a cluster restart brought it back already
                del self._held[task]
                continue
            info = state.containers.get(task.container_id or "")
            ended = info is not None and info.ended
            word = disruption(info.exit_message) if info is not None and ended else ""
            if not ended and now < until:
                continue
            del self._held[task]
            if info is not None and word:
                self._on_disruption(task, info, word, info.exit_message.strip())
            else:
                state.on_failure(task, reason, kind)

    def _on_disruption(
        self, task: Task, info: ContainerInfo, word: str, message: str
    ) -> None:
        """YARN took the task's container back: not the job's fault."""
        state = self.state
        state.disrupted[task] = word
        meaning = "".join(
            f"\n{MEANING}{line}"
            for line in container_end_meaning(state.spec, task.role, message)
        )
        state.on_failure(
            task,
            f"{task.key} ({task.where()}) was {word}: YARN took its container "
            f"back through no fault of the job (YARN: {message}){meaning}",
            Failure.DISRUPTED,
        )

    def _check_registration(self, now: float) -> None:
        state = self.state
        timeout = state.spec.registration_timeout
        late = [
            t
            for t in state.tasks.values()
            if t.state in (TaskState.REQUESTED, TaskState.ALLOCATED)
            and t.stop_requested_at is None
            and t not in state.resizer.standby  # it may wait as long as it takes
            and now - t.requested_at > timeout
        ]
        if not late:
            return
        for task in late:
            state.mark(task, TaskState.LOST, f"not registered after {timeout:.0f} s")
        reasons = "; ".join(self._waiting_for(t, now) for t in late)
        if state.gang.gave_back:
            reasons += (
                f" (gang allocation gave back the cluster's containers "
                f"{state.gang.gave_back} time(s) meanwhile, waiting for resources)"
            )
        state.on_failure(
            late[0],
            f"{len(late)} task(s) did not register within the registration timeout "
            f"of {timeout:.0f} s: {reasons}",
            Failure.UNREGISTERED,
        )

    def _waiting_for(self, task: Task, now: float) -> str:
        waited = now - task.requested_at
        info = self.state.containers.get(task.container_id or "")
        if info is None or info.state in PENDING_STATES:
            group = self.state.spec.group(task.role)
            gpus = f", {group.gpus} GPUs" if group.gpus else ""
            # A node whose GPU discovery fails offers no GPUs (am/gpus.py).
            trouble = self.state.gpus.trouble() if group.gpus else ""
            return (
                f"{task.key} waiting for a container of {group.memory_mib} MiB, "
                f"{group.vcores} vcores{gpus}; not granted after {waited:.0f} s "
                "(the cluster may not have these resources free, or at all"
                + (f"; GPUs fail on {trouble}" if trouble else "")
                + ")"
            )
        return (
            f"{task.key} got container {info.yarn_container_id} on "
            f"{info.node.split(':')[0]} but did not register after {waited:.0f} s "
            "(see that container's log: did the tfyarn runtime start?)"
        )

    def _check_heartbeats(self, now: float) -> None:
        state = self.state
        # Big jobs heartbeat less often (tfyarn.contract.heartbeat).
        interval = heartbeat_interval(state.spec.heartbeat_interval, len(state.tasks))
        timeout = heartbeat_timeout(state.spec.heartbeat_timeout, interval)
        for task in list(state.tasks.values()):  # a failure may drop one
            if (
                task.state.is_registered()
                and task.stop_requested_at is None
                and task.last_heartbeat is not None
                and now - task.last_heartbeat > timeout
            ):
                silent = now - task.last_heartbeat
                state.mark(task, TaskState.LOST, f"no heartbeat for {silent:.0f} s")
                state.on_failure(
                    task,
                    f"{task.key} ({task.where()}) sent no heartbeat for {silent:.0f} s "
                    f"(limit {timeout:.0f} s): its process is wedged or its node "
                    "or network is gone",
                    Failure.SILENT,
                )

    def _check_stall(self, now: float) -> None:
        """--stall_timeout: no task reported a new step for that long."""
        state = self.state
        timeout = state.spec.stall_timeout
        if (
            not timeout
            or state.progress_at is None
            or state.phase is not Phase.RUNNING
            or state.notices.active  # saving for a stop notice, not stalled
            or now - state.progress_at <= timeout
        ):
            return
        named = []
        for t in state.tasks.values():
            if t.state is not TaskState.RUNNING:
                continue
            if t.step is None:
                named.append(f"{t.key} never reported progress")
            else:
                idle = now - (t.last_progress or now)
                named.append(f"{t.key} at step {t.step} for {idle:.0f} s")
        idle = now - state.progress_at
        state.progress_at = None  # one failure per stall
        # A stall is the whole job's: charged to the lead, so it restarts the
        # cluster (no single task to replace).
        state.on_failure(
            state.lead,
            f"the job stalled: no task reported training progress for {idle:.0f} s "
            f"(stall_timeout {timeout:.0f} s): " + "; ".join(named),
            Failure.STALL,
        )

    # -- the end ----------------------------------------------------------------------

    def _check_finishing(self, now: float) -> None:
        state = self.state
        assert state.finishing_since is not None
        spec = state.spec
        elapsed = now - state.finishing_since
        if elapsed > spec.worker_grace:
            for task in state.tasks.values():
                state.request_stop(
                    task,
                    f"{state.lead.key} finished {spec.worker_grace:.0f} s ago "
                    "(worker_grace)",
                )
        if all(t.state.is_terminal() for t in state.tasks.values()):
            state.outcome = (Phase.SUCCEEDED, self._success_message())
        elif elapsed > spec.worker_grace + spec.stop_grace + 2 * KILL_MARGIN:
            # Bounded even if YARN never confirms the kills.
            state.outcome = (Phase.SUCCEEDED, self._success_message())

    def _check_stopping(self, now: float) -> None:
        """After ``stop_job``: the client kills the app; if it never does, end it."""
        state = self.state
        assert state.stopping_since is not None
        if state.notices.active:
            return  # `kill --graceful`: the Stops (and this wait) come after it
        grace = max((t.stop_grace for t in state.tasks.values()), default=0.0)
        if now - state.stopping_since > grace + 2 * KILL_MARGIN + STOPPED_LINGER:
            state.outcome = (Phase.KILLED, state.stop_reason)
            self._shutdown_killed = True

    def _check_lease(self, now: float) -> None:
        """A server set whose client stopped renewing ends (am/lease.py)."""
        state = self.state
        verdict = lease.decide(state.lease.view(now, settled=state.settled))
        if verdict.action is lease.LeaseAction.EXPIRE:
            log.warning("%s", verdict.reason)
            state.outcome = (Phase.KILLED, verdict.reason)
            self._shutdown_killed = True  # no client will kill it

    def _success_message(self) -> str:
        state = self.state
        counts: dict[str, int] = {}
        for task in state.tasks.values():
            counts[task.state.value] = counts.get(task.state.value, 0) + 1
        summary = ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items()))
        if state.gang.gave_back:
            summary += (
                f"; gang allocation gave back its containers "
                f"{state.gang.gave_back} time(s) waiting for resources"
            )
        message = f"tfyarn: {state.lead.key} finished successfully ({summary})"
        if state.restart_reasons:
            # The published status (with every reason) ends with the
            # application; YARN keeps these diagnostics.
            message += f"; after {len(state.restart_reasons)} restart(s): " + "; ".join(
                f"{n}. {_first_line(why)}"
                for n, why in enumerate(state.restart_reasons[:RESTARTS_LISTED], 1)
            )
            if len(state.restart_reasons) > RESTARTS_LISTED:
                message += f" (+{len(state.restart_reasons) - RESTARTS_LISTED} more)"
        return message

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
        state.diagnostics = diagnostics
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


def container_end_meaning(spec: JobSpec, role: Role, diagnostics: str) -> list[str]:
    """What YARN's words about a container that ended unreported mean.

    A container refused by the NodeManager (Docker: untrusted image, network,
    user, image not found) never starts the runtime, so YARN's diagnostics are
    all there is; they say it in exit codes and container-executor's terms.
    """
    lines = explain_diagnostics(diagnostics)
    image = spec.docker_image_of(role)
    missing = f"{spec.docker_python}: No such file or directory" in diagnostics
    if image and (127 in exit_codes(diagnostics) or missing):
        lines.insert(
            0,
            f"{role.value} tasks run in Docker image {image} with the "
            f"interpreter {spec.docker_python} (--docker_python), which was not "
            "found: build the image with `tfyarn image build`, or give "
            "--docker_python the image's Python with tfyarn installed (or the "
            "NodeManager ignored the image: its container executor must be the "
            "LinuxContainerExecutor with the docker runtime)",
        )
    return lines


def _first_line(text: str, limit: int = 160) -> str:
    line = first_line(text)
    return line if len(line) <= limit else line[: limit - 3] + "..."
