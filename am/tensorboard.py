"""The job's TensorBoard: a child process of the master, behind skein's web UI.

``tfyarn submit --tensorboard LOGDIR`` asks for it. The job's scripts write
event files to LOGDIR (``tfyarn.tensorboard.LogSync`` uploads them whole as they
grow). TensorBoard here runs without TensorFlow (its own stub reader; scalars,
histograms, images and text work): measured 85 MiB RSS and under a second to
start, against 530 MiB with TensorFlow imported. So tfyarn's HDFS plugin, a
TensorFlow filesystem, is not there to open ``hdfs://``: for a remote LOGDIR a
:class:`Mirror` thread copies the event files into a local directory of this
container, whole files only, and TensorBoard reads that. A local LOGDIR is
read as it is.

TensorBoard listens on loopback only, like the status page: it has no
authentication, and skein's web UI in this same container is what the
ResourceManager's proxy reaches. It dies with the master: stopped on shutdown,
SIGKILLed by the kernel if the master dies (PR_SET_PDEATHSIG), and in the
container's process group that YARN kills.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import subprocess
import sys
import threading
import time
import uuid

from tfyarn.data import fs as _fs
from tfyarn.errors import HdfsError

log = logging.getLogger(__name__)

MIRROR_INTERVAL = 5.0  # seconds; LogSync uploads every 30 s by default
START_TIMEOUT = 60.0
_LISTENING = re.compile(r"TensorBoard \S+ at http://[^\s/]+:(\d+)/")
# Die with the master: PR_SET_PDEATHSIG (1) = SIGKILL, set by the child itself
# (a preexec_fn is unsafe in the threaded master); if the master is already
# gone, exit. Block TensorFlow's import so TensorBoard uses its small reader.
_LAUNCH = """\
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)
except (OSError, AttributeError):
    pass  # not Linux: YARN's process-group kill still applies
if os.getppid() != int(sys.argv.pop(1)):
    sys.exit("tensorboard: the master is gone")
