"""tfyarn.run's refusals before submission, and its payload's round trip."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from tfyarn import _versions
from tfyarn.client import function, shipping
from tfyarn.contract import function as _fn
from tfyarn.errors import SpecError
from tfyarn.spec import JobSpec


def test_a_closure_over_an_open_file_is_refused_naming_it(tmp_path: Path) -> None:
    log = open(tmp_path / "train.log", "w")  # noqa: SIM115 -- the point
    try:

        def train() -> None:
            log.write("step\n")

        with pytest.raises(SpecError, match=r"closure variable 'log' is an open file"):
            shipping.check_shippable(train, (), {})
    finally:
        log.close()


def test_a_lock_in_an_argument_or_a_global_is_refused() -> None:
    lock = threading.Lock()
    with pytest.raises(SpecError, match=r"argument 1\[0\] is a lock"):
        shipping.check_shippable(len, ([lock],), {})
    with pytest.raises(SpecError, match=r"argument guard= is a lock"):
        shipping.check_shippable(lambda guard: None, (), {"guard": threading.RLock()})


_GLOBAL_LOCK = threading.Lock()


def _uses_global_lock() -> None:
    with _GLOBAL_LOCK:
        pass


def test_a_global_lock_of_a_function_shipped_by_value_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Functions of __main__ (a notebook) ship by value, with their globals.
    monkeypatch.setattr(_uses_global_lock, "__module__", "__main__")
    with pytest.raises(SpecError, match=r"global '_GLOBAL_LOCK' is a lock"):
        shipping.check_shippable(_uses_global_lock, (), {})


def test_tensorflow_objects_of_this_session_are_refused_but_dtypes_ship() -> None:
    tf = pytest.importorskip("tensorflow")
    weights = tf.constant([1.0, 2.0])

    def train() -> float:
        return float(tf.reduce_sum(weights))

    with pytest.raises(
        SpecError,
        match=r"closure variable 'weights' is a TensorFlow object \(EagerTensor\)",
    ):
        shipping.check_shippable(train, (), {})
    with pytest.raises(SpecError, match=r"argument 1 is a TensorFlow object"):
        shipping.check_shippable(len, (tf.Variable(1.0),), {})
    shipping.check_shippable(len, (tf.float32, tf.TensorShape([2])), {})  # fine


def test_pickle_records_modules_imported_by_reference() -> None:
    import json as json_module

    from tfyarn.data import example

    shipment = shipping.pickle_call(example.write_digits, (json_module.dumps,), {})
    assert shipment.by_reference == ("tfyarn",)  # json is the standard library's


def _job(tmp_path: Path, **kw: object) -> JobSpec:
    script = tmp_path / "entry.py"
    script.write_text("pass\n")
    return JobSpec(script=str(script), **kw)  # type: ignore[arg-type]


def test_a_module_the_job_python_cannot_import_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A module next to the notebook imports there (its directory is on the
    # notebook's sys.path), not in the job's tasks.
    (tmp_path / "mylib_for_tfyarn_test.py").write_text("def f():\n    return 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import mylib_for_tfyarn_test  # type: ignore[import-not-found]

    shipment = shipping.pickle_call(mylib_for_tfyarn_test.f, (), {})
    assert shipment.by_reference == ("mylib_for_tfyarn_test",)
    job = _job(tmp_path)
    with pytest.raises(SpecError, match=r"cannot import mylib_for_tfyarn_test.*files="):
        function.check_job_python(job, shipment.by_reference)
    # Shipped with the job, it imports from the task's directory: accepted.
    shipped = _job(tmp_path, files=(str(tmp_path / "mylib_for_tfyarn_test.py"),))
    function.check_job_python(shipped, shipment.by_reference)


def test_versions_that_disagree_are_refused_with_the_fix(tmp_path: Path) -> None:
    other = tmp_path / "py"
    # A "Python" answering as another minor version, without cloudpickle.
    other.write_text(
        "#!/bin/sh\n"
        'echo \'{"python": "3.9", "cloudpickle": "", "tensorflow": "", "missing": []}\'\n'
    )
    other.chmod(0o755)
    job = _job(tmp_path, python=str(other))
    with pytest.raises(SpecError) as caught:
        function.check_job_python(job, ())
    text = str(caught.value)
    assert "Python 3.11 here, 3.9 in the job" in text.replace(
        f"{sys.version_info[0]}.{sys.version_info[1]}", "3.11"
    )
    assert "cloudpickle" in text and "--python_env auto" in text


def test_unknown_keyword_is_neither_option_nor_parameter() -> None:
    def train(data: str, steps: int = 1) -> None: ...

    with pytest.raises(
        SpecError, match=r"'num_workers' \(did you mean 'num_worker'\?\) is neither"
    ):
        function._split(train, {"num_workers": 2}, None)
    options, kwargs = function._split(
        train, {"num_worker": 2, "steps": 3}, {"queue": "x"}
    )
    assert options == {"num_worker": 2}
    assert kwargs == {"steps": 3, "queue": "x"}
    with pytest.raises(SpecError, match="cannot be called with these arguments"):
        function._check_call(train, (1, 2, 3), {})


def test_the_entry_runs_the_function_and_keeps_its_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generated entry script and the payload, run as a task would, with
    the run's directory on the local file system instead of HDFS."""
    import cloudpickle

    def scaled(x: int, *, factor: int) -> dict[str, int]:
        return {"value": x * factor}

    shipment = shipping.pickle_call(scaled, (7,), {"factor": 6})
    entry, _ = function._write_files(tmp_path, scaled, "r1", shipment)
    out = tmp_path / "runs"
    code = textwrap.dedent(
        f"""
        import runpy
        from tfyarn.contract import function as fn
        fn.run_dir = lambda user, run_id: {str(out)!r} + "/" + run_id
        runpy.run_path({str(entry)!r}, run_name="__main__")
        """
    )
    env = {"TFYARN_ROLE": "worker", "TFYARN_TASK_INDEX": "0", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert cloudpickle.loads((out / "r1" / _fn.RESULT).read_bytes()) == {"value": 42}


def test_a_failing_function_leaves_its_remote_traceback(tmp_path: Path) -> None:
    def broken() -> None:
        raise KeyError("no such column: label")

    shipment = shipping.pickle_call(broken, (), {})
    entry, _ = function._write_files(tmp_path, broken, "r2", shipment)
    out = tmp_path / "runs"
    code = (
        "import runpy\nfrom tfyarn.contract import function as fn\n"
        f"fn.run_dir = lambda user, run_id: {str(out)!r} + '/' + run_id\n"
        f"runpy.run_path({str(entry)!r}, run_name='__main__')\n"
    )
    env = {
        "TFYARN_ROLE": "worker",
        "TFYARN_TASK_INDEX": "1",
        "TFYARN_ATTEMPT": "2",
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, "-c", code],
        check=False,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0  # the task fails as a script would
    error = _fn.TaskError.from_json((out / "r2" / "error-worker-1-2.json").read_bytes())
    assert (error.task, error.attempt, error.type) == ("worker:1", 2, "KeyError")
    assert "in broken" in error.traceback and "no such column" in error.traceback
    assert function._unpickled(error.exception).args == ("no such column: label",)


def test_header_round_trip_and_versions() -> None:
    header = _fn.Header("id", "m.f", "worker:0", "3.11", "3.1.2", "")
    back, body = _fn.Header.decode(header.encode(b"\x80\x05rest\nwith newline"))
    assert back == header and body == b"\x80\x05rest\nwith newline"
    assert _versions.disagreements(_versions.here(), _versions.here()) == []


def test_run_refuses_before_any_yarn_call(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """tfyarn.run names what cannot ship without starting a YARN driver."""
    import tfyarn
    from tfyarn.client import function as function_module

    def no_yarn(*args: object, **kw: object) -> None:
        raise AssertionError("YARN was asked before the refusal")

    monkeypatch.setattr(function_module, "opened", no_yarn)
    lock = threading.Lock()

    def train() -> None:
        with lock:
            pass

    with pytest.raises(SpecError, match=r"closure variable 'lock' is a lock"):
        tfyarn.run(train, num_worker=2)
    with pytest.raises(SpecError, match=r"cannot be called with these arguments"):
        tfyarn.run(lambda steps: steps, 1, 2, num_worker=2)
    with pytest.raises(SpecError, match=r"invalid num_worker"):
        tfyarn.run(lambda: None, num_worker=-1)
