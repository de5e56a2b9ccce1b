"""The job's status as the master publishes it and the client reads it.

The master writes one JSON document under :data:`STATUS_KEY` in the
application's skein key-value store; ``tfyarn status``, the live view of
``tfyarn submit`` and ``tfyarn kill`` read it back. Both sides use the types
below, so a renamed field or state breaks a test on both sides at once
(like Ray's job ``common.py``).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from enum import Enum
from typing import Any

# skein key-value store keys.
STATUS_KEY = "tfyarn.status"
MASTER_KEY = "tfyarn.master"  # host:port of the master's gRPC service
# A few hundred bytes a follower reads at every poll instead of the whole
# snapshot (~2 MB for 5000 tasks); written right after STATUS_KEY (JobSummary).
SUMMARY_KEY = "tfyarn.summary"


class Phase(str, Enum):
    """Where the whole job is."""

    LAUNCHING = "LAUNCHING"
    REGISTERING = "REGISTERING"
    RUNNING = "RUNNING"
    RESTARTING = "RESTARTING"
    # Gang allocation (am/gang.py): YARN did not grant every container of the
    # forming cluster in time; the job gave back what it held and asks again.
    WAITING_FOR_RESOURCES = "WAITING_FOR_RESOURCES"
    FINISHING = "FINISHING"
    STOPPING = "STOPPING"  # `tfyarn kill`: tasks are stopping, the kill follows
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    KILLED = "KILLED"

    def is_terminal(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.FAILED, Phase.KILLED)


class TaskState(str, Enum):
    """Where one task (one attempt of it) is."""

    REQUESTED = "REQUESTED"  # container asked of YARN, not granted yet
    ALLOCATED = "ALLOCATED"  # container running, task not registered yet
    REGISTERED = "REGISTERED"  # registered, waiting for the cluster to form
    RUNNING = "RUNNING"  # holds the ClusterSpec; its script runs
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"  # the script exited non-zero
    KILLED = "KILLED"  # stopped by the master
    LOST = "LOST"  # container gone or silent without reporting an end
    # A new attempt waits for its predecessor's container to end (so the old
    # TensorFlow server is gone from the port the new one takes).
    RELAUNCHING = "RELAUNCHING"

    def is_terminal(self) -> bool:
        return self in _TERMINAL

    def is_registered(self) -> bool:
        """Registered with the master (and not ended)."""
        return self in (TaskState.REGISTERED, TaskState.RUNNING)

    def has_container(self) -> bool:
        """YARN granted this attempt a container (it may have ended since)."""
        return self not in (TaskState.REQUESTED, TaskState.RELAUNCHING)

    def has_exit_code(self) -> bool:
        """An ``exit_code`` in this state is the script's (or the signal's)."""
        return self in (TaskState.SUCCEEDED, TaskState.FAILED, TaskState.KILLED)


_TERMINAL = frozenset(
    {TaskState.SUCCEEDED, TaskState.FAILED, TaskState.KILLED, TaskState.LOST}
)


@dataclasses.dataclass
class TaskStatus:
    """One task in the published status."""

    task: str  # "worker:0"
    role: str
    index: int
    state: TaskState
    attempt: int = 0
    address: str | None = None  # host:port of its TensorFlow server
    container_id: str | None = None  # skein's id
    yarn_container_id: str | None = None
    node: str | None = None
    exit_code: int | None = None
    step: int | None = None
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)
    last_heartbeat_age: float | None = None
    failures: list[str] = dataclasses.field(default_factory=list)  # earlier attempts
    history: list[str] = dataclasses.field(default_factory=list)
    # Why YARN took back the container of the task's latest attempt through no
    # fault of the job ("preempted", "released", "disks failed", ...), until
    # its next attempt registers; "" otherwise (see :meth:`shown_state`).
    disruption: str = ""
    # The task's GPUs (am/gpus.py), each {"index", "uuid", "minor"} plus, once
    # its runtime reported them (nvidia-smi), "utilization" (percent),
    # "memory_used_mib" and "memory_total_mib"; who chose them ("yarn",
    # "docker" or "master"); why nvidia-smi failed on its node ("" if not).
    gpus: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    gpu_source: str = ""
    gpu_error: str = ""
    # A worker asked for ahead of a resize (--min_worker growing back): it
    # registers and waits outside the cluster until the resize makes it a member.
    standby: bool = False

    def shown_state(self) -> str:
        """The state as a reader should see it: a taken-back attempt reads
        "PREEMPTED" (or its disruption's word), not LOST or FAILED; a worker
        standing by reads "REQUESTED (standby)"."""
        if self.disruption and self.state in (TaskState.LOST, TaskState.FAILED):
            return self.disruption.upper()
        if self.standby:
            return f"{self.state.value} (standby)"
        return self.state.value

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["state"] = self.state.value
        return out

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> TaskStatus:
        return cls(**_known_fields(cls, raw, state=TaskState(raw["state"])))


@dataclasses.dataclass
class JobStatus:
    """The whole published status document."""

    phase: Phase
    generation: int = 0
    restarts: int = 0
    restart_reasons: list[str] = dataclasses.field(default_factory=list)
    max_restarts: int | None = None
    budget_used: int = 0
    cluster_restarts: int = 0
    started: float | None = None  # wall-clock seconds
    cluster_formed_at: float | None = None
    diagnostics: str = ""
    master_address: str | None = None
    lead: str | None = None  # the task whose success ends the job
    tasks: list[TaskStatus] = dataclasses.field(default_factory=list)
    # What the user should know while the job runs (an HDFS token lifetime
    # shorter than the job may be), newest last.
    warnings: list[str] = dataclasses.field(default_factory=list)
    # The job's HDFS delegation tokens on a secure cluster (am/tokens.py):
    # refreshed_by (the keytab's principal, "" for none), ends (epoch s),
    # refreshes, next_refresh, last_error; None elsewhere.
    hdfs_tokens: dict[str, Any] | None = None
    # Containers YARN took back through no fault of the job (preemption, a
    # released node, failed disks): brought back outside max_restarts, within
    # max_disruptions; each one's reason, and how many of each kind.
    disruptions: int = 0
    max_disruptions: int | None = None
    disruption_reasons: list[str] = dataclasses.field(default_factory=list)
    disruption_kinds: dict[str, int] = dataclasses.field(default_factory=dict)
    # Worker-count changes (`tfyarn scale`, --min_worker): each a graceful stop
    # and a new generation, never charged to max_restarts; why, oldest first.
    resizes: int = 0
    resize_reasons: list[str] = dataclasses.field(default_factory=list)
    # A graceful stop under way (the stop notice is out), in words; "" if none.
    stop_notice: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["phase"] = self.phase.value
        out["tasks"] = [t.to_dict() for t in self.tasks]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> JobStatus:
        tasks = [TaskStatus.from_dict(t) for t in raw.get("tasks") or []]
        return cls(**_known_fields(cls, raw, phase=Phase(raw["phase"]), tasks=tasks))

    @classmethod
    def from_json(cls, text: str | bytes) -> JobStatus:
        """Parse a published status.

        Raises
        ------
        ValueError
            Not a status document of this version of tfyarn.
        """
        try:
            return cls.from_dict(json.loads(text))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a tfyarn status document: {exc}") from exc

    def task(self, key: str) -> TaskStatus | None:
        return next((t for t in self.tasks if t.task == key), None)

    def all_ended(self) -> bool:
        return all(t.state.is_terminal() for t in self.tasks)


def _known_fields(cls: type, raw: Mapping[str, Any], **parsed: Any) -> dict[str, Any]:
    # Fields a newer master adds are ignored, so an older client still reads it.
    names = {f.name for f in dataclasses.fields(cls)}
    return {**{k: v for k, v in raw.items() if k in names}, **parsed}


@dataclasses.dataclass
class JobSummary:
    """What a poll needs of a big job, published under :data:`SUMMARY_KEY`.

    ``digest`` changes whenever anything a narrator says changes (phase,
    generation, restarts, disruptions, formation, diagnostics, any task's
    state, attempt, address, container, disruption, GPUs or nvidia-smi
    failure): a reader with the same digest needs no new snapshot. Steps are
    outside it, and here instead (the lead's).
    """

    phase: Phase
    digest: str
    lead: str | None = None
    lead_step: int | None = None
    total_steps: float | None = None
    tasks: int = 0

    def to_json(self) -> str:
        out = dataclasses.asdict(self)
        out["phase"] = self.phase.value
        return json.dumps(out)

    @classmethod
    def from_json(cls, text: str | bytes) -> JobSummary:
        """Raises ValueError for anything but a summary of this version."""
        try:
            raw = json.loads(text)
            return cls(**_known_fields(cls, raw, phase=Phase(raw["phase"])))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a tfyarn summary document: {exc}") from exc

    @classmethod
    def of(cls, snapshot: Mapping[str, Any]) -> JobSummary:
        """The summary of a snapshot in its dict form (``JobStatus.to_dict()``
        or the master's ``snapshot(state)``), without parsing every task."""
        tasks = snapshot.get("tasks") or []
        seen = [
            snapshot.get(k)
            for k in (
                "phase",
                "generation",
                "restarts",
                "disruptions",
                "resizes",
                "stop_notice",
                "cluster_formed_at",
            )
        ]
        seen.append(snapshot.get("diagnostics") or "")
        seen += [
            (
                t["task"],
                t["state"],
                t.get("attempt"),
                t.get("address"),
                t.get("yarn_container_id"),
                t.get("exit_code"),
                t.get("disruption") or "",
                [g.get("index") for g in t.get("gpus") or []],
                t.get("gpu_error") or "",
            )
            for t in tasks
        ]
        digest = hashlib.blake2b(
            json.dumps(seen, default=str).encode(), digest_size=8
        ).hexdigest()
        phase = snapshot["phase"]
        lead_key = snapshot.get("lead")
        lead = next((t for t in tasks if t["task"] == lead_key), None)
        total = (lead.get("metrics") or {}).get("total_steps") if lead else None
        return cls(
            phase=phase if isinstance(phase, Phase) else Phase(phase),
            digest=digest,
            lead=lead_key,
            lead_step=lead.get("step") if lead else None,
            total_steps=total,
            tasks=len(tasks),
        )