sys.modules["tensorflow"] = None
sys.argv[0] = "tensorboard"
from tensorboard.main import run_main
run_main()
"""


class Mirror:
    """Copy new or grown files under ``source`` (any tfyarn.data.fs URL) to ``dest``.

    Each file is copied whole into ``staging`` (outside ``dest``: TensorBoard
    takes any name containing "tfevents" for an event file, a half-written one
    too), then renamed into place, so TensorBoard only ever sees whole files.
    Event files only grow, so a changed size is a changed file. Names starting
    with "." (LogSync's temporary uploads) are skipped.

    A file still open for writing (a script writing summaries straight to
    ``hdfs://`` through tfyarn's plugin) lists its size as of the writer's last
    flush, but hdfs-native reads only its completed blocks until it is closed.
    Such a short copy is taken again next round, and never replaces a longer
    copy already here.
    """

    def __init__(self, source: str, dest: str, staging: str) -> None:
        self.source = source.rstrip("/")
        self.dest = dest
        self.staging = staging
        self._fs = _fs.resolve(self.source)
        self._sizes: dict[str, int] = {}
        os.makedirs(dest, exist_ok=True)
        os.makedirs(staging, exist_ok=True)

    def sync(self) -> int:
        """Copy what changed since the last call; how many files were copied."""
        try:
            return self._sync_dir(self.source, "")
        except _fs.PathNotFoundError:
            return 0  # the job has not written its first summary yet

    def _sync_dir(self, url: str, rel: str) -> int:
        copied = 0
        for entry in self._fs.ls(url):
            name = entry.url.rstrip("/").rsplit("/", 1)[-1]
            if not name or name.startswith("."):
                continue
            path = f"{rel}/{name}" if rel else name
            if entry.is_dir:
                copied += self._sync_dir(entry.url, path)
                continue
            if self._sizes.get(path) == entry.size:
                continue
            # A short copy (the file is still being written) is taken again.
            if self._copy(entry.url, path) >= entry.size:
                self._sizes[path] = entry.size
                copied += 1
        return copied

    def _copy(self, url: str, path: str) -> int:
        """Copy ``url`` to ``path`` under ``dest``; the bytes read."""
        target = os.path.join(self.dest, *path.split("/"))
        os.makedirs(os.path.dirname(target), exist_ok=True)
        tmp = os.path.join(self.staging, uuid.uuid4().hex)
        read = 0
        try:
            with open(tmp, "wb") as out:
                for chunk in self._fs.read_chunks(url):
                    out.write(chunk)
                    read += len(chunk)
            if not os.path.exists(target) or read >= os.path.getsize(target):
                os.replace(tmp, target)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return read


def mirror_loop(mirror: Mirror, stop: threading.Event, interval: float) -> None:
    """Sync until ``stop`` is set; a failure is logged (once per message) and retried."""
    last = ""
    while True:
        try:
            mirror.sync()
            last = ""
        except (HdfsError, OSError) as exc:  # HDFS down for a while: retry
            if str(exc) != last:
                log.warning("TensorBoard mirror of %s failed: %s", mirror.source, exc)
            last = str(exc)
        if stop.wait(interval):
            return


class TensorBoard:
    """TensorBoard over ``logdir`` (plus its mirror when remote); see the module doc."""

    def __init__(self, logdir: str, workdir: str) -> None:
        self.logdir = logdir
        self.local_dir = logdir
        self.port: int | None = None
        self.problem = ""
        self.process: subprocess.Popen[str] | None = None
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._tail: collections.deque[str] = collections.deque(maxlen=20)
        if _fs.is_remote(logdir):
            self.local_dir = os.path.join(workdir, "tensorboard-logs")
            self._mirror: Mirror | None = Mirror(
                logdir, self.local_dir, os.path.join(workdir, "tensorboard-staging")
            )
        else:
            self._mirror = None

    def start(self) -> None:
        """Start the mirror and the process.

        Call from the main thread: the kernel's parent-death signal fires when
        the thread that started the process ends, not the process.
        """
        if self._mirror is not None:
            threading.Thread(
                target=mirror_loop,
                args=(self._mirror, self._stop, MIRROR_INTERVAL),
                name="tensorboard-mirror",
                daemon=True,
            ).start()
        command = [
            sys.executable,
            "-c",
            _LAUNCH,
            str(os.getpid()),
            f"--logdir={self.local_dir}",
            "--host=127.0.0.1",
            "--port=0",  # the OS picks; TensorBoard prints it (read below)
            "--load_fast=false",  # no second (Rust) server process
            "--reload_interval=5",
        ]
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        threading.Thread(
            target=self._read_output, name="tensorboard-output", daemon=True
        ).start()

    def _read_output(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for line in self.process.stdout:
            line = line.rstrip()
            self._tail.append(line)
            log.info("tensorboard: %s", line)
            found = _LISTENING.search(line)
            if found and self.port is None:
                self.port = int(found.group(1))
                self._ready.set()
        code = self.process.wait()
        if self.port is None:
            tail = " | ".join(self._tail) or "no output"
            self.problem = f"TensorBoard exited with code {code} before serving: {tail}"
        self._ready.set()

    def wait_ready(self, timeout: float = START_TIMEOUT) -> int | None:
        """The port once TensorBoard serves; None (and :attr:`problem`) if it failed."""
        if not self._ready.wait(timeout):
            self.problem = f"TensorBoard did not start within {timeout:.0f} s"
            self.stop()
        return self.port

    def state(self) -> tuple[bool, str]:
        """(serving, a few words for the status page)."""
        if self.problem:
            return False, self.problem
        if self.process is not None and self.process.poll() is not None:
            return False, f"TensorBoard ended (exit code {self.process.returncode})"
        if self.port is None:
            return False, "TensorBoard is starting"
        return True, f"logs from {self.logdir}"

    def stop(self, grace: float = 5.0) -> None:
        """Stop the mirror and the process (SIGTERM, SIGKILL after ``grace``)."""
        self._stop.set()
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        deadline = time.monotonic() + grace
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        if process.poll() is None:
            process.kill()
            process.wait()
