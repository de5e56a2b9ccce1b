"""Checking and submitting a job: options to a validated :class:`JobSpec`, to YARN."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from tfyarn.client import config, master_code, preflight, pyenv
from tfyarn.client.compile import to_skein
from tfyarn.client.connection import last_login, login_as, opened, yarn_errors
from tfyarn.client.fit import check_fits
from tfyarn.client.follow import follow as follow_job
from tfyarn.client.keytab import ship_keytab
from tfyarn.errors import JobFailedError
from tfyarn.spec import JobSpec


def check(
    script: str,
    *,
    args: Sequence[str] = (),
    config_file: str | os.PathLike[str] | None = None,
    client: Any | None = None,
    cluster: bool = True,
    **options: Any,
) -> JobSpec:
    """Build and validate a job without submitting it.

    Checks every option against the schema, the layout (counts, a PS job
    without workers), that the script and local files exist, that a
    ``python`` on this machine imports tfyarn's modules and, with
    ``cluster=True``, that every task fits on the largest running node, that
    the queue takes applications and that ``hdfs://`` files exist.

    Parameters
    ----------
    script
        The Python program every task runs.
    args
        Its arguments (``{job_name}``-style placeholders allowed).
    config_file
        A YAML file of options; default ``~/.config/tfyarn/config.yaml``.
    client
        An open :func:`connect` client to reuse.
    cluster
        Also ask YARN for its nodes' resources.
    **options
        Any key of ``conf/tfyarn.yaml`` (``num_ps=1``, ``worker_memory="1 GiB"``).

    Returns
    -------
    JobSpec
        The validated job.

    Raises
    ------
    SpecError
        What is wrong and what would be right.
    TfyarnError
        ``cluster=True`` and no cluster can be reached.
    HdfsError
        ``cluster=True``, an ``hdfs://`` file, and HDFS cannot be asked.

    Examples
    --------
    >>> import tfyarn
    >>> tfyarn.check("train.py", num_ps=1, num_worker=2,  # doctest: +ELLIPSIS
    ...              cluster=False)
    JobSpec(script='train.py', ...)
    """
    cfg = config.load(config_file, options)
    spec = config.to_spec(script, tuple(args), cfg).validate()
    if spec.python_env:
        pyenv.parse(spec.python_env)  # exists and is a kind tfyarn can ship
    elif cfg["python"]:
        preflight.check_interpreter(spec.python, env=spec.env)
    if cluster:
        login = config.client_options(cfg).login
        with login_as(login), opened(client) as yarn:
            check_cluster(yarn, spec, python_given=bool(cfg["python"]))
    return spec


def check_cluster(
    yarn: Any, spec: JobSpec, *, python_given: bool | None = None
) -> None:
    """What YARN would refuse about a validated job, asked on an open client.

    Every task fits on the largest running node it may use (its node
    label's; the master's on an unlabelled one), the queue exists, runs and
    is a leaf, every node label asked for is on a running node and usable in
    the queue, every ``hdfs://`` file exists, and the nodes can have the
    job's Python (``python_given``: ``--python`` was set, even to this
    client's interpreter; default: it differs from it): the checks of a real
    submit and of ``--dry_run`` alike.

    Raises
    ------
    SpecError
        What YARN would refuse, and what would be right.
    TfyarnError
        YARN (or HDFS) could not be asked.
    """
    with yarn_errors():
        running = yarn.get_nodes(states=["RUNNING"])
    nodes = _resources(running)
    check_fits(
        spec,
        nodes,
        labels={n.id: set(getattr(n, "labels", None) or ()) for n in running},
        default_label=preflight.queue_default_label(yarn, spec.queue),
    )
    if python_given is None:
        python_given = spec.python != sys.executable
    pyenv.choose(
        python_env=spec.python_env,
        python_given=python_given,
        node_hosts=[node.rsplit(":", 1)[0] for node in nodes],
    )
    preflight.check_queue(yarn, spec.queue)
    preflight.check_node_labels(yarn, spec, running)
    remote_env = [spec.python_env] if "://" in spec.python_env else []
    preflight.check_remote_files([spec.script, *spec.files, *remote_env])


def _resources(nodes: Any) -> dict[str, tuple[int, int, int]]:
    return {
        n.id: (
            int(n.total_resources.memory),
            int(n.total_resources.vcores),
            int(getattr(n.total_resources, "gpus", 0) or 0),
        )
        for n in nodes
    }


def submit(
    script: str,
    *,
    args: Sequence[str] = (),
    config_file: str | os.PathLike[str] | None = None,
    wait: bool = False,
    on_event: Callable[[str], None] | None = None,
    client: Any | None = None,
    follow: bool = False,
    **options: Any,
) -> str:
    """Submit a TensorFlow job to YARN.

    Validates everything :func:`check` does first; nothing is submitted when a
    check fails.

    Parameters
    ----------
    script
        The Python program every task runs (a local path).
    args
        Its arguments. Placeholders ``{job_name}``, ``{task_index}``,
        ``{ps_hosts}``, ``{worker_hosts}`` and ``{chief_host}`` are filled in
        each task.
    config_file
        A YAML file of options; default ``~/.config/tfyarn/config.yaml``.
    wait
        Follow the job to its end (see :func:`wait`) before returning, polling
        every ``poll_interval`` seconds (a client option of the config).
    on_event
        With ``wait=True``: called with each progress line.
    follow
        ``wait=True`` with the live view: in a Jupyter notebook one display
        updated in place, on a terminal the command line's view. (Inside
        Jupyter ``wait=True`` shows it too, unless ``on_event`` is given.)
    client
        An open :func:`connect` client to reuse.
    **options
        Any key of ``conf/tfyarn.yaml``: ``num_ps``, ``num_worker``,
        ``num_chief``, ``num_evaluator``, ``<role>_memory`` / ``_vcores`` /
        ``_gpus``, ``name``, ``queue``, ``env`` (a dict), ``files``,
        ``python``, ``legacy_flags``, ``max_restarts``,
        ``registration_timeout``, ... (``detach`` is the command line's: here
        ``wait`` decides).

    Returns
    -------
    str
        The YARN application id.

    Raises
    ------
    SpecError
        An invalid option or a request no node can grant.
    TfyarnError
        No cluster, or YARN refused the application.
    JobFailedError
        With ``wait=True``: the job ended FAILED or KILLED.

    Examples
    --------
    >>> app_id = tfyarn.submit("train.py", num_ps=1, num_worker=2,   # doctest: +SKIP
    ...                        worker_memory="1 GiB", env={"EPOCHS": "3"})
    >>> tfyarn.wait(app_id).final_status                            # doctest: +SKIP
    'SUCCEEDED'
    """
    from tfyarn.client import mlflow_run, notebook_view

    cfg = config.load(config_file, options)
    own = config.client_options(cfg)
    tracking = mlflow_run.settings(own)
    poll_interval = own.poll_interval
    with login_as(own.login), opened(client) as yarn:
        spec = check(script, args=args, config_file=config_file, client=yarn, **options)
        tracker = mlflow_run.start(
            tracking, spec, source=spec.script, script_args=spec.args
        )
        app_id = submit_spec(yarn, spec, compression=own.python_env_compression)
        tracker.submitted(app_id)
        if not (wait or follow):
            tracker.detached(app_id)
            return app_id
        view = notebook_view.for_follow(on_event, live=follow, title=spec.name)
        view.submitted(app_id)
        try:
            status = follow_job(
                yarn,
                app_id,
                on_event=fan_out(view.event, tracker.event),
                on_progress=view.progress,
                on_status=fan_out(view.status, tracker.status),
                on_link=fan_out(view.tracking, tracker.tracking),
                spec=spec,
                poll_interval=poll_interval,
            )
        except KeyboardInterrupt:
            view.close()
            tracker.detached(app_id)
            print(
                f"\nStopped following {app_id}; the job keeps running.\n"
                f"  follow it again: tfyarn.wait({app_id!r})\n"
                f"  kill it:         tfyarn.kill({app_id!r})",
                file=sys.stderr,
                flush=True,
            )
            raise
        except JobFailedError as failed:
            view.finished(failed.final_status, failed.diagnostics)
            tracker.finished(failed.final_status, failed.diagnostics)
            raise
        view.finished(status.outcome, status.diagnostics)
        tracker.finished(status.outcome, status.diagnostics, status.tracking_url)
    return app_id


def fan_out(*calls: Callable[[Any], None]) -> Callable[[Any], None]:
    """One callback that calls each of ``calls`` in turn (a view and an MLflow run)."""

    def call(value: Any) -> None:
        for c in calls:
            c(value)

    return call


def submit_spec(yarn: Any, spec: JobSpec, *, compression: int = 1) -> str:
    """Submit a validated job on an open client; its application id.

    The master's code comes from the user's HDFS cache
    (:mod:`tfyarn.client.master_code`), uploaded there once per version.
    With ``python_env``, the environment's archives are packed and uploaded
    first unless the HDFS cache has them (:func:`tfyarn.client.pyenv.ship`).
    A keytab login on a secure cluster ships the keytab to the master
    (:func:`tfyarn.client.keytab.ship_keytab`), which keeps the job's HDFS
    tokens fresh with it.
    """
    interpreter = (
        pyenv.ship(spec.python_env, say=_say, level=compression)
        if spec.python_env
        else None
    )
    app_spec = to_skein(
        spec, am_source=master_code.archive_source(), interpreter=interpreter
    )
    ship_keytab(app_spec, last_login())
    with yarn_errors():
        return str(yarn.submit(app_spec))


def _say(message: str) -> None:
    # Packing a big environment takes minutes: say what is going on.
    print(f"tfyarn: {message}", file=sys.stderr, flush=True)
