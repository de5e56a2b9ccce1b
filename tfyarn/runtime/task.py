"""One task's life, from its port to its exit code.

Reserve a port (held until the end), register with the master, start the
script's interpreter with its heavy modules imported (``preimport``), wait for
the ClusterSpec, hand the script its TF_CONFIG (and optionally the legacy
flags), heartbeat while it runs, forward SIGTERM / the master's Stop to it
(SIGKILL after the grace), report how it ended, exit with its code. A Stop
that names a next attempt restarts all of it but the port in this container.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from tfyarn.contract import clusterspec as _clusterspec
from tfyarn.contract.notice import stop_file
from tfyarn.errors import MasterUnavailableError
from tfyarn.runtime import child as _child
from tfyarn.runtime import discover, prelude
from tfyarn.runtime import gpus as _gpus
from tfyarn.runtime import teardown as _teardown
from tfyarn.runtime.context import TaskContext
from tfyarn.runtime.notice import NoticeBoard
from tfyarn.runtime.ports import reserve_task_port, reserved_port
from tfyarn.runtime.session import MasterSession
from tfyarn.runtime.timeouts import DEFAULT, Timeouts

log = logging.getLogger("tfyarn.runtime")

STDERR_TAIL_LINES = 40
EXIT_RUNTIME_ERROR = 1
EXIT_BAD_ENV = 2


class Runtime:
    """Runs one task; :meth:`run` returns the process exit code."""

    def __init__(
        self,
        ctx: TaskContext,
        *,
        credentials: tuple[bytes, bytes] | None = None,
        workdir: Path | None = None,
        env: Mapping[str, str] | None = None,
        timeouts: Timeouts = DEFAULT,
    ) -> None:
        self.ctx = ctx
        # The script's environment before TF_CONFIG and friends are added.
        self.base_env = dict(os.environ if env is None else env)
        self.spec = ctx.spec
        self.workdir = workdir or Path.cwd()
        self.timeouts = timeouts
        self.stop = _child.StopRequest()
        self.credentials = credentials
        # Its temporary files' directory, deleted by YARN with the container.
        self.tmpdir = self.workdir / prelude.TMP_DIR
        self.session = self._new_session()
        self.stderr_tail: collections.deque[str] = collections.deque(
            maxlen=STDERR_TAIL_LINES
        )
        # The script's interpreter, started before formation (``preimport``)
        # and not yet handed its script.
        self.prestarted: _child.Child | None = None

    def run(self) -> int:
        self.tmpdir.mkdir(exist_ok=True)
        sock = self._reserve()
        port = reserved_port(sock)
        try:
            while True:
                code = self._run_attempt(port)
                next_attempt = self.stop.take_restart()
                if not next_attempt:
                    return code
                self._restart_in_place(next_attempt)
        finally:
            self._discard_prestarted()
            self.session.close()
            sock.close()  # the port is free only once the task is over

    def _run_attempt(self, port: int) -> int:
        """One attempt: register, wait for the cluster, run the script.

        Its exit code, or, when the master restarts the task in place, any
        code: :meth:`run` then goes on with the next attempt without reporting.
        """
        log.info(
            "%s attempt %d holds %s:%d",
            self.ctx.key,
            self.ctx.attempt,
            self.ctx.host,
            port,
        )
        # Import TensorFlow (several CPU-seconds) while the cluster forms,
        # not after: the script's interpreter starts now and waits for it. A
        # task with GPUs first learns which (CUDA reads CUDA_VISIBLE_DEVICES
        # once, when it loads), right after registering.
        script = self.workdir / self.spec.script_name
        prestart = bool(self.spec.preimport) and script.is_file()
        if prestart and not self.wanted_gpus:
            self.prestarted = self._prestart(script, port)
        if not self.ctx.master_address and not self._find_master():
            return self._end_without_script()
        visible = self.base_env.get(_gpus.NVIDIA_VISIBLE, "")
        self.session.start(port, nvidia_visible_devices=visible)
        if self.wanted_gpus:
            if not self._learn_gpus():
                return self._end_without_script()
            if prestart:
                self.prestarted = self._prestart(script, port)
        if not self.session.wait_for_cluster():
            return self._end_without_script()
        code = self._run_script(port)
        if self.stop.next_attempt:
            log.info("%s script ended (%s) for a restart in place", self.ctx.key, code)
            return code
        self._report_end(code)
        noticed = self.notices.active and not self.stop.event.is_set()
        if noticed:
            # Ended after a stop notice (saved, most likely): the master's
            # Stop comes once the generation's other scripts ended, by the
            # notice's deadline, and usually restarts this task in place.
            self.stop.event.wait(self.notices.wait_for_stop())
            if self.stop.event.is_set() and not self.stop.next_attempt:
                self._report_end(code)  # the final Stop: ended as stopped
        elif code != 0 and not self.stop.event.is_set():
            # The master may restart this task in place: its Stop is on the
            # stream before the report's reply, so this wait is short.
            self.stop.event.wait(self.timeouts.in_place_wait)
        return code if code >= 0 else 128 - code

    @property
    def wanted_gpus(self) -> int:
        """How many GPUs the task's role asks for."""
        return self.spec.group(self.ctx.role).gpus or 0

    def _learn_gpus(self) -> bool:
        """Wait for the task's devices; heartbeats report them from now on."""
        if not self.session.wait_for_devices():
            return False
        devices = self.session.devices
        assert devices is not None
        log.info("%s uses %s", self.ctx.key, _gpus.describe(devices))
        path = self.base_env.get("PATH")
        self.session.gpu_reader = lambda: _gpus.read(devices, path=path)
        return True

    def _restart_in_place(self, attempt: int) -> None:
        """Go on as ``attempt`` in this container, keeping the reserved port."""
        log.info("%s restarts in place as attempt %d", self.ctx.key, attempt)
        self._discard_prestarted()  # its environment names the old attempt
        self.session.close()
        self.ctx = replace(self.ctx, attempt=attempt)
        self.stderr_tail.clear()
        self.session = self._new_session()

    def _new_session(self) -> MasterSession:
        """The session of the current attempt, with its own stop notice file."""
        self.notices = NoticeBoard(stop_file(self.tmpdir, self.ctx.attempt))
        return MasterSession(
            self.ctx,
            self.stop,
            credentials=self.credentials,
            timeouts=self.timeouts,
            notices=self.notices,
        )

    def _find_master(self) -> bool:
        """A declared container: the master's address from skein's kv store."""
        try:
            address = discover.master_address(
                self.spec.registration_timeout, stopped=self.stop.event
            )
        except MasterUnavailableError as exc:
            self.stop.set(f"could not register: {exc}", 0)
            return False
        log.info("%s found the master at %s", self.ctx.key, address)
        self.ctx = replace(self.ctx, master_address=address)
        self.session.found_master(address)
        return True

    def _reserve(self) -> socket.socket:
        return reserve_task_port(
            self.ctx.port,
            wait=self.timeouts.port_wait,
            poll=self.timeouts.port_poll,
        )

    def _report_end(self, code: int) -> None:
        self.session.report_end(
            code,
            "\n".join(self.stderr_tail),
            container_ending=self.stop.container_ending,
        )

    def _end_without_script(self) -> int:
        self._discard_prestarted()
        reason = self.stop.reason
        if self.stop.next_attempt:
            return EXIT_RUNTIME_ERROR  # restarted in place before the cluster formed
        log.error("%s ends before its script started: %s", self.ctx.key, reason)
        self.stderr_tail.append(f"tfyarn: {reason}")
        if self.session.reached_master.is_set():  # else there is no one to tell
            self._report_end(EXIT_RUNTIME_ERROR)
        return EXIT_RUNTIME_ERROR

    def _run_script(self, port: int) -> int:
        formed_spec = self.session.cluster
        assert formed_spec is not None
        cluster = _clusterspec.decode(formed_spec)
        script = self.workdir / self.spec.script_name
        if not script.is_file():
            self._discard_prestarted()
            self.stderr_tail.append(
                f"tfyarn: the script {self.spec.script_name} is not in the container's "
                f"directory {self.workdir} (files: {sorted(os.listdir(self.workdir))})"
            )
            log.error("%s", self.stderr_tail[-1])
            return EXIT_BAD_ENV
        args = prelude.script_args(self.ctx, cluster)
        formed = prelude.formed_env(self.ctx, cluster, formed_spec.restart)
        command = prelude.plain_command(script, args)
        child, self.prestarted = self.prestarted, None
        drain = self.timeouts.tee_drain
        # Only the bootstrap says when its script returned: a plain start's
        # teardown has no bound.
        returned: Path | None = None
        if child is not None and _child.hand_over(child, args, formed, drain=drain):
            returned = _teardown.returned_file(self.tmpdir, self.ctx.attempt)
            log.info(
                "%s starts: %s (in the interpreter pre-started to import %s)",
                self.ctx.key,
                " ".join(command),
                ", ".join(self.spec.preimport),
            )
        else:
            env = {**self._spawn_env(port), **formed}
            child = _child.start(command, env, cwd=self.workdir, tail=self.stderr_tail)
            log.info("%s starts: %s", self.ctx.key, " ".join(command))
        teardown = _teardown.Teardown(returned, self.timeouts.teardown)
        code = _child.supervise(child.popen, self.stop, teardown)
        child.tee.join(timeout=drain)
        log.info("%s script exited with %s", self.ctx.key, child.popen.returncode)
        return code

    def _prestart(self, script: Path, port: int) -> _child.Child | None:
        child = _child.prestart(
            script,
            self.spec.preimport,
            self._spawn_env(port),
            cwd=self.workdir,
            tail=self.stderr_tail,
        )
        if child is not None:
            log.info(
                "%s pre-started the script's interpreter (pid %d), importing %s",
                self.ctx.key,
                child.popen.pid,
                ", ".join(self.spec.preimport),
            )
        return child

    def _spawn_env(self, port: int) -> dict[str, str]:
        gpus = _gpus.script_env(
            self.base_env,
            self.wanted_gpus,
            self.session.devices,
            task=self.ctx.key,
        )
        return prelude.spawn_env(
            self.base_env, port, self.ctx, tmpdir=self.tmpdir, gpus=gpus
        )

    def _discard_prestarted(self) -> None:
        child, self.prestarted = self.prestarted, None
        if child is not None:
            _child.discard(child, drain=self.timeouts.tee_drain)
            log.info("%s: the pre-started interpreter was stopped", self.ctx.key)
