"""restart_policy and retry_exit_codes: defaults, checks, round trips."""

from __future__ import annotations

import pytest

from tfyarn.client import config
from tfyarn.errors import SpecError
from tfyarn.spec import JobSpec, RestartPolicy


def test_shipped_defaults() -> None:
    spec = JobSpec(script="train.py")
    assert spec.restart_policy is RestartPolicy.ON_FAILURE
    assert spec.retry_exit_codes == ()


def test_values_are_normalized_and_survive_every_round_trip() -> None:
    # As a YAML file or the command line gives them: strings, lists.
    spec = JobSpec(
        script="train.py",
        restart_policy="Transient_Only",  # type: ignore[arg-type]
        retry_exit_codes=["76,75", 3],  # type: ignore[arg-type]
    )
    assert spec.restart_policy is RestartPolicy.TRANSIENT_ONLY
    assert spec.retry_exit_codes == (3, 75, 76)
    for again in (
        JobSpec.from_env(spec.to_env()),
        JobSpec.from_yaml(spec.to_yaml()),
        JobSpec.from_dict(spec.to_dict()),
    ):
        assert again == spec


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"restart_policy": "sometimes"}, "on_failure, transient_only, never"),
        ({"retry_exit_codes": [0]}, "0 is success"),
        ({"retry_exit_codes": [256]}, "1 to 255"),
        ({"retry_exit_codes": ["x"]}, "'x' is not an exit code"),
        ({"retry_exit_codes": 75}, "a list of exit codes"),
    ],
)
def test_bad_values_say_what_would_do(options: dict[str, object], says: str) -> None:
    with pytest.raises(SpecError, match=says):
        JobSpec(script="train.py", **options)  # type: ignore[arg-type]


def test_the_command_lines_comma_separated_codes() -> None:
    loaded = config.load(
        None, {"retry_exit_codes": ["75,76", "3"], "restart_policy": "never"}
    )
    spec = config.to_spec("train.py", [], loaded)
    assert spec.restart_policy is RestartPolicy.NEVER
    assert spec.retry_exit_codes == (3, 75, 76)
