"""The recovery policy (am/policy.py) as a table: plain inputs in, an Action out."""

from __future__ import annotations

import pytest

from am.policy import (
    Action,
    budget_message,
    decide,
    serving_roles,
    uses_ps_strategy,
)
from tfyarn.spec import Role

FAIL, REPLACE, RESTART, IGNORE = (
    Action.FAIL_JOB,
    Action.REPLACE_TASK,
    Action.RESTART_CLUSTER,
    Action.IGNORE,
)

# role, ParameterServerStrategy job, budget used, max_restarts, expected
CASES = [
    # A worker of a PS-strategy job, or an evaluator: replaced alone.
    (Role.WORKER, True, 0, 3, REPLACE),
    (Role.WORKER, True, 2, 3, REPLACE),
    (Role.EVALUATOR, True, 0, 1, REPLACE),
    (Role.EVALUATOR, False, 0, 1, REPLACE),
    # The chief, a ps, a worker of an all-reduce or TF1-style job: the cluster.
    (Role.CHIEF, True, 0, 3, RESTART),
    (Role.PS, True, 0, 3, RESTART),
    (Role.WORKER, False, 0, 3, RESTART),
    (Role.CHIEF, False, 1, 2, RESTART),
    # The budget used up (replacements and restarts both count): fail.
    (Role.WORKER, True, 3, 3, FAIL),
    (Role.EVALUATOR, False, 1, 1, FAIL),
    (Role.PS, True, 0, 0, FAIL),
    (Role.WORKER, False, 5, 3, FAIL),
]


@pytest.mark.parametrize(("role", "ps_strategy", "used", "budget", "action"), CASES)
def test_each_failure_gets_its_action(
    role: Role, ps_strategy: bool, used: int, budget: int, action: Action
) -> None:
    got = decide(
        role=role, ps_strategy=ps_strategy, budget_used=used, max_restarts=budget
    )
    assert got is action


@pytest.mark.parametrize(
    "settled",
    [
        {"outcome_decided": True},
        {"lead_finished": True},
        {"stopping": True},
    ],
)
@pytest.mark.parametrize("role", list(Role))
def test_once_the_outcome_is_settled_every_failure_is_ignored(
    settled: dict[str, bool], role: Role
) -> None:
    # Even past the budget: the job's end is already decided.
    for used, budget in ((0, 3), (3, 3)):
        action = decide(
            role=role,
            ps_strategy=True,
            budget_used=used,
            max_restarts=budget,
            **settled,
        )
        assert action is IGNORE


@pytest.mark.parametrize(
    ("chiefs", "ps", "legacy", "expected"),
    [
        (1, 2, False, True),
        (1, 2, True, False),  # TF1-style flags: no coordinator to absorb a loss
        (0, 2, False, False),  # no chief: no coordinator
        (1, 0, False, False),  # no ps: all-reduce
    ],
)
def test_ps_strategy_needs_a_chief_ps_tasks_and_no_legacy_flags(
    chiefs: int, ps: int, legacy: bool, expected: bool
) -> None:
    assert uses_ps_strategy(chiefs=chiefs, ps=ps, legacy_flags=legacy) is expected


def test_when_the_lead_succeeds_serving_tasks_stop_at_once() -> None:
    assert serving_roles(ps_strategy=False) == {Role.PS, Role.EVALUATOR}
    assert serving_roles(ps_strategy=True) == {Role.PS, Role.EVALUATOR, Role.WORKER}


def test_the_budget_message_lists_every_failure_numbered() -> None:
    assert budget_message(
        "w:1 crashed", ["w:1 crashed"], budget_used=0, max_restarts=0
    ) == (
        "w:1 crashed"  # no recovery asked for: nothing more to say
    )
    text = budget_message(
        "w:1 crashed again",
        ["ps:0 lost", "w:1 crashed again"],
        budget_used=1,
        max_restarts=1,
    )
    assert text.splitlines() == [
        "w:1 crashed again",
        "The restart budget is used up (1 of max_restarts=1); every failure of this job:",
        "1. ps:0 lost",
        "2. w:1 crashed again",
        "(raise --max_restarts to allow more restarts)",
    ]
