"""``tfyarn submit|status|kill|scale|list|logs``: argv to :mod:`tfyarn.client` calls.

The options of ``submit`` are generated from ``conf/tfyarn-schema.yaml``, so
every option is also a config-file key of the same name and the two cannot
drift apart.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import signal
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from tfyarn import _surface
from tfyarn._flags import add_option, add_switch
from tfyarn._options import UNITS_HELP
from tfyarn.client import (
    config,
    connection,
    jobs,
    kerberos,
    livelogs,
    mlflow_run,
    narrator,
    request_view,
    submission,
    tasklogs,
)
from tfyarn.client.compile import to_skein
from tfyarn.client.follow import follow, wait
from tfyarn.client.progressview import LiveView
from tfyarn.client.scale import scale as scale_job
from tfyarn.errors import ClusterError, JobFailedError
from tfyarn.spec import JobSpec

# Script arguments that are tfyarn options too but also common in training
# scripts' own flags: passing them after the script is no sign of a mistake.
_COMMON_SCRIPT_FLAGS = ("config", "name", "env", "files", "python", "queue")

_SUBMIT_EPILOG = """\
exit codes: 0 the job SUCCEEDED (or --detach / --dry_run: it was accepted);
1 bad input, no cluster, or the job FAILED; 3 the job was KILLED;
130 interrupted (the job keeps running).

Options also come from conf/tfyarn.yaml (shipped defaults) and
~/.config/tfyarn/config.yaml (or --config FILE); the command line wins.

tfyarn's options go before SCRIPT: everything after it is the script's.

examples:
  tfyarn submit --num_worker 2 train.py --epochs 3
  tfyarn submit --num_ps 1 --num_worker 2 --legacy_flags tf1_train.py
  tfyarn submit --dry_run --num_ps 1 --num_worker 2 --worker_memory 1g train.py
  tfyarn submit --python_env auto --num_worker 2 train.py   # ship this venv
