"""The recovery policy (am/policy.py) as a table: plain inputs in, an Action out."""

from __future__ import annotations

import pytest

from am.policy import (
    Action,
    Failure,
    budget_message,
    classify_exit,
    decide,
    disruption_message,
    error_signature,
    policy_message,
    repeat_message,
    serving_roles,
    uses_ps_strategy,
)
from tfyarn.spec import RestartPolicy, Role

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
        {"draining": True},  # a stop notice is out: the generation ends anyway
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


# Whose failure it was, whether its error repeats, the restart policy.
ON, TRANSIENT, NEVER = (
    RestartPolicy.ON_FAILURE,
    RestartPolicy.TRANSIENT_ONLY,
    RestartPolicy.NEVER,
)
FAIL_AGAIN, NOT_RETRIED = Action.FAIL_REPEATED, Action.FAIL_NOT_RETRIED
K = Failure
# failure kind, repeated, restart policy, budget used, expected (all-reduce worker)
KIND_CASES = [
    # on_failure: every kind is restarted within the budget ...
    (K.EXIT, False, ON, 0, RESTART),
    (K.RETRY_EXIT, False, ON, 0, RESTART),
    (K.SIGNAL, False, ON, 0, RESTART),
    (K.LOST, False, ON, 0, RESTART),
    (K.SILENT, False, ON, 0, RESTART),
    (K.UNREGISTERED, False, ON, 0, RESTART),
    (K.STALL, False, ON, 0, RESTART),
    # ... but a script error seen before ends the job, budget or not.
    (K.EXIT, True, ON, 1, FAIL_AGAIN),
    (K.EXIT, True, ON, 9, FAIL_AGAIN),
    # Only a script's own error can repeat: transient kinds and retry codes
    # are restarted however often they come back.
    (K.RETRY_EXIT, True, ON, 1, RESTART),
    (K.SIGNAL, True, ON, 1, RESTART),
    (K.LOST, True, ON, 1, RESTART),
    # The budget still bounds everything.
    (K.SIGNAL, False, ON, 10, FAIL),
    (K.RETRY_EXIT, False, ON, 10, FAIL),
    # transient_only: signals, lost containers and heartbeats, retry codes.
    (K.SIGNAL, False, TRANSIENT, 0, RESTART),
    (K.LOST, False, TRANSIENT, 0, RESTART),
    (K.SILENT, False, TRANSIENT, 0, RESTART),
    (K.RETRY_EXIT, False, TRANSIENT, 0, RESTART),
    (K.EXIT, False, TRANSIENT, 0, NOT_RETRIED),
    (K.UNREGISTERED, False, TRANSIENT, 0, NOT_RETRIED),
    (K.STALL, False, TRANSIENT, 0, NOT_RETRIED),
    (K.LOST, False, TRANSIENT, 10, FAIL),
    # never: nothing is restarted, whatever the budget.
    (K.SIGNAL, False, NEVER, 0, NOT_RETRIED),
    (K.RETRY_EXIT, False, NEVER, 0, NOT_RETRIED),
    (K.EXIT, False, NEVER, 0, NOT_RETRIED),
]


@pytest.mark.parametrize(("kind", "repeated", "rule", "used", "action"), KIND_CASES)
def test_each_kind_of_failure_under_each_restart_policy(
    kind: Failure, repeated: bool, rule: RestartPolicy, used: int, action: Action
) -> None:
    got = decide(
        role=Role.WORKER,
        ps_strategy=False,
        budget_used=used,
        max_restarts=10,
        failure=kind,
        repeated=repeated,
        restart_policy=rule,
    )
    assert got is action


def test_a_repeated_error_of_a_ps_worker_fails_instead_of_replacing() -> None:
    common = {"role": Role.WORKER, "ps_strategy": True, "max_restarts": 10}
    assert decide(budget_used=0, **common) is REPLACE
    assert decide(budget_used=1, repeated=True, **common) is FAIL_AGAIN


@pytest.mark.parametrize("rule", list(RestartPolicy))
def test_a_settled_job_ignores_failures_under_every_policy(
    rule: RestartPolicy,
) -> None:
    action = decide(
        role=Role.CHIEF,
        ps_strategy=True,
        budget_used=0,
        max_restarts=3,
        repeated=True,
        restart_policy=rule,
        stopping=True,
    )
    assert action is IGNORE


def test_only_signals_lost_or_taken_back_containers_and_heartbeats_are_transient() -> (
    None
):
    assert {k for k in Failure if k.is_transient()} == {
        Failure.SIGNAL,
        Failure.LOST,
        Failure.SILENT,
        Failure.DISRUPTED,
    }
    assert all(a.fails() for a in (FAIL, FAIL_AGAIN, NOT_RETRIED))
    assert Action.FAIL_DISRUPTED.fails()
    assert not any(a.fails() for a in (REPLACE, RESTART, IGNORE))


