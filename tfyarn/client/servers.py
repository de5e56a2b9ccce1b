"""TensorFlow servers on YARN, the program on the gateway (``tfyarn servers``).

A server set is a job whose every task runs only ``tf.distribute.Server``
(tfyarn/runtime/tf_server.py): ps and workers, no chief. The program that
uses them runs here: a TF1 in-graph client given ``--ps_hosts`` and
``--worker_hosts``, or a TF2 ``ParameterServerStrategy`` coordinator given
:meth:`ServerSet.cluster_resolver` (the coordinator is the spec's ``chief``,
at this machine's address). Everything a job has works for the set (options,
restarts, status, the tracking page); what differs:

- No lead task: the set ends on ``tfyarn kill``, on :meth:`ServerSet.release`
  or when its lease expires (am/lease.py): this process renews it
  (tfyarn/client/lease.py), so servers never outlive their program.
  ``detach=True`` takes no lease: the set stays until ``tfyarn kill``.
- A lost worker is replaced at its address (ClusterCoordinator goes on); a
  lost ps restarts every server, whose state (the variables) is then gone:
  :meth:`ServerSet.check` and leaving the ``with`` block on an error raise
  :class:`ServersRestartedError` naming the task and how to resume.
- Before the addresses are given out, this machine connects to each server
  (tfyarn/client/reach.py) and names those it cannot reach.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from tfyarn.client import config, reach, submission
from tfyarn.client.connection import DONE, login_as, opened, yarn_errors
from tfyarn.client.lease import Renewer
from tfyarn.contract.status import MASTER_KEY, Phase
from tfyarn.errors import JobFailedError, SpecError, TfyarnError

# The script every server runs.
SERVER_SCRIPT = str(Path(__file__).resolve().parent.parent / "runtime" / "tf_server.py")
DEFAULT_LEASE = 60.0
# Beyond registration_timeout: YARN's allocation and the TensorFlow servers' start.
FORM_MARGIN = 60.0
# How long the servers may take to listen once the cluster formed (the script
# finishes importing TensorFlow first: tens of seconds on a loaded node).
LISTEN_WITHIN = 120.0
# How long leaving the block on a TensorFlow error waits for the master to say
# whether a lost ps restarted the servers.
RESTART_WAIT = 10.0


class ServersRestartedError(TfyarnError):
    """A lost ps restarted every server: the coordinator's state on them is gone."""