"""


def _on_command_line(
    handler: Callable[[argparse.Namespace], int], *, asks_yarn: bool = False
) -> Any:
    """Run ``handler`` so that its errors speak of flags, not keywords, skein's
    first-run notice is not printed, and a SIGTERM or SIGHUP ends it cleanly.
    ``asks_yarn``: first say so if no ResourceManager accepts connections (the
    command then waits for one, bounded)."""

    @functools.wraps(handler)
    def run(ns: argparse.Namespace) -> int:
        with _surface.command_line(), _quiet_skein_setup(), _ended_by_signals():
            if asks_yarn:
                notice = connection.unreachable_rm_notice()
                if notice:
                    print(f"tfyarn: {notice}", file=sys.stderr, flush=True)
            return handler(ns)

    return run


# skein's notice when it first creates its TLS credentials (~/.skein), printed
# as a raw UserWarning on a newcomer's first command: nothing to act on.
_SKEIN_FIRST_RUN = r"Skein global security credentials not found"


@contextlib.contextmanager
def _quiet_skein_setup() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_SKEIN_FIRST_RUN)
        yield


@contextlib.contextmanager
def _ended_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP (a closed terminal) end the command with 128 + N
    through SystemExit, so that ``finally`` blocks and atexit handlers run: the
    temporary copy of the Hadoop configuration is removed, the skein driver
    stopped. Their default action ends the process on the spot."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread
        return

    def end(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    caught = (signal.SIGTERM, signal.SIGHUP)
    before = {sig: signal.signal(sig, end) for sig in caught}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def add_commands(subparsers: Any) -> None:
    """Add the job commands to the ``tfyarn`` parser."""
    _add_submit(subparsers)

    p = subparsers.add_parser(
        "status",
        help="show a job's state, diagnostics and tasks",
        description="Show a job's YARN state, final status, diagnostics and "
        "the master's per-task table: live while the job runs, from the "
        "final record the master kept on HDFS once it ended.",
    )
    p.add_argument("app_id", help="application id (application_...)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--follow",
        action="store_true",
        help="follow the job to its end, like `tfyarn submit` does "
        "(exit code: 0 SUCCEEDED, 1 FAILED, 3 KILLED)",
    )
    p.set_defaults(func=_on_command_line(_status, asks_yarn=True))

    p = subparsers.add_parser(
        "kill",
        help="kill a job",
        description="Kill a job: every script gets SIGTERM and --stop_grace "
        "to checkpoint, then the application is killed.",
    )
    p.add_argument("app_id", help="application id (application_...)")
    add_option(
        p,
        "--graceful",
        action="store_true",
        help="send a stop notice first: scripts that call tfyarn.should_stop() "
        "(or use tfyarn.termination_config()) save at their current step before "
        "any signal; a resubmission resumes there",
    )
    p.set_defaults(func=_on_command_line(_kill, asks_yarn=True))

    p = subparsers.add_parser(
        "scale",
        help="change a running job's number of workers",
        description="Change a running job's number of workers: to grow, the new "
        "workers' containers start first and stand by while the job trains on; "
        "then every task gets a stop notice (scripts that call "
        "tfyarn.should_stop() save at their current step) and the next "
        "generation starts with N workers. ps, chief and evaluator counts stay.",
    )
    p.add_argument("app_id", help="application id (application_...)")
    # Not add_option: its hidden dashed alias would be required too.
    p.add_argument(
        "--num_worker", type=int, required=True, metavar="N", help="workers from now on"
    )
    p.set_defaults(func=_on_command_line(_scale, asks_yarn=True))

    p = subparsers.add_parser(
        "list",
        help="list tfyarn jobs",
        description="List tfyarn jobs (YARN applications tagged 'tfyarn'): "
        "YARN's view only; `tfyarn status APP` shows one job's tasks, "
        "attempts and restarts, also after it ended.",
    )
    p.add_argument("--all", action="store_true", help="include ended jobs")
    p.set_defaults(func=_on_command_line(_list, asks_yarn=True))

    p = subparsers.add_parser(
        "logs",
        help="show a job's logs, per task",
        description="Show a job's logs (via `yarn logs -applicationId`), one "
        "section per task and log file, the master first.",
    )
    p.add_argument("app_id", help="application id (application_...)")
    p.add_argument("--task", help="only this task (worker:1), role (ps) or 'master'")
    add_option(
        p,
        "--yarn_files",
        action="store_true",
        help="also YARN's own files (launch_container.sh, prelaunch.err, ...)",
    )
    p.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="follow one running task's output (--task ROLE:INDEX) until the job ends",
    )
    p.set_defaults(func=_on_command_line(_logs_cmd, asks_yarn=True))


def _add_submit(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "submit",
        help="submit a TensorFlow job and follow it",
        description="Submit SCRIPT as a distributed TensorFlow job on YARN and, "
        "unless --detach, follow it to the end.",
        epilog=_SUBMIT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--config", metavar="FILE", help="a YAML file of options")
    add_option(
        p,
        "--dry_run",
        action="store_true",
        help="check the job (options, files, cluster resources) and print it; submit nothing",
    )
    add_job_options(p)
    p.add_argument("script", help="the Python program every task runs")
    script_args = p.add_argument(
        "args",
        nargs=argparse.REMAINDER,
        help="the program's arguments (may use {job_name}, {task_index}, "
        "{ps_hosts}, {worker_hosts}, {chief_host}); tfyarn's options go before "
        "SCRIPT",
    )
    # argparse calls a REMAINDER positional required: without a script the
    # usage error would list the script's arguments as missing too.
    script_args.required = False
    p.set_defaults(submit_flags=_tfyarn_flags(p))
    p.set_defaults(func=_on_command_line(_submit, asks_yarn=True))


def add_job_options(
    p: argparse.ArgumentParser, skip: frozenset[str] = frozenset()
) -> None:
    """Every job option of ``conf/tfyarn-schema.yaml`` as a flag (but ``skip``)."""
    groups = {
        "layout": p.add_argument_group("layout"),
        "resources": p.add_argument_group(
            # The parser keeps descriptions as written (RawDescription): wrap here.
            "resources per task",
            textwrap.fill(f"memory: {UNITS_HELP}.", 78),
        ),
        "docker": p.add_argument_group(
            "Docker (YARN's Docker runtime; see README: Docker and GPUs)"
        ),
        "job": p.add_argument_group("job"),
    }
    for key, rule in config.schema().items():
        if key in skip:
            continue
        kind = rule["type"]
        group = groups[
            "layout"
            if key.startswith("num_")
            else "resources"
            if key.rsplit("_", 1)[-1] in ("memory", "vcores", "gpus")
            else "docker"
            if "docker" in key
            else "job"
        ]
        flag = f"--{key}"
        helptext = rule.get("help", "")
        if kind == "bool":
            add_switch(group, flag, help=helptext)
        elif kind == "mapping":
            add_option(
                group, flag, action="append", metavar="K=V", default=None, help=helptext
            )
        elif kind == "list":
            add_option(
                group,
                flag,
                action="append",
                metavar={
                    "preimport": "MODULE",
                    "retry_exit_codes": "CODE",
                    "hdfs_namenodes": "URL",
                    "docker_mount": "SRC:DST[:ro|rw]",
                }.get(key, "PATH"),
                default=None,
                help=helptext + " Repeatable or comma-separated.",
            )
            if key == "preimport":
                add_option(
                    group,
                    "--no_preimport",
                    dest=key,
                    action="store_const",
                    const=[],
                    help="import nothing early: start each script after formation",
                )
        else:
            metavar = {"int": "N", "number": "SECONDS", "memory": "MEM"}.get(
                kind, "IMAGE" if key.endswith("docker_image") else "VALUE"
            )
            add_option(group, flag, metavar=metavar, default=None, help=helptext)


def _options(ns: argparse.Namespace) -> dict[str, Any]:
    out = {}
    for key in config.schema():
        value = getattr(ns, key, None)
        if value is not None:
            if isinstance(value, list) and key == "files":
                value = [f for item in value for f in item.split(",") if f.strip()]
            out[key] = value
    return out


def _tfyarn_flags(parser: argparse.ArgumentParser) -> frozenset[str]:
    """``submit``'s own flags a script would rarely take (see _COMMON_SCRIPT_FLAGS)."""
    common = {f"--{name}" for name in _COMMON_SCRIPT_FLAGS}
    return frozenset(
        flag
        for action in parser._actions
        for flag in action.option_strings
        if flag.startswith("--") and flag != "--help" and flag not in common
    )