@pytest.mark.parametrize(
    ("code", "kind"),
    [(1, K.EXIT), (2, K.EXIT), (75, K.RETRY_EXIT), (-9, K.SIGNAL), (-15, K.SIGNAL)],
)
def test_exit_codes_are_classified(code: int, kind: Failure) -> None:
    assert classify_exit(code, retry_exit_codes=(75,)) is kind


def test_the_same_error_means_the_same_role_and_error_line() -> None:
    sig = error_signature
    assert sig(Role.WORKER, "ValueError: x", 1) == sig(Role.WORKER, "ValueError: x", 2)
    assert sig(Role.WORKER, "ValueError: x", 1) != sig(Role.CHIEF, "ValueError: x", 1)
    assert sig(Role.WORKER, "ValueError: x", 1) != sig(Role.WORKER, "ValueError: y", 1)
    # A script that printed nothing is known by its exit code.
    assert sig(Role.PS, "", 3) != sig(Role.PS, "", 4)


def test_the_repeat_message_leads_with_the_error_and_says_it_repeated() -> None:
    text = repeat_message(
        "ValueError: bad",
        Role.WORKER,
        "worker:0 attempt 1 ... ValueError: bad",
        ["worker:0 attempt 0 ... ValueError: bad", "worker:0 attempt 1 ..."],
    )
    first, second, *rest = text.splitlines()
    assert first == "ValueError: bad"
    assert second.startswith("This error repeated: a worker task failed with it")
    assert rest == [
        "1. worker:0 attempt 0 ... ValueError: bad",
        "2. worker:0 attempt 1 ... ValueError: bad",
    ]


def test_the_policy_message_names_the_policy() -> None:
    assert policy_message("w:0 lost", ["w:0 lost"], restart_policy=NEVER) == (
        "w:0 lost\n(restart_policy=never: no failure is restarted)"
    )
    text = policy_message("b", ["a", "b"], restart_policy=TRANSIENT)
    assert "restart_policy=transient_only" in text and text.endswith("\n1. a\n2. b")


# role, ParameterServerStrategy job, budget used, disruptions so far, expected
DISRUPTION_CASES = [
    # The restart budget is not asked: a used-up budget still brings it back.
    (Role.WORKER, True, 3, 0, REPLACE),
    (Role.EVALUATOR, False, 3, 5, REPLACE),
    (Role.PS, True, 3, 0, RESTART),
    (Role.CHIEF, False, 0, 19, RESTART),
    # max_disruptions (20 here) used up: fail, naming it.
    (Role.WORKER, True, 0, 20, Action.FAIL_DISRUPTED),
    (Role.PS, True, 0, 25, Action.FAIL_DISRUPTED),
]


@pytest.mark.parametrize(
    ("role", "ps_strategy", "used", "disruptions", "action"), DISRUPTION_CASES
)
def test_a_disruption_spends_max_disruptions_not_the_restart_budget(
    role: Role, ps_strategy: bool, used: int, disruptions: int, action: Action
) -> None:
    got = decide(
        role=role,
        ps_strategy=ps_strategy,
        budget_used=used,
        max_restarts=3,
        failure=Failure.DISRUPTED,
        disruptions=disruptions,
        max_disruptions=20,
    )
    assert got is action


def test_disruptions_follow_the_restart_policy_and_an_ending_job() -> None:
    base = {
        "role": Role.WORKER,
        "ps_strategy": True,
        "budget_used": 0,
        "max_restarts": 3,
        "failure": Failure.DISRUPTED,
        "max_disruptions": 20,
    }
    # transient_only brings back what is not the script's doing; never, nothing.
    assert decide(**base, restart_policy=RestartPolicy.TRANSIENT_ONLY) is REPLACE
    assert decide(**base, restart_policy=RestartPolicy.NEVER) is NOT_RETRIED
    assert decide(**base, stopping=True) is IGNORE
    # repeated only ever applies to the script's own errors.
    assert decide(**base, repeated=True) is REPLACE


def test_the_disruption_message_says_what_and_how_many() -> None:
    text = disruption_message(
        "worker:1 was preempted", ["ps:0 was preempted"], max_disruptions=1
    )
    assert text.startswith("worker:1 was preempted\n")
    assert "max_disruptions=1" in text and "max_restarts" in text
    assert "1. ps:0 was preempted" in text and "2. worker:1 was preempted" in text
    assert "--max_disruptions" in text
