"""Hand the active role of an HA cluster's pair to the other member
(``tfyarn cluster failover namenode|resourcemanager``), as an operator does
before maintenance.

NameNodes: ``hdfs haadmin -failover nn1 nn2``, which with automatic failover
goes through the failover controllers (the active one's controller makes its
NameNode standby and lets the other's take the lock). ResourceManagers elect
their leader inside themselves: Hadoop offers no graceful handover while
automatic failover is on, so the active one is stopped (SIGTERM: it leaves
the election at once), the other takes over, and the stopped one starts
again as the standby.
"""

from __future__ import annotations

import dataclasses
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from tfyarn.cluster import _daemon_archive, _ha, _process
from tfyarn.cluster._settings import ClusterSettings
from tfyarn.cluster._status import Instance
from tfyarn.errors import ClusterError

PAIRS = ("namenode", "resourcemanager")
# How long `hdfs haadmin -failover` may take (a JVM start and two RPCs).
HAADMIN_TIMEOUT_S = 120.0
# How long a ResourceManager may take to stop on SIGTERM.
STOP_WAIT_S = 30.0


@dataclasses.dataclass(frozen=True)
class Pair:
    """An HA pair as found: its title, active member and the other."""

    title: str
    active: _ha.Member
    other: _ha.Member
    webs: tuple[tuple[_ha.Member, int], ...]


@dataclasses.dataclass(frozen=True)
class Outcome:
    """What ``failover`` did."""

    title: str
    from_id: str
    to_id: str
    started: int | None  # the pid of a member started again
    seconds: float

    def summary(self) -> str:
        again = (
            f"; {self.from_id} was stopped and runs again as the standby "
            f"(pid {self.started})"
            if self.started
            else f"; {self.from_id} is the standby"
        )
        return (
            f"Failed the {self.title}s over: {self.to_id} is active{again} "
            f"({self.seconds:.1f} s)."
        )


def check(
    base_dir: Path,
    settings: ClusterSettings,
    daemon: str,
    pids: Mapping[str, int | None],
    master: str,
) -> Pair:
    """The pair ``daemon`` names, with both members running and one active.

    Raises
    ------
    ClusterError
        Not an HA cluster, an unknown pair, a member down or none active.
    """
    if daemon not in PAIRS:
        raise ClusterError(
            f"unknown pair {daemon!r}: `tfyarn cluster failover` takes "
            f"{' or '.join(PAIRS)}"
        )
    title = "NameNode" if daemon == "namenode" else "ResourceManager"
    if not settings.ha:
        raise ClusterError(
            f"the cluster in {base_dir} has one {title}: nothing to fail over to. "
            "Start a cluster with two (`tfyarn cluster start --ha`), or rehearse "
            f"a crash with `tfyarn cluster restart {daemon}`"
        )
    webs = (
        _ha.namenode_webs(settings) if daemon == "namenode" else _ha.rm_webs(settings)
    )
    down = [m.id for m, _ in webs if pids.get(m.key) is None]
    if down:
        raise ClusterError(
            f"{title} {', '.join(down)} of the cluster in {base_dir} is not "
            f"running: a failover needs both; `tfyarn cluster restart {daemon} "
            f"{down[0]}` starts it"
        )
    states = _ha.states(webs, master)
    active = [m for m, _ in webs if states[m.id] == "active"]
    if len(active) != 1:
        raise ClusterError(
            f"the {title}s are "
            + ", ".join(f"{i} {s}" for i, s in states.items())
            + ": a failover needs exactly one active; wait for the failover "
            "controllers (`tfyarn cluster status`)"
        )
    other = next(m for m, _ in webs if m != active[0])
    return Pair(title, active[0], other, tuple(webs))