def _warn_misplaced_options(ns: argparse.Namespace) -> None:
    """One line on stderr when the script's arguments look like tfyarn's options.

    Like spark-submit, everything after SCRIPT goes to the script, so
    ``tfyarn submit train.py --num_worker 2`` runs one worker and hands the
    script ``--num_worker 2``. That may be meant, so it is a warning.
    """
    flags = ns.submit_flags
    found = [a.split("=", 1)[0] for a in ns.args if a.split("=", 1)[0] in flags]
    if found:
        names = ", ".join(dict.fromkeys(found))
        print(
            f"Warning: {names} after {ns.script} goes to the script, not to "
            f"tfyarn (options after the script are the script's); to set "
            f"tfyarn's option, put it before the script: "
            f"tfyarn submit {found[0]} ... {ns.script}",
            file=sys.stderr,
            flush=True,
        )


def _checked(ns: argparse.Namespace) -> tuple[JobSpec, config.ClientOptions]:
    """The job and the client's options, checked without YARN.

    The one validation of a submit's input, shared by ``--dry_run`` and a real
    submit, so both accept and refuse the same things.
    """
    _warn_misplaced_options(ns)
    options = _options(ns)
    own = config.client_options(config.load(ns.config, options))
    spec = submission.check(
        ns.script, args=ns.args, config_file=ns.config, cluster=False, **options
    )
    mlflow_run.settings(own)  # --mlflow without MLflow installed: refused here
    return spec, own


