"""Reading a failed task's stderr tail: the error line, then the context."""

from __future__ import annotations

from tfyarn.contract.failure import error_first, error_line

TRACEBACK = """\
I0000 00:00:17.1 18095 cpu_feature_guard.cc:227] This TensorFlow binary ...
Traceback (most recent call last):
  File "/data/nm-local/usercache/root/appcache/app/container/train.py", line 40, in <module>
    main()
  File "/data/nm-local/usercache/root/appcache/app/container/train.py", line 31, in main
    batch = dataset.batch(args.batch_size // 0)
                          ~~~~~~~~~~~~~~~~^^~~
ZeroDivisionError: integer division or modulo by zero
"""


def test_the_exception_line_of_a_traceback() -> None:
    assert error_line(TRACEBACK) == (
        "ZeroDivisionError: integer division or modulo by zero"
    )


def test_dotted_tensorflow_errors_and_chained_tracebacks() -> None:
    chained = (
        "Traceback (most recent call last):\n  File 'a.py', line 1\n"
        "KeyError: 'x'\n\nDuring handling of the above exception, another "
        "exception occurred:\n\nTraceback (most recent call last):\n"
        "  File 'a.py', line 3\n"
        "tensorflow.python.framework.errors_impl.NotFoundError: hdfs:///x; "
        "No such file\n"
    )
    assert error_line(chained).startswith("tensorflow.python.framework.errors_impl")


def test_without_a_traceback_the_last_meaningful_line() -> None:
    assert error_line("loading\nfatal: cannot open /data/x\n") == (
        "fatal: cannot open /data/x"
    )
    assert error_line("") == ""
    assert error_line("   ^^^^\n") == ""


def test_diagnostics_put_the_error_first_and_drop_the_markers() -> None:
    text = error_first(TRACEBACK)
    first, *rest = text.splitlines()
    assert first == "ZeroDivisionError: integer division or modulo by zero"
    assert not any(set(line.strip()) <= set("~^") for line in rest)
    assert "line 31, in main" in text


def test_a_long_tail_keeps_its_last_lines() -> None:
    tail = "\n".join(f"step {i}" for i in range(100)) + "\nRuntimeError: boom\n"
    lines = error_first(tail, lines=5).splitlines()
    assert lines[0] == "RuntimeError: boom"
    # Five lines in all; the error that ends the tail is not said twice.
    assert lines[1:] == [f"  step {i}" for i in range(96, 100)]


def test_an_error_line_before_the_end_stays_in_the_context_too() -> None:
    tail = "ValueError: bad shape\nflushing logs\n"
    assert error_first(tail).splitlines() == [
        "ValueError: bad shape",
        "  ValueError: bad shape",
        "  flushing logs",
    ]


def test_a_tail_cut_inside_a_traceback_still_leads_with_the_error() -> None:
    # The runtime keeps only the end of stderr: here mostly ^^^^ markers.
    wall = "\n".join(["    y = f(x)", "        ^^^^"] * 40)
    tail = wall[-300:] + "\nKeyError: 'label'\n"
    text = error_first(tail)
    assert text.splitlines()[0] == "KeyError: 'label'"
    assert "^" not in text
