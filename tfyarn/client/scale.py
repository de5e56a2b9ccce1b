"""``tfyarn scale APP --num_worker N``: another worker count for a running job.

The master does the work (am/resize.py): to grow, it first gets the new
workers' containers, which stand by while the job trains on; then a stop
notice so scripts save at their current step, and the next generation with N
workers. Here the request
is checked first, each refusal saying why: an unknown or ended application,
not a tfyarn job, a count below 1, or more than the job's queue can ever
give (its maximum capacity of the cluster's running nodes). The master
refuses what only it knows: a job without workers, a count below
``--min_worker``, a job already ending or resizing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tfyarn.client.connection import (
    DONE,
    TAG,
    ask,
    check_app_id,
    opened,
    yarn_errors,
)
from tfyarn.contract.status import MASTER_KEY
from tfyarn.errors import MasterError, MasterRefusedError, SpecError, TfyarnError

WORKER_SERVICE = "worker"


@dataclass(frozen=True)
class ScaleResult:
    """What the master said it does: from ``previous`` workers to ``num_worker``."""

    app_id: str
    previous: int
    num_worker: int
    message: str

    def summary(self) -> str:
        """One line for a person."""
        if self.previous == self.num_worker:
            return f"{self.app_id}: {self.message}"
        return (
            f"{self.app_id}: {self.previous} -> {self.num_worker} workers; "
            f"{self.message}"
        )


def scale(app_id: str, *, num_worker: int, client: Any | None = None) -> ScaleResult:
    """Change a running job's number of workers.

    To grow, the new workers' containers start first and stand by while the
    job trains on (if YARN has no room, the job keeps its size meanwhile).
    Then every running task gets a stop notice; scripts that heed it
    (``tfyarn.should_stop()``, ``tfyarn.termination_config()``) save at their
    current step, then the next generation starts with ``num_worker`` workers
    from there (TF_CONFIG, the legacy flags and ``tfyarn.data``'s shards
    follow the new size). Returns once the master accepted; ``tfyarn status``
    shows the resize.

    Raises
    ------
    SpecError
        ``num_worker`` is not a whole number of at least 1.
    TfyarnError
        No such running tfyarn job, more workers than its queue can ever
        give, or the master refused (the message says why).

    Examples
    --------
    >>> tfyarn.scale("application_1700000000000_0001", num_worker=4)  # doctest: +SKIP
    """
    app_id = check_app_id(app_id)
    if isinstance(num_worker, bool) or not isinstance(num_worker, int):
        raise SpecError(f"num_worker must be a whole number, got {num_worker!r}")
    if num_worker < 1:
        raise SpecError(
            f"num_worker must be at least 1, got {num_worker} "
            "(`tfyarn kill` ends a job)"
        )
    with opened(client) as yarn:
        report = ask(app_id, lambda: yarn.application_report(app_id))
        if TAG not in set(report.tags or ()):
            raise TfyarnError(f"{app_id} is not a tfyarn job: it cannot be scaled")
        if str(report.state) in DONE:
            raise TfyarnError(
                f"{app_id} has ended ({report.state}, final status "
                f"{report.final_status}): only a running job can be scaled"
            )
        with yarn_errors(app_id):
            app = yarn.connect(app_id, wait=False)
            try:
                check_queue_room(
                    yarn, app.get_specification(), str(report.queue), num_worker
                )
                return _ask_master(yarn, app, app_id, num_worker)
            finally:
                app.close()


def check_queue_room(yarn: Any, spec: Any, queue: str, num_worker: int) -> None:
    """Refuse more workers than the queue could ever hold with the rest of the job.

    ``spec`` is the job's ``skein.ApplicationSpec``. The bound is generous
    (the queue's maximum capacity of every running node, YARN's rounding up
    ignored), so only what can never run is refused.
    """
    worker = spec.services.get(WORKER_SERVICE)
    if worker is None:
        raise TfyarnError(
            "this job has no workers to scale (it was submitted with num_worker=0)"
        )
    memory = spec.master.resources.memory
    vcores = spec.master.resources.vcores
    for name, service in spec.services.items():
        count = num_worker if name == WORKER_SERVICE else service.instances
        memory += count * service.resources.memory
        vcores += count * service.resources.vcores
    nodes = yarn.get_nodes(states=["RUNNING"])
    share = _max_capacity(yarn, queue)
    room_memory = share * sum(n.total_resources.memory for n in nodes)
    room_vcores = share * sum(n.total_resources.vcores for n in nodes)
    if memory > room_memory or vcores > room_vcores:
        per = worker.resources
        raise TfyarnError(
            f"{num_worker} workers ({per.memory} MiB, {per.vcores} vcores each) and "
            f"the rest of the job need {memory} MiB and {vcores} vcores; queue "
            f"{queue!r} can never give more than {room_memory:.0f} MiB and "
            f"{room_vcores:.0f} vcores ({share:.0%} of the {len(nodes)} running "
            "node(s)): ask for fewer workers"
        )


def _max_capacity(yarn: Any, queue: str) -> float:
    """The queue's maximum share of the cluster (1.0 when YARN does not say)."""
    try:
        value = float(yarn.get_queue(queue).max_capacity)
    except Exception:  # noqa: BLE001 -- no bound known: refuse nothing here
        return 1.0
    # skein reports percents; a fraction is read as one too.
    share = value / 100.0 if value > 1.0 else value
    return share if share > 0 else 1.0


def _ask_master(yarn: Any, app: Any, app_id: str, num_worker: int) -> ScaleResult:
    from tfyarn._proto import master_pb2 as pb
    from tfyarn.contract.channel import MasterClient, credentials_of

    try:
        address = app.kv[MASTER_KEY].decode()
    except KeyError:
        raise TfyarnError(
            f"{app_id}'s master has not started yet: try again in a few seconds"
        ) from None
    master = MasterClient(address, credentials_of(yarn.security))
    try:
        reply = master.resize(
            pb.ResizeRequest(num_worker=num_worker, reason="tfyarn scale"), timeout=10
        )
    except MasterRefusedError as exc:
        detail = str(exc).split("the master refused: ", 1)[-1]
        raise TfyarnError(f"{app_id} cannot be scaled: {detail}") from None
    except MasterError as exc:
        raise TfyarnError(f"{app_id}: could not reach its master: {exc}") from None
    finally:
        master.close()
    return ScaleResult(app_id, reply.previous, reply.num_worker, reply.message)