def _submit(ns: argparse.Namespace) -> int:
    # Refuse bad input before paying for a YARN connection.
    spec, own = _checked(ns)
    # The checks of hdfs:// files run in this process, through GSSAPI.
    kerberos.use_keytab_for_hdfs(own.login)
    if ns.dry_run:
        return _dry_run(spec, own)

    with connection.login_as(own.login), connection.connect() as yarn:
        submission.check_cluster(yarn, spec, python_given=own.python_given)
        tracker = mlflow_run.start(
            mlflow_run.settings(own), spec, source=spec.script, script_args=spec.args
        )
        app_id = submission.submit_spec(
            yarn, spec, compression=own.python_env_compression
        )
        print(submitted_text(app_id, next_steps(app_id)), flush=True)
        tracker.submitted(app_id)
        if own.detach:
            tracker.detached(app_id)
            return 0
        view = LiveView(sys.stdout)

        def event(line: str) -> None:
            view.event(line)
            tracker.event(line)

        try:
            status = follow(
                yarn,
                app_id,
                on_event=event,
                on_progress=view.progress,
                on_status=tracker.status,
                on_link=tracker.tracking,
                spec=spec,
                poll_interval=own.poll_interval,
            )
            tracker.finished(status.outcome, status.diagnostics, status.tracking_url)
        except JobFailedError as failed:
            tracker.finished(failed.final_status, failed.diagnostics)
            raise
        except KeyboardInterrupt:
            view.close()
            tracker.detached(app_id)
            print(
                f"\nStopped following {app_id}; the job keeps running.\n"
                f"  follow it again: tfyarn status --follow {app_id}\n"
                f"  kill it:         tfyarn kill {app_id}",
                file=sys.stderr,
            )
            return 130
        finally:
            view.close()
    return 0


def next_steps(app_id: str) -> list[str]:
    """Commands a user may want next, for a job just submitted."""
    return [
        f"tfyarn status {app_id}",
        f"tfyarn logs {app_id} [--task worker:0]",
        f"tfyarn kill {app_id}",
        f"yarn logs -applicationId {app_id}",
    ]


def submitted_text(app_id: str, steps: list[str]) -> str:
    """``Submitted APP`` and, when there are any, the next steps under ``Next:``."""
    lines = [f"Submitted {app_id}"]
    if steps:
        lines += ["Next:", *(f"  {step}" for step in steps)]
    return "\n".join(lines)


def _dry_run(spec: JobSpec, own: config.ClientOptions) -> int:
    try:
        with connection.login_as(own.login), connection.connect() as yarn:
            submission.check_cluster(yarn, spec, python_given=own.python_given)
        fits = "every task fits on the cluster's largest node"
    except ClusterError as exc:
        fits = f"cluster resources NOT checked ({exc})"
    print(spec.to_yaml(), end="")
    print()
    # As YAML comments: what precedes "OK:" stays the job's YAML, readable back.
    for line in request_view.render(spec, to_skein(spec)).splitlines():
        print(f"# {line}")
    print(f"OK: the job is valid; {fits}. Nothing was submitted.")
    return 0


