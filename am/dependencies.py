"""The master's first step: can its Python import what the master needs?

``--python /usr/bin/python3`` (a node's system Python, the usual first try on
a real cluster) has none of tfyarn's dependencies. Left alone, the master dies
on its first import with a traceback only its log shows, YARN starts a second
attempt that dies the same way, and the user reads "Application driver failed
with exit code 1". Instead :func:`require`, run before any other import,
names the interpreter (path, version), the node and the modules it lacks, ends
the application with that diagnostic for good (an interpreter that lacks a
module lacks it on the next attempt too), and exits with
:data:`EXIT_MISSING_MODULES`.

Standard library only, and syntax Python 3.6 compiles (no ``from __future__
import annotations``; annotations are strings): it runs exactly where tfyarn
and its dependencies may be missing, and where the interpreter may be older
than tfyarn supports (a node's system Python).
"""

import base64
import contextlib
import importlib
import importlib.util
import json
import os
import socket
import sys

# Modules the master imports: (import name, name shown, the distribution that
# brings it). The client checks a local --python for the same ones
# (tfyarn.client.preflight.REQUIRED_MODULES).
MODULES = (
    ("grpc", "grpc", "grpcio"),
    ("grpc_health.v1.health", "grpc_health", "grpcio-health-checking"),
    ("google.protobuf", "google.protobuf", "protobuf"),
    ("yaml", "yaml", "PyYAML"),
    ("prometheus_client", "prometheus_client", "prometheus-client"),
    ("tfyarn.spec", "tfyarn", "tfyarn"),
)
# Located, not imported: the master imports it later its own way, with the
# standard library's distutils (tfyarn.contract.skein_import).
LOCATED_ONLY = (("skein", "skein", "skein"),)
# tfyarn's requires-python (pyproject.toml).
MIN_PYTHON = (3, 10)
# sysexits.h's EX_CONFIG: the interpreter, a configuration choice, is wrong.
# tfyarn.contract.exit_codes explains it after "Application driver failed".
EXIT_MISSING_MODULES = 78
# The job spec's variable (tfyarn.contract.env.JOB): what the user asked for.
JOB_VARIABLE = "TFYARN_JOB"


def require() -> None:
    """Return if the master can run here; else end the application and exit.

    The diagnostic goes to stderr (the master's log) and, through
    :func:`end_application`, into the application's final diagnostics, which
    ``tfyarn submit`` and ``tfyarn status`` print.
    """
    missing = missing_modules()
    old = sys.version_info[:2] < MIN_PYTHON
    if not missing and not old:
        return
    text = diagnostic(
        missing,
        python=sys.executable,
        version=".".join(str(n) for n in sys.version_info[:3]),
        node=os.environ.get("NM_HOST") or socket.gethostname(),
        asked=_asked(os.environ.get(JOB_VARIABLE, "")),
        old=old,
    )
    print(text, file=sys.stderr, flush=True)
    end_application(text)
    sys.exit(EXIT_MISSING_MODULES)


def missing_modules(
    modules: "tuple[tuple[str, str, str], ...]" = MODULES,
    located: "tuple[tuple[str, str, str], ...]" = LOCATED_ONLY,
) -> "list[tuple[str, str, str]]":
    """``(module, distribution, why)`` of each module that does not import.

    ``why`` is the import error's message: a module that is there but broken
    (built for another Python) is named too, with its error.
    """
    found = []
    for name, shown, distribution in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 -- any failure is the answer
            found.append((_missing_name(shown, exc), distribution, _why(exc)))
    for name, shown, distribution in located:
        try:
            spec = importlib.util.find_spec(name)
        except Exception as exc:  # noqa: BLE001
            found.append((shown, distribution, _why(exc)))
            continue
        if spec is None:
            found.append((shown, distribution, f"No module named {name!r}"))
    return found


