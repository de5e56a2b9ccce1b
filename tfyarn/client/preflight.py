"""What YARN would refuse at submission, or the job would die of, found before.

A refused submission costs an upload of every file and comes back as one of
skein's driver messages; a wrong queue or a missing ``hdfs://`` file is found
here instead, by the same checks ``tfyarn submit --dry_run`` runs, with a
message naming the queue or file and what would be right. So is a
``--python`` on this machine that lacks tfyarn's modules: the master would
die on its first import, on a node, minutes later.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from collections.abc import Iterable, Mapping
from typing import Any

from tfyarn import _paths
from tfyarn.client.connection import yarn_errors
from tfyarn.errors import SpecError
from tfyarn.spec import ROLES, JobSpec, Role

log = logging.getLogger("tfyarn.client")

# Importing grpc, skein and tfyarn takes a second; a hung interpreter
# (a dead NFS mount) must not hold up the submit.
PROBE_TIMEOUT = 20.0
# The client's own settings the containers do not get (YARN starts them with
# the NodeManager's environment and the job's --env).
_CLIENT_ONLY = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "PYTHONSAFEPATH")


def check_interpreter(python: str, *, env: Mapping[str, str] | None = None) -> None:
    """Refuse a ``--python`` on this machine that cannot run tfyarn.

    Only an absolute path that exists here is checked (nodes run the
    interpreter at that path; another name or path is left to them): it is
    run once, bounded by :data:`PROBE_TIMEOUT`, without this client's
    ``PYTHONPATH`` but with the job's ``env``, and from ``/``, on the
    master's own check (``am/dependencies.py --report``): what the master
    needs is listed there alone.

    Raises
    ------
    SpecError
        Naming the interpreter, its version, the modules it lacks and the
        options that fix it (``--python`` with tfyarn, or ``--python_env``).
    """
    if not os.path.isabs(python) or not os.path.exists(python):
        return
    probe_env = {k: v for k, v in os.environ.items() if k not in _CLIENT_ONLY}
    probe_env.update(env or {})
    try:
        done = subprocess.run(
            [python, str(_paths.am_dir() / "dependencies.py"), "--report"],
            env=probe_env,
            cwd="/",
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        log.warning(
            "--python %s did not answer within %.0f s; its modules were not checked",
            python,
            PROBE_TIMEOUT,
        )
        return
    except OSError as exc:
        raise SpecError(
            f"--python {python} cannot be run on this machine ({exc.strerror}); "
            "give the path of a Python interpreter that has tfyarn installed"
        ) from None
    try:
        found = json.loads(done.stdout.strip().splitlines()[-1])
        version, problems = str(found["version"]), str(found["problems"])
    except (ValueError, IndexError, KeyError, TypeError):
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        if "SyntaxError" in done.stderr:
            said = "too old to compile tfyarn's check; tfyarn needs Python 3.10+"
        raise SpecError(
            f"--python {python} did not run as a Python interpreter on this "
            f"machine ({said}); give the path of a Python that has tfyarn "
            "installed"
        ) from None
    if problems:
        raise SpecError(
            f"--python {python} (Python {version} on this machine) cannot run "
            f"tfyarn's master or tasks: {problems}, so the job would fail on its "
            "first import. Give --python a Python that has tfyarn installed (at "
            "that path on every node), or ship an environment with the job "
            "instead: --python_env auto (this client's virtualenv or conda "
            "environment), or --python_env with a virtualenv, conda environment "
            "or archive of one"
        )


def check_queue(yarn: Any, queue: str) -> None:
    """Refuse a queue YARN would refuse: unknown, not running, or a parent.

    Raises
    ------
    SpecError
        Naming the queue and the leaf queues one can submit to.
    """
    with yarn_errors():
        try:
            info = yarn.get_queue(queue)
        except ValueError:  # skein's INVALID_ARGUMENT: "Queue 'x' does not exist"
            raise SpecError(
                f"queue {queue!r} does not exist on this cluster; "
                f"{_known(yarn)}; set --queue"
            ) from None
        state = str(getattr(info, "state", "RUNNING"))
        if state != "RUNNING":
            raise SpecError(
                f"queue {queue!r} is {state} and accepts no applications; "
                f"{_known(yarn)}; set --queue"
            )
        children = yarn.get_child_queues(queue)
        if children:
            names = ", ".join(sorted(str(c.name) for c in children))
            raise SpecError(
                f"queue {queue!r} is a parent queue; YARN takes applications "
                f"only in leaf queues: set --queue to one of its children ({names})"
            )


def queue_default_label(yarn: Any, queue: str) -> str:
    """The node label YARN gives the queue's requests that name none ("": the
    default partition, also for a queue that does not exist: check_queue
    names that)."""
    with yarn_errors():
        try:
            info = yarn.get_queue(queue)
        except ValueError:
            return ""
    return str(getattr(info, "default_node_label", "") or "")


def check_node_labels(yarn: Any, spec: JobSpec, nodes: Iterable[Any]) -> None:
    """Refuse a node label no running node carries, or the queue cannot use.

    YARN accepts a request for a label no node has and never grants it; one
    the queue may not use fails the application after submission.

    Parameters
    ----------
    nodes
        skein ``NodeReport``s of the running nodes (``id``, ``labels``).

    Raises
    ------
    SpecError
        Naming the option, the label, and the labels there are.
    """
    asked = {
        f"{role.value}_node_label": spec.node_label_of(role)
        for role in ROLES
        if spec.count(role) and spec.node_label_of(role)
    }
    if not asked:
        return
    hosts: dict[str, list[str]] = {}
    for node in nodes:
        for label in getattr(node, "labels", None) or ():
            hosts.setdefault(str(label), []).append(str(node.id).rsplit(":", 1)[0])
    there = (
        "labels of running nodes: "
        + "; ".join(
            f"{lab} ({', '.join(sorted(h))})" for lab, h in sorted(hosts.items())
        )
        if hosts
        else "no running node has a label"
    )
    for option, label in asked.items():
        if label not in hosts:
            flag = _flag(option, spec)
            raise SpecError(
                f"{flag} {label}: no running node has the label {label!r}, so YARN "
                f"would never grant these containers; {there}. Set {flag} to one "
                "of them, or leave it empty"
            )
    with yarn_errors():
        try:
            queue = yarn.get_queue(spec.queue)
        except ValueError:
            return  # check_queue names the queue
    usable = {str(x) for x in getattr(queue, "node_labels", None) or ()}
    if "*" in usable:
        return
    for option, label in asked.items():
        if label not in usable:
            listed = ", ".join(sorted(usable)) or "none"
            raise SpecError(
                f"queue {spec.queue!r} may not use node label {label!r} "
                f"({_flag(option, spec)}); its labels: {listed}. Choose another "
                "--queue or label"
            )


def _flag(option: str, spec: JobSpec) -> str:
    """``--ps_node_label``, or ``--node_label`` when the role inherits it."""
    role = option.removesuffix("_node_label")
    own = spec.group(Role(role)).node_label
    return f"--{option}" if own else "--node_label"


def _known(yarn: Any) -> str:
    import skein

    try:
        names = sorted(str(q.name) for q in yarn.get_all_queues())
    except (skein.exceptions.SkeinError, ValueError, KeyError):
        return "the queues cannot be listed"  # only a hint: the refusal stands
    return f"queues: {', '.join(names)}" if names else "the cluster lists no queues"


def check_remote_files(urls: Iterable[str]) -> None:
    """Refuse ``hdfs://`` (and ``viewfs://``) files that are not there.

    Other schemes (``s3a://``, ...) are left to YARN, which may know them.

    Raises
    ------
    SpecError
        A file does not exist or is a directory.
    HdfsError
        HDFS could not be asked (its message names the NameNode).
    """
    from tfyarn.data import fs

    for url in urls:
        scheme = url.split("://", 1)[0] if "://" in url else ""
        if scheme not in fs.HDFS_SCHEMES:
            continue
        try:
            info = fs.resolve(url).info(url)
        except fs.PathNotFoundError:
            raise SpecError(
                f"file not found: {url}; every task would need it (--files). "
                f"Upload it first (`hdfs dfs -put FILE {url}`) or fix the path"
            ) from None
        if info.is_dir:
            raise SpecError(
                f"{url} is a directory; --files ships files: give each file, "
                "or an archive (.zip, .tar.gz) that YARN unpacks"
            )