@dataclass
class ServerSet:
    """Running TensorFlow servers on YARN and what a client program needs of them.

    ``hosts`` maps each role (``ps``, ``worker``) to its servers' ``host:port``
    in task order; ``coordinator`` is the ``chief`` address a TF2 coordinator
    on this machine takes.
    """

    app_id: str
    hosts: dict[str, list[str]]
    coordinator: str
    tracking_url: str = ""
    lease: float = 0.0
    _renewer: Renewer | None = field(default=None, repr=False)
    _restarts_seen: int = field(default=0, repr=False)
    _released: bool = field(default=False, repr=False)

    # -- what a client program needs ------------------------------------------

    @property
    def ps_hosts(self) -> str:
        return ",".join(self.hosts.get("ps", []))

    @property
    def worker_hosts(self) -> str:
        return ",".join(self.hosts.get("worker", []))

    def legacy_flags(self) -> str:
        """``--ps_hosts=h:p,... --worker_hosts=h:p,...`` for a TF1-style script."""
        return f"--ps_hosts={self.ps_hosts} --worker_hosts={self.worker_hosts}"

    def cluster(self) -> dict[str, list[str]]:
        """The ClusterSpec's dict, the coordinator as ``chief``."""
        out = {"chief": [self.coordinator]}
        out.update({role: list(hosts) for role, hosts in self.hosts.items() if hosts})
        return out

    def tf_config(self) -> dict[str, Any]:
        """``TF_CONFIG`` for the coordinator (task ``chief``, index 0)."""
        return {"cluster": self.cluster(), "task": {"type": "chief", "index": 0}}

    def target(self, role: str, index: int = 0) -> str:
        """A server's session target for TF1 code: ``grpc://host:port``."""
        hosts = self.hosts.get(role)
        if not hosts:
            raise SpecError(f"the server set has no {role!r} servers ({self._roles()})")
        if not 0 <= index < len(hosts):
            raise SpecError(
                f"{role}:{index} is not in the server set ({self._roles()})"
            )
        return f"grpc://{hosts[index]}"

    def cluster_resolver(self) -> Any:
        """TensorFlow's own ``ClusterResolver`` for ``ParameterServerStrategy``.

        >>> strategy = tf.distribute.ParameterServerStrategy(  # doctest: +SKIP
        ...     cluster.cluster_resolver())
        """
        import tensorflow as tf

        return tf.distribute.cluster_resolver.SimpleClusterResolver(
            tf.train.ClusterSpec(self.cluster()),
            task_type="chief",
            task_id=0,
            rpc_layer="grpc",
        )

    def lines(self) -> list[str]:
        """What ``tfyarn servers`` prints, one fact a line (a shell takes each)."""
        return [
            self.app_id,
            self.legacy_flags(),
            "TF_CONFIG=" + json.dumps(self.tf_config(), separators=(",", ":")),
            self.tracking_url,
        ]

    def _roles(self) -> str:
        return ", ".join(f"{len(h)} {r}" for r, h in self.hosts.items())

    # -- their life --------------------------------------------------------------

    def check(self) -> None:
        """Raise if the servers were restarted since they were handed out.

        Raises
        ------
        ServersRestartedError
            A lost ps (or a restart the master decided) restarted every
            server: variables on the ps are gone; the message says how to resume.
        """
        if self._renewer is None:
            return
        reply = self._renewer.renew_once()
        if reply is not None and reply.cluster_restarts > self._restarts_seen:
            self._restarts_seen = reply.cluster_restarts  # said once
            raise ServersRestartedError(self._restarted_text(reply.last_restart))

    def _restarted_text(self, reason: str) -> str:
        return (
            f"the servers of {self.app_id} were restarted ({reason or 'no reason given'}): "
            "the model's variables on the ps are gone and this coordinator "
            "cannot go on. Resume from your checkpoint: leave this block, "
            "start a new program (or restart the notebook's kernel), open the "
            "servers again and restore (tf.train.CheckpointManager("
            "...).restore_or_initialize()) before training on. tfyarn does not "
            "resume by itself: only your program knows its model and step"
        )

    def release(self) -> None:
        """End the servers now (as ``tfyarn kill`` does); safe to call twice."""
        if self._released:
            return
        self._released = True
        if self._renewer is not None:
            self._renewer.stop()
        from tfyarn.client.jobs import kill

        kill(self.app_id)

    def __enter__(self) -> ServerSet:  # noqa: PYI034 -- Self needs Python 3.11
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        restarted = ""
        if exc is not None and self._renewer is not None:
            # TensorFlow fails within a second of a lost ps; the master's
            # verdict may take a few more: wait for it on TensorFlow's errors.
            waits = RESTART_WAIT if _from_tensorflow(exc) else 0.0
            deadline = time.monotonic() + waits
            while True:
                reply = self._renewer.renew_once()
                if reply is not None and reply.cluster_restarts > self._restarts_seen:
                    restarted = self._restarted_text(reply.last_restart)
                    break
                if time.monotonic() >= deadline:
                    break
                time.sleep(1.0)
        self.release()
        if restarted:
            raise ServersRestartedError(restarted) from exc


def servers(
    num_ps: int | None = None,
    num_worker: int | None = None,
    *,
    detach: bool = False,
    lease: float = DEFAULT_LEASE,
    config_file: str | os.PathLike[str] | None = None,
    client: Any | None = None,
    **options: Any,
) -> ServerSet:
    """Start TensorFlow servers on YARN for a program on this machine.

    Returns once every server accepts connections from here. Use it as a
    context manager: leaving the block releases the servers.

    Parameters
    ----------
    num_ps, num_worker
        How many parameter servers and workers (default: the config's).
    detach
        Take no lease: the servers stay until ``tfyarn kill``.
    lease
        Seconds the servers outlive this process (or its last renewal).
    **options
        Any job option (``worker_memory="1 GiB"``, ``queue``, ``python_env``,
        ``docker_image``, ``env``, ``max_restarts``...).

    Raises
    ------
    SpecError
        Bad options (a chief or evaluators: the coordinator is this program).
    JobFailedError
        The set ended before its servers were up.
    UnreachableServersError
        This machine cannot connect to some servers (named; the set is released).

    Examples
    --------
    >>> with tfyarn.servers(num_ps=2, num_worker=4) as cluster:  # doctest: +SKIP
    ...     strategy = tf.distribute.ParameterServerStrategy(
    ...         cluster.cluster_resolver())
    """
    if lease <= 0 and not detach:
        raise SpecError(
            f"lease must be more than 0 seconds, got {lease} "
            "(detach=True keeps the servers until `tfyarn kill`)"
        )
    for key in ("num_chief", "num_evaluator"):
        if options.get(key):
            raise SpecError(
                f"{key}: a server set has ps and worker servers only; the "
                "coordinator (chief) and any evaluator are the program on the gateway"
            )
    counts = {"num_ps": num_ps, "num_worker": num_worker}
    options.update({k: v for k, v in counts.items() if v is not None})
    options.update(num_chief=0, num_evaluator=0)
    options.setdefault("name", "tfyarn-servers")  # apart from jobs in `tfyarn list`
    cfg = config.load(config_file, options)
    own = config.client_options(cfg)
    with login_as(own.login), opened(client) as yarn:
        spec = submission.check(
            SERVER_SCRIPT,
            config_file=config_file,
            client=yarn,
            cluster=False,
            **options,
        )
        spec = dataclasses.replace(
            spec, servers=True, lease=0.0 if detach else float(lease)
        ).validate()
        submission.check_cluster(yarn, spec, python_given=own.python_given)
        app_id = submission.submit_spec(
            yarn, spec, compression=own.python_env_compression
        )
        try:
            return _up(yarn, app_id, spec)
        except BaseException:
            _kill_quietly(yarn, app_id)
            raise


