"""TF_CONFIG, legacy flags and argument placeholders (tfyarn/runtime/tfconfig.py)."""

from __future__ import annotations

import json

from tfyarn.runtime import tfconfig as _tfconfig

CLUSTER = {"ps": ["p0:1", "p1:2"], "worker": ["w0:3", "w1:4"], "chief": []}


def test_tf_config_follows_tensorflow_conventions() -> None:
    config = json.loads(_tfconfig.tf_config(CLUSTER, "worker", 1))
    assert config == {
        "cluster": {"ps": ["p0:1", "p1:2"], "worker": ["w0:3", "w1:4"]},
        "task": {"type": "worker", "index": 1},
    }


def test_evaluator_gets_the_cluster_without_being_in_it() -> None:
    config = json.loads(
        _tfconfig.tf_config({"chief": ["c:1"], "worker": ["w:2"]}, "evaluator", 0)
    )
    assert config["task"] == {"type": "evaluator", "index": 0}
    assert "evaluator" not in config["cluster"]


def test_legacy_flags_are_exactly_the_four_old_flags() -> None:
    assert _tfconfig.legacy_flags(CLUSTER, "ps", 1) == [
        "--ps_hosts=p0:1,p1:2",
        "--worker_hosts=w0:3,w1:4",
        "--job_name=ps",
        "--task_index=1",
    ]


def test_placeholders_expand_and_leave_other_braces_alone() -> None:
    args = [
        "--role={job_name}",
        "--i={task_index}",
        "--ps={ps_hosts}",
        "--w={worker_hosts}",
        "--c={chief_host}",
        '{"json": {"kept": 1}}',
        "{unknown}",
    ]
    out = _tfconfig.expand_placeholders(
        args, {**CLUSTER, "chief": ["c:9"]}, "worker", 0
    )
    assert out == [
        "--role=worker",
        "--i=0",
        "--ps=p0:1,p1:2",
        "--w=w0:3,w1:4",
        "--c=c:9",
        '{"json": {"kept": 1}}',
        "{unknown}",
    ]


def test_script_args_appends_legacy_flags_after_user_args() -> None:
    out = _tfconfig.script_args(["--steps=5"], CLUSTER, "worker", 0, legacy=True)
    assert out[0] == "--steps=5"
    assert out[1:] == _tfconfig.legacy_flags(CLUSTER, "worker", 0)
    assert _tfconfig.script_args(["a"], CLUSTER, "worker", 0, legacy=False) == ["a"]
