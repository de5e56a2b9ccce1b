"""The task runtime: ``python -m tfyarn.runtime`` in every task container.

One task's life: reserve a port (held until the end), register with the master,
start the script's interpreter with its heavy modules imported (``preimport``,
see :mod:`tfyarn._preload`), wait for the ClusterSpec, hand the script its
TF_CONFIG (and optionally the legacy flags), heartbeat while it runs, forward
SIGTERM / the master's Stop to it (SIGKILL after the grace), report how it
ended, exit with its code.

Identity comes from the environment (see :mod:`tfyarn._env`): the job in
``TFYARN_JOB``, the role from the skein service, the index, attempt and master
address from the master's ``add_container``.
"""

from __future__ import annotations

import collections
import functools
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tfyarn import _tfconfig
from tfyarn._ports import reserve_port, reserved_port
from tfyarn._proto import master_pb2 as pb
from tfyarn.contract import clusterspec as _clusterspec
from tfyarn.contract import env as _env
from tfyarn.contract.channel import MasterClient, backoff_delays, call_until
from tfyarn.contract.heartbeat import heartbeat_interval
from tfyarn.errors import (
    MasterError,
    MasterRefusedError,
    MasterUnavailableError,
    SpecError,
)
from tfyarn.spec import JobSpec, Role

log = logging.getLogger("tfyarn.runtime")

STDERR_TAIL_LINES = 40
# How long a replaced task waits for its predecessor's port to be free.
PORT_WAIT = 15.0
EXIT_RUNTIME_ERROR = 1
EXIT_BAD_ENV = 2
# Run by path, with the job's interpreter: tfyarn need not be importable there.
BOOTSTRAP = Path(__file__).with_name("_preload.py")


@dataclass(frozen=True)
class TaskContext:
    """Who this task is, read from the container's environment."""

    spec: JobSpec
    role: Role
    index: int
    attempt: int
    restart: int
    master_address: str
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
        missing = [
            name
            for name in (_env.JOB, _env.ROLE, _env.TASK_INDEX, _env.MASTER_ADDRESS)
            if not env.get(name)
        ]
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
                index=int(env[_env.TASK_INDEX]),
                attempt=int(env.get(_env.ATTEMPT) or 0),
                restart=int(env.get(_env.RESTART) or 0),
                master_address=env[_env.MASTER_ADDRESS],
                host=env.get("NM_HOST") or socket.getfqdn(),
                port=int(env.get(_env.PORT) or 0),
                container_id=env.get("SKEIN_CONTAINER_ID", ""),
                yarn_container_id=env.get("CONTAINER_ID", ""),
            )
        except (ValueError, KeyError) as exc:
            raise SpecError(f"bad tfyarn task environment: {exc}") from exc


@dataclass
class _Child:
    """The script's interpreter, the thread teeing its stderr, and (while a
    pre-started one waits for its script) the pipe its message goes to."""

    popen: subprocess.Popen[bytes]
    tee: threading.Thread
    message_fd: int | None = field(default=None)