def diagnostic(
    missing: "list[tuple[str, str, str]]",
    *,
    python: str,
    version: str,
    node: str,
    asked: "tuple[str, str]" = ("", ""),
    old: bool = False,
) -> str:
    """What is wrong and what to pass instead, in one paragraph.

    ``asked``: the job's ``(python, python_env)``, to speak of the option
    the user gave.
    """
    given_python, python_env = asked
    if python_env:
        who = (
            f"the Python shipped with --python_env {python_env} ({python}, "
            f"Python {version})"
        )
    else:
        who = f"the Python {given_python or python} (Python {version})"
    if python_env:
        fix = (
            "Install tfyarn into that environment (pip install tfyarn brings "
            "every module the master needs) and submit again, or give "
            "--python_env an environment that has tfyarn installed."
        )
    else:
        fix = (
            "tfyarn is not installed for that interpreter. Give --python the "
            "path of a Python that has tfyarn installed, at that path on every "
            "node, or ship one with the job: --python_env auto (the client's "
            "virtualenv or conda environment), or --python_env with a "
            "virtualenv, conda environment or archive of one."
        )
    return (
        f"tfyarn: the application master cannot start on node {node}: {who}: "
        f"{problems(missing, old)}. {fix}"
    )


def problems(missing: "list[tuple[str, str, str]]", old: bool) -> str:
    """What is wrong with this interpreter, as the master and the client say it."""
    found = []
    if old:
        wanted = ".".join(str(n) for n in MIN_PYTHON)
        found.append(f"it is older than the Python {wanted} tfyarn needs")
    if missing:
        names = ", ".join(dict.fromkeys(name for name, _, _ in missing))
        found.append(
            f"it cannot import {names} ({missing[0][2]}), which the master needs"
        )
    return "; ".join(found)


def report() -> "dict[str, object]":
    """This interpreter's version and :func:`problems` ("" when it can run the master).

    The client runs this file with a local ``--python`` (``--report``) before
    submitting, so the master's own check is the only list of what it needs.
    """
    missing = missing_modules()
    old = sys.version_info[:2] < MIN_PYTHON
    return {
        "version": ".".join(str(n) for n in sys.version_info[:3]),
        "problems": problems(missing, old),
    }


def end_application(diagnostics: str) -> None:
    """Fail the application with ``diagnostics``, without a further attempt.

    First YARN's own unregistration (am/unregister.py, through skein's JVM
    classpath), which ends the application whatever attempt this is; then,
    where skein imports, skein's shutdown, so that its application master
    stops with the same words (on YARN's last attempt it is the one that
    counts). Each step is best effort: the exit code and the log remain.
    """
    try:
        from am import unregister

        unregister.unregister("FAILED", diagnostics)
    except Exception as exc:  # noqa: BLE001 -- no JDK, no token: say so, go on
        print(
            f"tfyarn: could not unregister the application ({exc}); YARN may "
            "start another master attempt, which ends the same way",
            file=sys.stderr,
            flush=True,
        )
    # skein may be among the missing modules.
    with contextlib.suppress(Exception):
        import skein

        skein.ApplicationClient.from_current().shutdown("FAILED", diagnostics)


def _asked(job: str) -> "tuple[str, str]":
    """The job's ``python`` and ``python_env`` from its base64 JSON spec."""
    try:
        spec = json.loads(base64.b64decode(job).decode())
        return str(spec.get("python") or ""), str(spec.get("python_env") or "")
    except Exception:  # noqa: BLE001 -- the message goes on without them
        return "", ""


def _missing_name(shown: str, exc: BaseException) -> str:
    """``shown``, or the dependency of it that was missing (``grpc`` when
    ``grpc_health`` imports it)."""
    missing = str(getattr(exc, "name", None) or "")
    if not isinstance(exc, ImportError) or not missing:
        return shown
    related = (
        missing == shown
        or shown.startswith(missing + ".")
        or missing.startswith(shown + ".")
    )
    return shown if related else missing


def _why(exc: BaseException) -> str:
    if type(exc).__name__ == "ModuleNotFoundError":
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


if __name__ == "__main__" and sys.argv[1:] == ["--report"]:
    sys.stdout.write(json.dumps(report()) + "\n")
