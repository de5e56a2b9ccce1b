"""The recovery policy: what a failed task costs the job (ARCHITECTURE.md, "Recovery").

Pure functions of plain inputs, so the whole policy can be read here and tested
as a table (tests/unit/test_am_policy.py). :class:`am.state.JobState` asks
:func:`decide` about every failure and carries out the answer.
"""

from __future__ import annotations

from collections.abc import Collection
from enum import Enum

from tfyarn.spec import RestartPolicy, Role


class Action(Enum):
    """What the master does about a failed task (see :func:`decide`)."""

    FAIL_JOB = "fail the job: the restart budget is used up"
    FAIL_REPEATED = "fail the job: the same error again"
    FAIL_NOT_RETRIED = "fail the job: the restart policy does not retry this"
    FAIL_DISRUPTED = "fail the job: YARN took its containers back too often"
    REPLACE_TASK = "replace the task alone"
    RESTART_CLUSTER = "restart the whole TensorFlow cluster"
    IGNORE = "ignore"  # the job's outcome (or a restart) is already decided

    def fails(self) -> bool:
        return self in (
            Action.FAIL_JOB,
            Action.FAIL_REPEATED,
            Action.FAIL_NOT_RETRIED,
            Action.FAIL_DISRUPTED,
        )


class Failure(Enum):
    """How a task failed: the script's own doing, or its surroundings'."""

    EXIT = "the script exited with an error"
    RETRY_EXIT = "the script asked for a restart (an exit code of retry_exit_codes)"
    SIGNAL = "the script was killed by a signal"
    LOST = "the container ended without a report (lost, killed, node gone)"
    # YARN took the container back through no fault of the job (preempted,
    # its node lost, its disks failed): outside the restart budget, within
    # max_disruptions (Kubernetes' pod failure policy ignores disruptions too).
    DISRUPTED = "YARN took the container back (preempted, node lost, disks failed)"
    SILENT = "no heartbeat (a wedged process, a dead node or network)"
    UNREGISTERED = "not registered in time"
    STALL = "no training progress"

    def is_transient(self) -> bool:
        """Bad luck that a new attempt may not meet again (Kubeflow's "retryable")."""
        return self in (Failure.SIGNAL, Failure.LOST, Failure.SILENT, Failure.DISRUPTED)


def classify_exit(code: int, retry_exit_codes: Collection[int] = ()) -> Failure:
    """The kind of a non-zero exit: negative codes are signals (Popen's convention)."""
    if code < 0:
        return Failure.SIGNAL
    if code in retry_exit_codes:
        return Failure.RETRY_EXIT
    return Failure.EXIT


def uses_ps_strategy(*, chiefs: int, ps: int, legacy_flags: bool) -> bool:
    """Whether the job runs TF2's ParameterServerStrategy with a coordinator.

    A chief and ps tasks make one, unless the script takes TF1-style flags.
    """
    return bool(chiefs and ps and not legacy_flags)


def decide(
    *,
    role: Role,
    ps_strategy: bool,
    budget_used: int,
    max_restarts: int,
    failure: Failure = Failure.EXIT,
    repeated: bool = False,
    restart_policy: RestartPolicy = RestartPolicy.ON_FAILURE,
    outcome_decided: bool = False,
    lead_finished: bool = False,
    stopping: bool = False,
    draining: bool = False,
    disruptions: int = 0,
    max_disruptions: int = 0,
) -> Action:
    """The one place deciding what a failed task costs the job.

    - The job's outcome is settled (decided, the lead finished, or ``tfyarn
      kill`` is stopping it): ignore.
    - The master is ending the generation on purpose (``draining``: a stop
      notice is out, am/notice.py): ignore, charge nothing. The next
      generation brings every task back anyway. (A script that saved and
      exited with the restart code after the notice does not even get here.)
    - ``restart_policy`` ``never``: fail the job.
    - YARN took the task's container back (``Failure.DISRUPTED``: preempted,
      its node lost): the job's budget is not spent, the task comes back as
      below; only more than ``max_disruptions`` of them (``disruptions`` so
      far) fail the job, so that it cannot cycle forever.
    - The script exited with the error it already failed with (``repeated``:
      same role, same error line): fail the job. A script that fails the same
      way twice fails that way every time (a bug, a missing file); restarting
      it only spends the budget. Transient failures and exit codes the script
      uses to ask for a restart are never "repeated".
    - ``transient_only``: fail the job unless the failure is transient (a
      signal, a lost container or node, a lost heartbeat) or a retry exit code.
    - The restart budget (``max_restarts``) is used up: fail the job.
    - A worker of a ParameterServerStrategy job, or an evaluator: replace that
      task alone, at the same address: TensorFlow's ClusterCoordinator runs
      the lost worker's functions on the others meanwhile and uses the worker
      again once a server answers at that address.
    - Anything else (a ps, the chief, any task of an all-reduce or TF1-style
      job): stop every task and start the whole TensorFlow cluster again;
      scripts resume from their latest checkpoint.

    Examples
    --------
    >>> decide(role=Role.WORKER, ps_strategy=True, budget_used=0, max_restarts=3)
    <Action.REPLACE_TASK: 'replace the task alone'>
    >>> decide(role=Role.PS, ps_strategy=True, budget_used=3, max_restarts=3)
    <Action.FAIL_JOB: 'fail the job: the restart budget is used up'>
    >>> decide(role=Role.WORKER, ps_strategy=False, budget_used=1,
    ...        max_restarts=10, repeated=True)
    <Action.FAIL_REPEATED: 'fail the job: the same error again'>
    """
    if outcome_decided or lead_finished or stopping or draining:
        return Action.IGNORE
    if restart_policy is RestartPolicy.NEVER:
        return Action.FAIL_NOT_RETRIED
    if failure is Failure.DISRUPTED:
        if disruptions >= max_disruptions:
            return Action.FAIL_DISRUPTED
        return _recovery(role, ps_strategy=ps_strategy)
    if repeated and failure is Failure.EXIT:
        return Action.FAIL_REPEATED
    if (
        restart_policy is RestartPolicy.TRANSIENT_ONLY
        and not failure.is_transient()
        and failure is not Failure.RETRY_EXIT
    ):
        return Action.FAIL_NOT_RETRIED
    if budget_used >= max_restarts:
        return Action.FAIL_JOB
    return _recovery(role, ps_strategy=ps_strategy)