def namenodes(
    base_dir: Path,
    pair: Pair,
    *,
    master: str,
    env: Mapping[str, str],
    timeout: float,
    log: Callable[[str], None],
) -> None:
    """A graceful NameNode failover through the failover controllers.

    Raises
    ------
    ClusterError
        ``hdfs haadmin`` failed, or the other NameNode was not active in time.
    """
    log(f"Failing over from {pair.active.id} to {pair.other.id} (hdfs haadmin) ...")
    command = [
        str(base_dir / "bin" / "hdfs"),
        "haadmin",
        "-failover",
        pair.active.id,
        pair.other.id,
    ]
    try:
        done = subprocess.run(
            command,
            env=dict(env),
            capture_output=True,
            text=True,
            timeout=min(timeout, HAADMIN_TIMEOUT_S),
            check=False,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(
            f"`hdfs haadmin -failover {pair.active.id} {pair.other.id}` took more "
            f"than {min(timeout, HAADMIN_TIMEOUT_S):.0f} s"
        ) from exc
    if done.returncode != 0:
        # Java's stack frames say nothing to a person: keep the messages.
        said = [
            line.strip()
            for line in (done.stderr + done.stdout).splitlines()
            if line.strip() and not line.lstrip().startswith("at ")
        ]
        raise ClusterError(
            f"`hdfs haadmin -failover {pair.active.id} {pair.other.id}` failed "
            f"(exit {done.returncode}): {' / '.join(said)[-1500:]}"
        )
    wait_active(pair.other, pair, master, timeout=timeout)


def resourcemanagers(
    base_dir: Path,
    pair: Pair,
    active: Instance,
    spawn: Callable[[], subprocess.Popen[bytes]],
    *,
    master: str,
    timeout: float,
    log: Callable[[str], None],
) -> subprocess.Popen[bytes]:
    """Stop the active ResourceManager (``active``), wait for the other to
    take over, and start it again (``spawn``) to be the standby; its process.

    Raises
    ------
    ClusterError
        It would not stop, or the other was not active within ``timeout``.
    """
    stop_gracefully(base_dir, active, log=log)
    wait_active(pair.other, pair, master, timeout=timeout)
    proc = spawn()
    log(f"Waiting for the {active.daemon.title} to be back as standby ...")
    return proc


def stop_gracefully(
    base_dir: Path, inst: Instance, *, log: Callable[[str], None]
) -> int:
    """SIGTERM a daemon and wait until it is gone; the pid stopped.

    Raises
    ------
    ClusterError
        It was not running, or outlived ``STOP_WAIT_S``.
    """
    pid = _process.running_pid(base_dir, inst.daemon, inst.key)
    if pid is None:
        raise ClusterError(f"the {inst.daemon.title} is not running")
    log(f"Stopping the {inst.daemon.title} (pid {pid}, SIGTERM) ...")
    wait = _daemon_archive.stop_grace(pid, STOP_WAIT_S)
    _process._signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while not _process.is_gone(pid):
        if time.monotonic() > deadline:
            raise ClusterError(
                f"the {inst.daemon.title} (pid {pid}) did not stop within "
                f"{wait:.0f} s of SIGTERM; see "
                f"{_process.log_file(base_dir, inst.key)}"
            )
        time.sleep(0.2)
    _daemon_archive.keep(base_dir, inst.key)
    return pid


def wait_active(member: _ha.Member, pair: Pair, master: str, *, timeout: float) -> None:
    """Return once ``member`` is its pair's active one.

    Raises
    ------
    ClusterError
        It was not active within ``timeout`` seconds (with the pair's states).
    """
    member, port = next((m, p) for m, p in pair.webs if m.id == member.id)
    deadline = time.monotonic() + timeout
    while not _ha.is_active(member, port, master):
        if time.monotonic() > deadline:
            states = _ha.states(list(pair.webs), master)
            raise ClusterError(
                f"{pair.title} {member.id} was not active {timeout:.0f} s into "
                "the failover ("
                + ", ".join(f"{i} {s}" for i, s in states.items())
                + "); see the failover controllers' and daemons' logs"
            )
        time.sleep(0.25)