def _up(yarn: Any, app_id: str, spec: Any) -> ServerSet:
    """Wait for the servers, start the lease, check reachability."""
    from tfyarn.client.jobs import read_master_status
    from tfyarn.contract.channel import credentials_of

    deadline = time.monotonic() + spec.registration_timeout + FORM_MARGIN
    app = None
    renewer: Renewer | None = None
    try:
        while True:
            with yarn_errors(app_id):
                report = yarn.application_report(app_id)
            state = str(report.state)
            if state in DONE:
                raise JobFailedError(
                    app_id, str(report.final_status), str(report.diagnostics or "")
                )
            if app is None and state == "RUNNING":
                with yarn_errors(app_id):
                    app = yarn.connect(app_id, wait=False)
            if app is not None and renewer is None and spec.lease > 0:
                address = _kv(app, MASTER_KEY)
                if address:
                    creds = credentials_of(yarn.security)
                    renewer = Renewer(address, creds, spec.lease).start()
            status = read_master_status(app) if app is not None else None
            hosts = _hosts(status) if status is not None else None
            if hosts is not None:
                break
            if time.monotonic() > deadline:
                raise TfyarnError(
                    f"{app_id}: the servers did not all start within "
                    f"{spec.registration_timeout + FORM_MARGIN:.0f} s; "
                    f"`tfyarn status {app_id}` says which task is missing and why"
                )
            time.sleep(1.0)
        addresses = {
            f"{role}:{i}": a for role, hs in hosts.items() for i, a in enumerate(hs)
        }
        local_host = reach.check(addresses, within=LISTEN_WITHIN)
        cluster = ServerSet(
            app_id=app_id,
            hosts=hosts,
            coordinator=f"{local_host or socket.getfqdn()}:{_free_port()}",
            tracking_url=str(report.tracking_url or ""),
            lease=spec.lease,
            _renewer=renewer,
            _restarts_seen=status.cluster_restarts if status is not None else 0,
        )
        renewer = None  # the set owns it now
        return cluster
    finally:
        if renewer is not None:
            renewer.stop()
        if app is not None:
            app.close()


def _from_tensorflow(exc: BaseException) -> bool:
    return type(exc).__module__.startswith("tensorflow")


def _hosts(status: Any) -> dict[str, list[str]] | None:
    """Each role's addresses once the cluster formed, else None."""
    if status.phase is not Phase.RUNNING:
        return None
    hosts: dict[str, list[str]] = {"ps": [], "worker": []}
    for task in sorted(status.tasks, key=lambda t: (t.role, t.index)):
        if task.role not in hosts:
            continue
        if not task.address:
            return None
        hosts[task.role].append(task.address)
    return hosts


def _kv(app: Any, key: str) -> str:
    import skein

    try:
        return bytes(app.kv.get(key) or b"").decode()
    except (skein.exceptions.SkeinError, ConnectionError, OSError):
        return ""


def _free_port() -> int:
    """A port for the coordinator's own server (TensorFlow binds it later)."""
    with socket.socket() as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


def _kill_quietly(yarn: Any, app_id: str) -> None:
    with contextlib.suppress(Exception):  # the error being raised says more
        yarn.kill_application(app_id)


def describe_detached(cluster: ServerSet) -> str:
    """How long a detached set stays and how to end it."""
    return (
        f"the servers stay up until `tfyarn kill {cluster.app_id}` "
        "(no lease: nothing ends them when your program does)"
    )


def describe_lease(cluster: ServerSet) -> str:
    return (
        f"the servers stay up while this command runs (a lease renewed every "
        f"{cluster.lease / 3:.0f} s; they end {cluster.lease:.0f} s after it "
        "stops); Ctrl-C releases them"
    )