def _recovery(role: Role, *, ps_strategy: bool) -> Action:
    """How a failed task comes back: alone, or with the whole cluster."""
    if role is Role.EVALUATOR or (role is Role.WORKER and ps_strategy):
        return Action.REPLACE_TASK
    return Action.RESTART_CLUSTER


def error_signature(role: Role, error: str, code: int) -> str:
    """What makes two script failures "the same error": the role and error line.

    A script that printed nothing is known by its exit code instead.
    """
    return f"{role.value}: {error or f'exit code {code}'}"


def serving_roles(*, ps_strategy: bool) -> frozenset[Role]:
    """The roles stopped at once when the lead succeeds (the others get worker_grace).

    ps tasks block in ``server.join()`` forever and an evaluator loops over
    checkpoints: neither ends by itself. Under ParameterServerStrategy the
    workers only serve the coordinator too; elsewhere they train and get
    worker_grace to finish their own last steps.
    """
    serving = {Role.PS, Role.EVALUATOR}
    if ps_strategy:
        serving.add(Role.WORKER)
    return frozenset(serving)


def budget_message(
    reason: str, failures: list[str], *, budget_used: int, max_restarts: int
) -> str:
    """Why the job failed: ``reason`` and, with a budget, every failure numbered.

    ``failures`` ends with ``reason`` (the failure that used the budget up).
    """
    if not max_restarts:
        return reason  # no recovery was asked for: the failure says it all
    text = (
        f"{reason}\nThe restart budget is used up ({budget_used} of "
        f"max_restarts={max_restarts}); every failure of this job:"
    )
    return (
        text
        + _numbered(failures, reason)
        + ("\n(raise --max_restarts to allow more restarts)")
    )


def _numbered(failures: list[str], reason: str) -> str:
    return "".join(
        f"\n{n}. {failure}" for n, failure in enumerate([*failures[:-1], reason], 1)
    )


def disruption_message(
    reason: str, disruptions: list[str], *, max_disruptions: int
) -> str:
    """Why the job failed when YARN took its containers back once too often.

    ``disruptions``: the ones recovered from before this one (``reason``).
    """
    return (
        f"{reason}\nYARN took this job's containers back more than "
        f"max_disruptions={max_disruptions} times (preemption by another queue, "
        "lost nodes, failed disks), so the job is not brought back again; these "
        "did not count against max_restarts. Every one of them:"
        + _numbered([*disruptions, reason], reason)
        + "\n(submit to a queue with guaranteed capacity, or raise --max_disruptions)"
    )


def repeat_message(error: str, role: Role, reason: str, failures: list[str]) -> str:
    """Why the job failed on a repeated error: that error first, then the story.

    ``failures`` ends with ``reason`` (the second failure with ``error``).
    """
    return (
        f"{error}\n"
        f"This error repeated: a {role.value} task failed with it before, and a "
        "script that fails the same way twice fails that way every time (a bug, "
        "a missing file), so the job is not restarted again. Every failure of "
        "this job:" + _numbered(failures, reason)
    )


def policy_message(
    reason: str, failures: list[str], *, restart_policy: RestartPolicy
) -> str:
    """Why the job failed on a failure its restart policy does not retry."""
    if restart_policy is RestartPolicy.NEVER:
        why = "restart_policy=never: no failure is restarted"
    else:
        why = (
            "restart_policy=transient_only restarts only lost containers, "
            "signals, lost heartbeats and retry_exit_codes, not this failure"
        )
    if len(failures) <= 1:
        return f"{reason}\n({why})"
    return f"{reason}\n({why}). Every failure of this job:" + _numbered(
        failures, reason
    )
