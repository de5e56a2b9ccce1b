"""The recovery policy: what a failed task costs the job (ARCHITECTURE.md, "Recovery").

Pure functions of plain inputs, so the whole policy can be read here and tested
as a table (tests/unit/test_am_policy.py). :class:`am.state.JobState` asks
:func:`decide` about every failure and carries out the answer.
"""

from __future__ import annotations

from enum import Enum

from tfyarn.spec import Role


class Action(Enum):
    """What the master does about a failed task (see :func:`decide`)."""

    FAIL_JOB = "fail the job"
    REPLACE_TASK = "replace the task alone"
    RESTART_CLUSTER = "restart the whole TensorFlow cluster"
    IGNORE = "ignore"  # the job's outcome (or a restart) is already decided


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
    outcome_decided: bool = False,
    lead_finished: bool = False,
    stopping: bool = False,
) -> Action:
    """The one place deciding what a failed task costs the job.

    - The job's outcome is settled (decided, the lead finished, or ``tfyarn
      kill`` is stopping it): ignore.
    - The restart budget (``max_restarts``) is used up: fail the job.
    - A worker of a ParameterServerStrategy job, or an evaluator: replace that
      task alone, at the same address; the coordinator absorbs the loss and
      takes the worker back (FIELD_NOTES).
    - Anything else (a ps, the chief, any task of an all-reduce or TF1-style
      job): stop every task and start the whole TensorFlow cluster again;
      scripts resume from their latest checkpoint.

    Examples
    --------
    >>> decide(role=Role.WORKER, ps_strategy=True, budget_used=0, max_restarts=3)
    <Action.REPLACE_TASK: 'replace the task alone'>
    >>> decide(role=Role.PS, ps_strategy=True, budget_used=3, max_restarts=3)
    <Action.FAIL_JOB: 'fail the job'>
    """
    if outcome_decided or lead_finished or stopping:
        return Action.IGNORE
    if budget_used >= max_restarts:
        return Action.FAIL_JOB
    if role is Role.EVALUATOR or (role is Role.WORKER and ps_strategy):
        return Action.REPLACE_TASK
    return Action.RESTART_CLUSTER


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
    for n, failure in enumerate([*failures[:-1], reason], 1):
        text += f"\n{n}. {failure}"
    return text + "\n(raise --max_restarts to allow more restarts)"
