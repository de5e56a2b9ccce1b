"""Who this task is: its identity, read from the container's environment.

The job travels in ``TFYARN_JOB`` and the role comes from the skein service.
A container the master added carries the index, attempt, restart count,
master address and port; a declared one (the job's initial tasks) only its
skein instance, which is the index: the master's address is then looked up
(:mod:`tfyarn.runtime.discover`). Names and rules in :mod:`tfyarn.contract.env`.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass

from tfyarn._proto import master_pb2 as pb
from tfyarn.contract import env as _env
from tfyarn.errors import SpecError
from tfyarn.spec import JobSpec, Role


@dataclass(frozen=True)
class TaskContext:
    """Who this task is, read from the container's environment."""

    spec: JobSpec
    role: Role
    index: int
    attempt: int
    restart: int
    master_address: str  # "": a declared container, looked up in skein's kv store
    host: str
    port: int  # 0: any free port
    container_id: str
    yarn_container_id: str

    @property
    def key(self) -> str:
        return f"{self.role.value}:{self.index}"

    def task_key(self) -> pb.TaskKey:
        return pb.TaskKey(role=self.role.value, index=self.index)

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> TaskContext:
        """Read the task's identity; raise SpecError naming what is missing."""
        missing = [name for name in (_env.JOB, _env.ROLE) if not env.get(name)]
        if not env.get(_env.TASK_INDEX) and not env.get(_env.SKEIN_CONTAINER_ID):
            missing.append(f"{_env.TASK_INDEX} (or skein's {_env.SKEIN_CONTAINER_ID})")
        if missing:
            raise SpecError(
                f"not started by the tfyarn master: {', '.join(missing)} not set. "
                "tfyarn.runtime runs inside containers of a job submitted with "
                "`tfyarn submit`."
            )
        try:
            return cls(
                spec=JobSpec.from_env(env[_env.JOB]),
                role=Role(env[_env.ROLE]),
                index=_env.task_index(env),
                attempt=int(env.get(_env.ATTEMPT) or 0),
                restart=int(env.get(_env.RESTART) or 0),
                master_address=env.get(_env.MASTER_ADDRESS, ""),
                host=env.get("NM_HOST") or socket.getfqdn(),
                port=int(env.get(_env.PORT) or 0),
                container_id=env.get(_env.SKEIN_CONTAINER_ID, ""),
                yarn_container_id=env.get("CONTAINER_ID", ""),
            )
        except (ValueError, KeyError) as exc:
            raise SpecError(f"bad tfyarn task environment: {exc}") from exc