def _status(ns: argparse.Namespace) -> int:
    if ns.follow:
        view = LiveView(sys.stdout)
        try:
            wait(ns.app_id, on_event=view.event, on_progress=view.progress)
        except KeyboardInterrupt:
            view.close()
            print(
                f"\nStopped following {ns.app_id}; the job keeps running.",
                file=sys.stderr,
            )
            return 130
        finally:
            view.close()
        return 0
    st = jobs.status(ns.app_id)
    if ns.json:
        print(json.dumps(st.to_dict(), indent=2, default=str))
        return 0
    print(f"application:  {st.app_id} ({st.name})")
    print(f"state:        {st.state}")
    print(f"final status: {st.final_status}")
    print(f"progress:     {st.progress:.0%}")
    if st.tracking_url:
        print(f"tracking url: {st.tracking_url}")
    if st.diagnostics.strip():
        print(
            "diagnostics:  " + st.diagnostics.strip().replace("\n", "\n              ")
        )
    if st.record_missing:
        print(f"record:       none: {st.record_missing}")
    if st.master:
        m = st.master
        formed = "yes" if m.cluster_formed_at else "not yet"
        final = " (final record)" if st.record else ""
        resized = f", resizes {m.resizes}" if m.resizes else ""
        print(
            f"master:       phase {m.phase.value}, generation {m.generation}, "
            f"restarts {m.restarts}{resized}, cluster formed: {formed}{final}"
        )
        if m.stop_notice:
            print(f"notice:       {m.stop_notice}")
        if st.record:
            print(f"record:       {st.record}, kept by the master as the job ended")
        for line in _token_lines(m):
            print(line)
        counts = narrator.role_counts(m.tasks)
        if counts:
            print("containers:   " + narrator.format_counts(counts))
        print()
        print(narrator.task_table(m))
        for line in [*narrator.gpu_lines(m), *narrator.restart_lines(m)]:
            print(line)
    return 0


def _token_lines(m: Any) -> list[str]:
    """The job's HDFS delegation tokens and warnings, for ``tfyarn status``."""
    lines = []
    tokens = m.hdfs_tokens or {}
    if tokens.get("ends"):
        until = time.strftime("%H:%M:%S UTC", time.gmtime(tokens["ends"]))
        how = (
            f"refreshed {tokens.get('refreshes', 0)} time(s) from the keytab of "
            f"{tokens['refreshed_by']}"
            if tokens.get("refreshed_by")
            else "not refreshed (no keytab)"
        )
        lines.append(f"hdfs tokens:  valid until {until}, {how}")
        if tokens.get("last_error"):
            lines.append(f"              last refresh failed: {tokens['last_error']}")
    lines += [f"warning:      {w}" for w in m.warnings]
    return lines


def _kill(ns: argparse.Namespace) -> int:
    print(jobs.kill(ns.app_id, graceful=ns.graceful).summary())
    return 0


def _scale(ns: argparse.Namespace) -> int:
    print(scale_job(ns.app_id, num_worker=ns.num_worker).summary())
    return 0


def _list(ns: argparse.Namespace) -> int:
    found = jobs.list_jobs(all_states=ns.all)
    if not found:
        print(
            "no tfyarn jobs" + ("" if ns.all else " running (--all shows ended ones)")
        )
        return 0
    rows = [("APPLICATION", "NAME", "STATE", "FINAL", "PROGRESS", "QUEUE", "STARTED")]
    for j in found:
        started = j.started.strftime("%Y-%m-%d %H:%M:%S") if j.started else "-"
        rows.append(
            (
                j.app_id,
                j.name,
                j.state,
                j.final_status,
                f"{j.progress:.0%}",
                j.queue,
                started,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def _logs_cmd(ns: argparse.Namespace) -> int:
    if ns.follow:
        livelogs.parse_task(ns.task)  # refuse a role or no task before connecting

        def write(text: str) -> None:
            sys.stdout.write(text)
            sys.stdout.flush()

        try:
            livelogs.follow_task(ns.app_id, ns.task, write=write)
        except KeyboardInterrupt:
            return 130
        return 0
    # Before `yarn logs`, which takes ~20 s to fail without a Kerberos ticket;
    # no cluster at all is left for tasklogs to say in its own words.
    try:
        connection.check_login()
    except ClusterError:
        pass
    entries = tasklogs.logs(ns.app_id, task=ns.task, yarn_files=ns.yarn_files)
    print(tasklogs.render(entries), end="")
    return 0