class _StopRequest:
    """Why and how the script must stop (master's Stop, SIGTERM, lost master)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reason = ""
        self.grace = 0.0

    def set(self, reason: str, grace: float) -> None:
        if not self.event.is_set():
            self.reason, self.grace = reason, grace
            self.event.set()


class Runtime:
    """Runs one task; :meth:`run` returns the process exit code."""

    def __init__(
        self,
        ctx: TaskContext,
        *,
        credentials: tuple[bytes, bytes] | None = None,
        workdir: Path | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.ctx = ctx
        # The script's environment before TF_CONFIG and friends are added.
        self.base_env = dict(os.environ if env is None else env)
        self.spec = ctx.spec
        self.workdir = workdir or Path.cwd()
        self.master = MasterClient(ctx.master_address, credentials)
        self.stop = _StopRequest()
        self.cluster_ready = threading.Event()
        self.cluster: pb.ClusterSpec | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(
            maxlen=STDERR_TAIL_LINES
        )
        self.done = threading.Event()
        # The script's interpreter, started before formation (``preimport``)
        # and not yet handed its script.
        self.prestarted: _Child | None = None
        self.reached_master = threading.Event()  # any call answered
        # Without a master for this long the job is over (YARN ends the
        # containers of a dead master; this is the bound if it does not).
        self.master_lost_after = max(60.0, 3 * self.spec.heartbeat_timeout)

    # -- the task's life ----------------------------------------------------------

    def run(self) -> int:
        sock = self._reserve()
        port = reserved_port(sock)
        log.info(
            "%s attempt %d holds %s:%d",
            self.ctx.key,
            self.ctx.attempt,
            self.ctx.host,
            port,
        )
        self.registration = pb.RegisterTaskRequest(
            task=self.ctx.task_key(),
            attempt=self.ctx.attempt,
            host=self.ctx.host,
            port=port,
            container_id=self.ctx.container_id,
            yarn_container_id=self.ctx.yarn_container_id,
        )
        # Import TensorFlow (several CPU-seconds) while the cluster forms,
        # not after: the script's interpreter starts now and waits for it.
        try:
            script = self.workdir / self.spec.script_name
            if self.spec.preimport and script.is_file():
                self.prestarted = self._prestart(script, port)
            # Registration rides on the WatchCluster call (one RPC per task).
            threading.Thread(target=self._watch, name="watch", daemon=True).start()
            threading.Thread(
                target=self._heartbeat, name="heartbeat", daemon=True
            ).start()
            if not self._wait_for_cluster():
                return self._end_without_script()
            code = self._run_script(port)
            self._report_end(code)
            return code if code >= 0 else 128 - code
        finally:
            self._discard_prestarted()
            self.done.set()
            sock.close()  # the port is free only once the task is over
            self.master.close()

    def _reserve(self) -> socket.socket:
        """Hold the task's port: TFYARN_PORT if given and free, else any.

        A replaced task asks for its predecessor's port so its address stays
        the same. Another process of this user may still be serving there (a
        TensorFlow server that outlived its task for a moment): both would
        bind with SO_REUSEPORT and share the connections, so wait (bounded)
        until nothing listens there.
        """
        if not self.ctx.port:
            return reserve_port(0)
        deadline = time.monotonic() + PORT_WAIT
        while _listening(self.ctx.port) and time.monotonic() < deadline:
            time.sleep(0.5)
        try:
            if _listening(self.ctx.port):
                raise OSError(f"a server still listens on port {self.ctx.port}")
            return reserve_port(self.ctx.port)
        except OSError as exc:
            # The predecessor's port was taken meanwhile: the master sees the
            # new address and decides (a PS-mode worker's cluster restarts).
            log.warning("port %d is taken (%s); reserving another", self.ctx.port, exc)
            return reserve_port(0)

    def _wait_for_cluster(self) -> bool:
        """Wait for the ClusterSpec (bounded); False if told to stop first."""
        deadline = time.monotonic() + self.spec.registration_timeout + 30
        while time.monotonic() < deadline:
            if self.stop.event.is_set():
                log.warning("stopping before the cluster formed: %s", self.stop.reason)
                return False
            if self.cluster_ready.wait(0.2):
                return True
        self.stop.set(
            f"the cluster did not form within {self.spec.registration_timeout:.0f} s "
            "of this task registering (other tasks never registered)",
            0,
        )
        return False

    def _end_without_script(self) -> int:
        self._discard_prestarted()
        log.error(
            "%s ends before its script started: %s", self.ctx.key, self.stop.reason
        )
        self.stderr_tail.append(f"tfyarn: {self.stop.reason}")
        if self.reached_master.is_set():  # else there is no one to tell
            self._report_end(EXIT_RUNTIME_ERROR)
        return EXIT_RUNTIME_ERROR

    def _run_script(self, port: int) -> int:
        assert self.cluster is not None
        cluster = _clusterspec.decode(self.cluster)
        role, index = self.ctx.role.value, self.ctx.index
        script = self.workdir / self.spec.script_name
        if not script.is_file():
            self._discard_prestarted()
            self.stderr_tail.append(
                f"tfyarn: the script {self.spec.script_name} is not in the container's "
                f"directory {self.workdir} (files: {sorted(os.listdir(self.workdir))})"
            )
            log.error("%s", self.stderr_tail[-1])
            return EXIT_BAD_ENV
        args = _tfconfig.script_args(
            self.spec.args, cluster, role, index, legacy=self.spec.legacy_flags
        )
        formed = {
            "TF_CONFIG": _tfconfig.tf_config(cluster, role, index),
            _env.RESTART: str(self.cluster.restart),
        }
        # sys.executable is the job's interpreter (JobSpec.python runs us).
        command = [sys.executable, "-u", str(script), *args]
        child = self._hand_over(args, formed)
        if child is None:
            child = self._start(command, {**self._spawn_env(port), **formed})
            log.info("%s starts: %s", self.ctx.key, " ".join(command))
        else:
            log.info(
                "%s starts: %s (in the interpreter pre-started to import %s)",
                self.ctx.key,
                " ".join(command),
                ", ".join(self.spec.preimport),
            )
        self._supervise(child.popen)
        child.tee.join(timeout=5)
        log.info("%s script exited with %s", self.ctx.key, child.popen.returncode)
        return int(child.popen.returncode)

    def _spawn_env(self, port: int) -> dict[str, str]:
        """The script's environment as far as it is known before formation.

        Both are read when TensorFlow is imported or its server created, so
        they must be there when the interpreter starts.
        """
        env = dict(self.base_env)
        env.update(
            {
                # TensorFlow binds its port with SO_REUSEPORT, next to our
                # reservation (tfyarn/_ports.py).
                "TF_GRPC_REUSE_PORT": "1",
                "PYTHONUNBUFFERED": "1",
                _env.PORT: str(port),
            }
        )
        return env

    def _start(
        self, command: list[str], env: Mapping[str, str], pass_fds: tuple[int, ...] = ()
    ) -> _Child:
        # Same process group as us: when YARN kills the container's group, the
        # script goes too. And if this runtime is killed alone (SIGKILL), the
        # kernel kills the script (PDEATHSIG, set by setpriv before exec): an
        # orphan would keep the port and the TF server alive behind the
        # master's back. (Not a preexec_fn: forking a process that runs gRPC
        # aborts the child in gRPC's fork handlers.)
        popen = subprocess.Popen(
            [*_die_with_parent(), *command],
            env=env,
            cwd=self.workdir,
            stderr=subprocess.PIPE,
            pass_fds=pass_fds,
        )
        tee = threading.Thread(target=self._tee_stderr, args=(popen,), daemon=True)
        tee.start()
        return _Child(popen, tee)

    def _prestart(self, script: Path, port: int) -> _Child | None:
        """Start the bootstrap: it imports ``spec.preimport``, then waits for
        the message :meth:`_hand_over` writes to its pipe."""
        read_fd, write_fd = os.pipe()  # both non-inheritable but for pass_fds
        command = [
            sys.executable,
            "-u",
            str(BOOTSTRAP),
            str(read_fd),
            str(script),
            *self.spec.preimport,
        ]
        try:
            child = self._start(command, self._spawn_env(port), pass_fds=(read_fd,))
        except OSError as exc:
            os.close(write_fd)
            log.warning("could not pre-start the script's interpreter: %s", exc)
            return None
        finally:
            os.close(read_fd)
        child.message_fd = write_fd
        log.info(
            "%s pre-started the script's interpreter (pid %d), importing %s",
            self.ctx.key,
            child.popen.pid,
            ", ".join(self.spec.preimport),
        )
        return child

    def _hand_over(self, args: list[str], env: Mapping[str, str]) -> _Child | None:
        """Give the pre-started interpreter its script's arguments and the
        environment known only now; None if there is none (alive) to give it to."""
        child, self.prestarted = self.prestarted, None
        if child is None or child.message_fd is None:
            return None
        message = json.dumps({"env": dict(env), "args": args}).encode()
        fd, child.message_fd = child.message_fd, None
        if child.popen.poll() is None:
            # A message larger than the pipe's buffer (64 KiB; TF_CONFIG of a
            # big job) is read only once the imports end: write it aside, so
            # a stop meanwhile is still handled, and ends the writer with the
            # interpreter (EPIPE).
            threading.Thread(
                target=_write_message, args=(fd, message), name="hand-over", daemon=True
            ).start()
            return child
        os.close(fd)
        # It died importing (a crash in an extension module): start the script
        # the plain way, which fails or not as it would have without preimport.
        child.popen.wait()
        child.tee.join(timeout=5)
        log.warning(
            "the pre-started interpreter ended with %s before its script was "
            "handed over; starting the script in a new one",
            child.popen.returncode,
        )
        return None

    def _discard_prestarted(self) -> None:
        """Kill and reap a pre-started interpreter that never got its script."""
        child, self.prestarted = self.prestarted, None
        if child is None:
            return
        if child.message_fd is not None:
            os.close(child.message_fd)
            child.message_fd = None
        _signal(child.popen, signal.SIGKILL)  # it ran imports only, no user code
        child.popen.wait()
        child.tee.join(timeout=5)
        log.info("%s: the pre-started interpreter was stopped", self.ctx.key)

    def _supervise(self, child: subprocess.Popen[bytes]) -> None:
        """Wait for the script; on a stop request, SIGTERM it, SIGKILL after the grace."""
        killed_at: float | None = None
        while child.poll() is None:
            if self.stop.event.is_set() and killed_at is None:
                log.warning("stopping the script: %s", self.stop.reason)
                _signal(child, signal.SIGTERM)
                killed_at = time.monotonic() + self.stop.grace
            if killed_at is not None and time.monotonic() >= killed_at:
                log.warning(
                    "the script outlived its %.0f s grace: SIGKILL", self.stop.grace
                )
                _signal(child, signal.SIGKILL)
                killed_at = float("inf")
            try:
                child.wait(timeout=0.2)
            except subprocess.TimeoutExpired:
                pass

    def _tee_stderr(self, child: subprocess.Popen[bytes]) -> None:
        assert child.stderr is not None
        out = sys.stderr.buffer
        for line in iter(child.stderr.readline, b""):
            out.write(line)
            out.flush()
            self.stderr_tail.append(line.decode("utf-8", "replace").rstrip("\n"))

    def _report_end(self, code: int) -> None:
        request = pb.ReportTaskEndRequest(
            task=self.ctx.task_key(),
            attempt=self.ctx.attempt,
            exit_code=code,
            stderr_tail="\n".join(self.stderr_tail),
        )
        try:
            call_until(
                f"reporting the end of {self.ctx.key}",
                lambda timeout: self.master.report_task_end(request, timeout=timeout),
                deadline=time.monotonic() + 15,
                attempt_timeout=5,
            )
        except (MasterUnavailableError, MasterRefusedError) as exc:
            # The master also sees the container end; this only loses the detail.
            log.warning("could not report the end to the master: %s", exc)

    # -- background threads -------------------------------------------------------

    def _watch(self) -> None:
        """Register and follow WatchCluster; reconnect while the master answers."""
        delay = backoff_delays(cap=5.0)
        started = last_ok = time.monotonic()
        while not self.done.is_set():
            known = self.cluster.generation if self.cluster else 0
            request = pb.WatchClusterRequest(
                task=self.ctx.task_key(),
                attempt=self.ctx.attempt,
                known_generation=known,
                register=self.registration,
            )
            try:
                for event in self.master.watch_cluster(request):
                    last_ok = time.monotonic()
                    self.reached_master.set()
                    if event.HasField("cluster_spec"):
                        self._on_cluster(event.cluster_spec)
                    elif event.HasField("stop"):
                        self.stop.set(event.stop.reason, event.stop.grace_seconds)
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
            # matters to restarts (issue 5), which start a new attempt.
            log.info("cluster generation %d received", spec.generation)
        self.cluster = spec
        self.cluster_ready.set()

    def _heartbeat(self) -> None:
        request = pb.HeartbeatRequest(
            task=self.ctx.task_key(), attempt=self.ctx.attempt
        )
        interval = heartbeat_interval(
            self.spec.heartbeat_interval, len(self.spec.task_keys())
        )
        last_ok = time.monotonic()
        while not self.done.wait(interval):
            try:
                self.master.heartbeat(request, timeout=max(interval, 5.0))
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


@functools.cache
def _die_with_parent() -> tuple[str, ...]:
    """A command prefix that makes Linux SIGKILL the command when we die."""
    setpriv = shutil.which("setpriv")  # util-linux
    if setpriv is None:
        log.warning("setpriv not found: the script may outlive a killed runtime")
        return ()
    probe = subprocess.run(
        [setpriv, "--help"], capture_output=True, text=True, check=False
    )
    if "--pdeathsig" not in probe.stdout:
        return ()
    return (setpriv, "--pdeathsig", "KILL", "--")


def _write_message(fd: int, message: bytes) -> None:
    """Write all of ``message`` to a pipe, then close it (the message's end)."""
    try:
        view = memoryview(message)
        while view:
            view = view[os.write(fd, view) :]
    except OSError as exc:  # the interpreter died: its exit code tells
        log.warning("could not hand the script over: %s", exc)
    finally:
        os.close(fd)


def _listening(port: int) -> bool:
    """Whether something accepts connections on this port of this host."""
    for host in ("127.0.0.1", "::1"):
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return True
        except OSError:
            continue
    return False


def _signal(child: subprocess.Popen[bytes], sig: int) -> None:
    try:
        child.send_signal(sig)
    except ProcessLookupError:
        pass


def main() -> int:
    """Entry point of ``python -m tfyarn.runtime``."""
    logging.basicConfig(
        level=logging.INFO,
        format="%(asctime)s tfyarn.runtime %(levelname)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        ctx = TaskContext.from_env(os.environ)
    except SpecError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_BAD_ENV
    runtime = Runtime(ctx)
    # SIGTERM (YARN preemption, `tfyarn kill`): pass it on with the job's grace.
    signal.signal(
        signal.SIGTERM,
        lambda *_: runtime.stop.set("SIGTERM received", ctx.spec.stop_grace),
    )
    return runtime.run()


if __name__ == "__main__":
    sys.exit(main())
