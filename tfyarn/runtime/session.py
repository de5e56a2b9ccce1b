"""The task's session with the master: register, watch the cluster, heartbeat,
report the end.

Every call goes through :class:`tfyarn.contract.channel.MasterClient`, which
turns gRPC status codes into :class:`~tfyarn.errors.MasterUnavailableError`
(retry) and :class:`~tfyarn.errors.MasterRefusedError` (give up: this attempt
was replaced or is unknown). Two daemon threads run for the task's life; what
they learn lands in :attr:`MasterSession.cluster` and in the shared
:class:`~tfyarn.runtime.child.StopRequest`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import replace

from tfyarn._proto import master_pb2 as pb
from tfyarn.contract.channel import MasterClient, backoff_delays, call_until
from tfyarn.contract.heartbeat import heartbeat_interval
from tfyarn.errors import MasterError, MasterRefusedError, MasterUnavailableError
from tfyarn.runtime import tokens as _tokens
from tfyarn.runtime.child import StopRequest
from tfyarn.runtime.context import TaskContext
from tfyarn.runtime.notice import NoticeBoard
from tfyarn.runtime.timeouts import Timeouts

log = logging.getLogger("tfyarn.runtime")


class MasterSession:
    """One task's calls to the master and the two threads that keep them up."""

    def __init__(
        self,
        ctx: TaskContext,
        stop: StopRequest,
        *,
        credentials: tuple[bytes, bytes] | None,
        timeouts: Timeouts,
        notices: NoticeBoard | None = None,
    ) -> None:
        self.ctx = ctx
        self.spec = ctx.spec
        self.stop = stop
        # Where a StopNotice goes for the script to see (None: nowhere).
        self.notices = notices
        self.timeouts = timeouts
        self.credentials = credentials
        self.client: MasterClient | None = None  # once the address is known (start)
        self.cluster_ready = threading.Event()
        self.cluster: pb.ClusterSpec | None = None
        # The task's GPUs, from the master (tfyarn/runtime/gpus.py), and what
        # each heartbeat reports of them once the script runs.
        self.devices: pb.Devices | None = None
        self.devices_ready = threading.Event()
        self.gpu_reader: Callable[[], tuple[list[pb.GpuReading], str]] | None = None
        self.reached_master = threading.Event()  # any call answered
        self.done = threading.Event()
        self.registration: pb.RegisterTaskRequest | None = None
        self.credentials_version = 0  # the newest fresh delegation tokens written
        # Without a master for this long the job is over (YARN ends the
        # containers of a dead master; this is the bound if it does not).
        self.master_lost_after = max(
            timeouts.master_lost_min, 3 * self.spec.heartbeat_timeout
        )

    def start(self, port: int, *, nvidia_visible_devices: str = "") -> None:
        """Register (riding on the WatchCluster call: one RPC per task) and
        start heartbeating. ``ctx.master_address`` must be known by now;
        ``nvidia_visible_devices``: the container's, for the master."""
        self.client = MasterClient(self.ctx.master_address, self.credentials)
        self.registration = pb.RegisterTaskRequest(
            task=self.ctx.task_key(),
            attempt=self.ctx.attempt,
            host=self.ctx.host,
            port=port,
            container_id=self.ctx.container_id,
            yarn_container_id=self.ctx.yarn_container_id,
            nvidia_visible_devices=nvidia_visible_devices,
        )
        threading.Thread(target=self._watch, name="watch", daemon=True).start()
        threading.Thread(target=self._heartbeat, name="heartbeat", daemon=True).start()

    def found_master(self, address: str) -> None:
        """A declared container learned the master's address (before :meth:`start`)."""
        self.ctx = replace(self.ctx, master_address=address)

    def close(self) -> None:
        self.done.set()
        if self.client is not None:
            self.client.close()

    def wait_for_cluster(self) -> bool:
        """Wait for the ClusterSpec (bounded); False if told to stop first."""
        timeout = self.spec.registration_timeout
        deadline = time.monotonic() + timeout + self.timeouts.formation_slack
        while time.monotonic() < deadline:
            if self.stop.event.is_set():
                log.warning("stopping before the cluster formed: %s", self.stop.reason)
                return False
            if self.cluster_ready.wait(0.2):
                return True
        self.stop.set(
            f"the cluster did not form within {timeout:.0f} s "
            "of this task registering (other tasks never registered)",
            0,
        )
        return False

    def wait_for_devices(self) -> bool:
        """Wait for the task's GPUs (bounded as the cluster is); False if told
        to stop first."""
        timeout = self.spec.registration_timeout
        deadline = time.monotonic() + timeout + self.timeouts.formation_slack
        while time.monotonic() < deadline:
            if self.stop.event.is_set():
                log.warning("stopping before the GPUs were known: %s", self.stop.reason)
                return False
            if self.devices_ready.wait(0.2):
                return True
        self.stop.set(
            f"the master named no GPUs for this task within {timeout:.0f} s "
            "of it registering",
            0,
        )
        return False

    def report_end(
        self, code: int, stderr_tail: str, *, container_ending: bool = False
    ) -> None:
        """Tell the master how the script ended (bounded; a failure only logs).

        ``container_ending``: the runtime itself got SIGTERM, so YARN is ending
        its container and will say why.
        """
        request = pb.ReportTaskEndRequest(
            task=self.ctx.task_key(),
            attempt=self.ctx.attempt,
            exit_code=code,
            stderr_tail=stderr_tail,
            container_ending=container_ending,
        )
        client = self.client
        if client is None:
            return  # never reached the master: no one to tell
        try:
            call_until(
                f"reporting the end of {self.ctx.key}",
                lambda timeout: client.report_task_end(request, timeout=timeout),
                deadline=time.monotonic() + self.timeouts.report_end,
                attempt_timeout=self.timeouts.report_end_attempt,
            )
        except (MasterUnavailableError, MasterRefusedError) as exc:
            # The master also sees the container end; this only loses the detail.
            log.warning("could not report the end to the master: %s", exc)

    # -- background threads -------------------------------------------------------

    def _watch(self) -> None:
        """Register and follow WatchCluster; reconnect while the master answers."""
        client = self.client
        assert client is not None
        delay = backoff_delays(cap=5.0)
        started = last_ok = time.monotonic()
        while not self.done.is_set():
            known = self.cluster.generation if self.cluster else 0
            request = pb.WatchClusterRequest(
                task=self.ctx.task_key(),
                attempt=self.ctx.attempt,
                known_generation=known,
                register=self.registration,
                known_credentials=self.credentials_version,
            )
            try:
                for event in client.watch_cluster(request):
                    last_ok = time.monotonic()
                    self.reached_master.set()
                    if event.HasField("credentials"):
                        self._on_credentials(event.credentials)
                    elif event.HasField("cluster_spec"):
                        self._on_cluster(event.cluster_spec)
                    elif event.HasField("devices"):
                        self.devices = event.devices
                        self.devices_ready.set()
                    elif event.HasField("stop_notice"):
                        if self.notices is not None:
                            self.notices.post(event.stop_notice)
                    elif event.HasField("stop"):
                        self.stop.set(
                            event.stop.reason,
                            event.stop.grace_seconds,
                            next_attempt=event.stop.next_attempt,
                        )
                        return
                if self.stop.event.is_set():
                    return
            except MasterRefusedError as exc:
                self.stop.set(f"the master refused this task: {exc}", 0)
                return
            except MasterError as exc:
                now = time.monotonic()
                if (
                    self.cluster is None
                    and now - started > self.spec.registration_timeout
                ):
                    self.stop.set(
                        f"could not register: the tfyarn master at "
                        f"{self.ctx.master_address} did not answer within "
                        f"{self.spec.registration_timeout:.0f} s ({exc})",
                        0,
                    )
                    return
                if self.cluster is not None and now - last_ok > self.master_lost_after:
                    self.stop.set(
                        f"the master at {self.ctx.master_address} is unreachable "
                        f"for {self.master_lost_after:.0f} s",
                        self.spec.stop_grace,
                    )
                    return
            self.done.wait(delay())

    def _on_cluster(self, spec: pb.ClusterSpec) -> None:
        if self.cluster is not None and spec.generation <= self.cluster.generation:
            return
        if self.cluster is not None:
            # TF_CONFIG of a running script cannot change; a later generation
            # matters only to cluster restarts, which start a new attempt.
            log.info("cluster generation %d received", spec.generation)
        self.cluster = spec
        self.cluster_ready.set()

    def _on_credentials(self, credentials: pb.Credentials) -> None:
        if credentials.version > self.credentials_version and _tokens.apply(
            credentials
        ):
            self.credentials_version = credentials.version

    def _heartbeat(self) -> None:
        client = self.client
        assert client is not None
        interval = heartbeat_interval(
            self.spec.heartbeat_interval, len(self.spec.task_keys())
        )
        last_ok = time.monotonic()
        while not self.done.wait(interval):
            gpus, error = self.gpu_reader() if self.gpu_reader else ([], "")
            if self.gpu_reader is not None and self.done.is_set():
                return  # closed while nvidia-smi answered
            request = pb.HeartbeatRequest(
                task=self.ctx.task_key(),
                attempt=self.ctx.attempt,
                gpus=gpus,
                gpu_error=error,
                heeds_notice=self.notices is not None and self.notices.heeded(),
            )
            try:
                client.heartbeat(request, timeout=max(interval, 5.0))
                last_ok = time.monotonic()
                self.reached_master.set()
            except MasterRefusedError as exc:
                self.stop.set(f"the master refused this task: {exc}", 0)
                return
            except MasterError:
                if time.monotonic() - last_ok > self.master_lost_after:
                    self.stop.set(
                        f"no answer from the master at {self.ctx.master_address} "
                        f"for {self.master_lost_after:.0f} s",
                        self.spec.stop_grace,
                    )
                    return
