"""Run the test tiers in lanes side by side, and say how long each took.

The tiers are independent pytest sessions, each with the cluster it needs
(tests/README.md says which tier proves what). Tiers in one lane run one
after the other; the lanes run side by side, since most of an integration
tier's time is spent waiting on YARN, not computing, and every cluster has
ports and directories of its own. Each tier's output goes to
``tests/artifacts/tiers/<tier>.log`` and is printed whole once the tier ends,
so the lanes' lines never interleave. The last line counts every tier's
tests: ``tests: N passed, N failed, N skipped``.

Usage::

    python tests/tiers.py                 # every tier
    python tests/tiers.py unit secure     # only these (in their lanes)
    python tests/tiers.py unit -- -k spec # pytest options after ``--``
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "tests" / "artifacts" / "tiers"
INTEGRATION = "tests/integration"
# The variable that names a tier's one-host cluster (tests/integration/conftest.py
# reuses a running one that fits). Tiers of one lane that name the same cluster
# share it: the earlier ones keep it running, the lane stops it at its end.
HOME = "TFYARN_CLUSTER_HOME"


@dataclass(frozen=True)
class Tier:
    name: str
    args: tuple[str, ...]
    proves: str
    env: tuple[tuple[str, str], ...] = ()


# Jobs that fail on purpose and recover, on a one-host cluster of their own:
# the longest part of the integration tests, beside the plain tier's.
RECOVERY = tuple(
    f"{INTEGRATION}/{name}"
    for name in (
        "test_recovery.py",
        "test_restart_policy.py",
        "test_gang.py",
        "test_daemon_restarts.py",
    )
)
# Jobs resized while they train (graceful stops, `tfyarn scale`), on a
# one-host cluster of their own.
ELASTIC = f"{INTEGRATION}/test_elastic.py"
ELASTIC_HOME = "/var/tmp/tfyarn-tests/elastic"
ELASTIC_PORT_OFFSET = "1100"
# The examples trained and resumed end to end, and TensorFlow reading HDFS
# through the plugin: the plain tier's longest jobs, on a cluster of their own
# so that they run beside it.
EXAMPLES = tuple(
    f"{INTEGRATION}/{name}"
    for name in (
        "test_examples.py",
        "test_hdfs_plugin_job.py",
        "test_hdfs_mwms.py",
        "test_hdfs_ps_staging.py",
    )
)
EXAMPLES_HOME = "/var/tmp/tfyarn-tests/examples"
EXAMPLES_PORT_OFFSET = "1700"
# The notebook way in (tfyarn.run from a real Jupyter kernel, MLflow), on the
# examples' cluster after them in their lane (a cluster start saved).
NOTEBOOK = f"{INTEGRATION}/notebook"
# tfyarn as a gateway node installs it: the sdist and the wheel built, checked,
# installed into fresh venvs without cargo, and jobs run from those; on the
# examples' cluster, after them in their lane. The servers tier (the program on
# the gateway) runs on the elastic tier's cluster, after it.
GATEWAY = f"{INTEGRATION}/gateway"
SERVERS = f"{INTEGRATION}/servers"
# Where the recovery tier's cluster lives (.ci/run stops it whatever happens).
RECOVERY_HOME = "/var/tmp/tfyarn-tests/recovery"
RECOVERY_PORT_OFFSET = "800"


def one_host_cluster(home: str, port_offset: str) -> tuple[tuple[str, str], ...]:
    """The environment naming a tier's one-host cluster and its ports."""
    return ((HOME, home), ("TFYARN_CLUSTER_PORT_OFFSET", port_offset))


EXAMPLES_CLUSTER = one_host_cluster(EXAMPLES_HOME, EXAMPLES_PORT_OFFSET)
RECOVERY_CLUSTER = one_host_cluster(RECOVERY_HOME, RECOVERY_PORT_OFFSET)
ELASTIC_CLUSTER = one_host_cluster(ELASTIC_HOME, ELASTIC_PORT_OFFSET)

TIERS = (
    # Two pytest-xdist workers: the tier alone takes about a minute instead
    # of two and a half (the Rust tests' cargo and mypy beside the rest).
    Tier(
        "unit",
        ("tests/unit", "-n", "2"),
        "code without Hadoop: fakes, parsers, the CLI",
    ),
    Tier(
        "plain",
        (
            INTEGRATION,
            f"--ignore={INTEGRATION}/multihost",
            f"--ignore={INTEGRATION}/secure",
            f"--ignore={INTEGRATION}/ha",
            f"--ignore={INTEGRATION}/ha_secure",
            f"--ignore={INTEGRATION}/versions",
            *(f"--ignore={path}" for path in RECOVERY),
            *(f"--ignore={path}" for path in EXAMPLES),
            f"--ignore={ELASTIC}",
            f"--ignore={SERVERS}",
            f"--ignore={NOTEBOOK}",
            f"--ignore={GATEWAY}",
        ),
        "one-host YARN + HDFS: jobs, data, the plugin, refusals, Docker",
    ),
    Tier(
        "examples",
        EXAMPLES,
        "the examples end to end, TensorFlow on HDFS through the plugin",
        env=EXAMPLES_CLUSTER,
    ),
    Tier(
        "recovery",
        tuple(path for path in RECOVERY if (REPO / path).exists()),
        "lost tasks, restarts, gang allocation, daemon restarts",
        env=RECOVERY_CLUSTER,
    ),
    Tier(
        "elastic",
        (ELASTIC,),
        "graceful stops and jobs scaled while they train",
        env=ELASTIC_CLUSTER,
    ),
    Tier(
        "servers",
        (SERVERS,),
        "TensorFlow servers on YARN, the program on the gateway (TF1 in-graph, a notebook)",
        env=ELASTIC_CLUSTER,
    ),
    Tier(
        "notebook",
        (NOTEBOOK,),
        "tfyarn.run from a real Jupyter kernel: results, remote errors, MLflow",
        env=EXAMPLES_CLUSTER,
    ),
    Tier(
        "secure",
        (f"{INTEGRATION}/secure",),
        "Kerberos: a KDC, tokens and their renewal",
    ),
    Tier(
        "ha",
        (f"{INTEGRATION}/ha",),
        "HA NameNodes and ResourceManagers failing over under running jobs",
    ),
    Tier(
        "ha_secure",
        (f"{INTEGRATION}/ha_secure",),
        "HA with Kerberos: tokens of the name service through NameNode failovers",
    ),
    Tier(
        "multihost",
        (f"{INTEGRATION}/multihost",),
        "three hosts in network namespaces: failures, --python_env, queues",
    ),
    Tier(
        "wheel",
        # The heavy test (the wheel's venv shipped whole with --python_env
        # auto: its job alone about 13 min) runs by hand: tests/run wheel -- -m heavy.
        (GATEWAY, "-m", "not heavy"),
        "the sdist and wheel built, checked, installed without Rust; jobs from them",
        env=EXAMPLES_CLUSTER,
    ),
    Tier(
        "versions",
        # Its heavy tests (the profile job across failovers and past its
        # tokens' end, scale and graceful kill: 11-14 min a version here) run
        # by hand: tests/run versions -- -m heavy.
        (f"{INTEGRATION}/versions", "-m", "not heavy"),
        "other Hadoop lines in production's profiles (3.1.1 Kerberos + HA, "
        "3.3.6 Kerberos): a keytab job with a shipped environment, failovers, "
        "token expiry, scale, graceful kill, GPUs",
    ),
)
# Five lanes on two cores: each tier's cluster waits on YARN more than it
# computes. The versions tier's clusters (+2600, +3000) and ha_secure's
# (+1500) have ports of their own. The gateway's tiers (servers, notebook,
# wheel) end lanes rather than make a sixth: a full run with six lanes
# (load average 25-33) stretched every tier two to four times, and these
# tiers run at half the time once the other lanes are done. The lanes'
# lengths are balanced on a run's tier times (tests/README.md).
LANES = (
    ("plain",),
    ("examples", "versions", "wheel", "notebook"),
    ("unit", "multihost"),
    ("recovery", "ha_secure"),
    ("secure", "ha", "elastic", "servers"),
)
# No tier may keep CI (90 minutes, its own set-up included) waiting past
# this point of the run: it is stopped and counted failed. One deadline for
# the run, not one per tier: the longest tier takes most of an hour on two
# busy cores, and a tier that hangs is stopped by pytest-timeout (900 s a
# test) long before.
RUN_DEADLINE_S = 80 * 60
# Time pytest gets after SIGINT to stop its clusters before it is killed.
STOP_GRACE_S = 120


@dataclass
class Outcome:
    tier: Tier
    code: int = -1
    seconds: float = 0.0
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    note: str = ""
    log: Path = field(default_factory=Path)

    @property
    def ok(self) -> bool:
        return self.code == 0 and self.failed == 0 and self.passed > 0


def count(junit: Path) -> tuple[int, int, int]:
    """(passed, failed, skipped) from pytest's JUnit XML; errors count as failed."""
    root = ET.parse(junit).getroot()
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = failed = skipped = 0
    for suite in suites:
        total += int(suite.get("tests", 0))
        failed += int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        skipped += int(suite.get("skipped", 0))
    return total - failed - skipped, failed, skipped


_PRINTING = threading.Lock()


def say(*lines: str) -> None:
    """Print whole lines at once: the lanes' threads print side by side."""
    with _PRINTING:
        sys.stdout.write("".join(f"{line}\n" for line in lines))
        sys.stdout.flush()


def run_tier(
    tier: Tier,
    extra: list[str],
    stop: threading.Event,
    deadline: float,
    *,
    keep_cluster: bool = False,
) -> Outcome:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    log = ARTIFACTS / f"{tier.name}.log"
    junit = ARTIFACTS / f"{tier.name}.xml"
    junit.unlink(missing_ok=True)
    outcome = Outcome(tier, log=log)
    command = [sys.executable, "-m", "pytest", *tier.args, f"--junitxml={junit}"]
    started = time.monotonic()
    say(f"[tiers] {tier.name}: started ({tier.proves})")
    with log.open("w") as out:
        proc = subprocess.Popen(
            [*command, *extra],
            cwd=REPO,
            env={
                **os.environ,
                **dict(tier.env),
                # A later tier of the lane runs on this tier's cluster.
                **({"TFYARN_KEEP_CLUSTER": "1"} if keep_cluster else {}),
            },
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        while proc.poll() is None:
            if stop.is_set() or time.monotonic() > deadline:
                outcome.note = "interrupted" if stop.is_set() else "over its deadline"
                _stop(proc)
                break
            time.sleep(1)
        outcome.code = proc.wait()
    outcome.seconds = time.monotonic() - started
    if junit.exists():
        outcome.passed, outcome.failed, outcome.skipped = count(junit)
    elif not outcome.note:
        outcome.note = "pytest wrote no results"
    if outcome.code == 5:
        outcome.note = "no test ran"
    return outcome


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT first, so pytest tears its clusters down; SIGKILL if it does not end."""
    try:
        os.killpg(proc.pid, signal.SIGINT)
        proc.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run_lane(
    tiers: list[Tier],
    extra: list[str],
    stop: threading.Event,
    deadline: float,
    done: list[Outcome],
) -> None:
    kept: set[str] = set()
    try:
        for i, tier in enumerate(tiers):
            if stop.is_set():
                return
            home = dict(tier.env).get(HOME)
            keep = home is not None and any(
                dict(later.env).get(HOME) == home for later in tiers[i + 1 :]
            )
            if keep and home:
                kept.add(home)
            outcome = run_tier(tier, extra, stop, deadline, keep_cluster=keep)
            done.append(outcome)
            say(
                f"\n===== tier {tier.name} ({outcome.log}) =====",
                outcome.log.read_text(errors="replace"),
                f"[tiers] {tier.name}: {summary(outcome)}",
            )
    finally:
        for home in sorted(kept):
            stop_cluster(home)


def stop_cluster(home: str) -> None:
    """Stop the cluster tiers of a lane shared (the last of them reused it)."""
    subprocess.run(
        [sys.executable, "-m", "tfyarn.cli", "cluster", "stop", "--base-dir", home],
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        timeout=STOP_GRACE_S,
        check=False,
    )


def summary(outcome: Outcome) -> str:
    word = "passed" if outcome.ok else "FAILED"
    text = (
        f"{word} in {outcome.seconds / 60:.1f} min: {outcome.passed} passed, "
        f"{outcome.failed} failed, {outcome.skipped} skipped"
    )
    return f"{text} ({outcome.note})" if outcome.note else text


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    names = {t.name for t in TIERS}
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tiers", nargs="*", metavar="TIER", help=", ".join(names))
    args = parser.parse_args(argv)
    unknown = sorted(set(args.tiers) - names)
    if unknown:
        parser.error(f"unknown tier {', '.join(unknown)}; the tiers are {names}")
    wanted = set(args.tiers) or names
    by_name = {t.name: t for t in TIERS}
    lanes = [[by_name[n] for n in lane if n in wanted] for lane in LANES]

    stop = threading.Event()
    done: list[Outcome] = []
    started = time.monotonic()
    deadline = started + RUN_DEADLINE_S
    threads = [
        threading.Thread(target=run_lane, args=(lane, extra, stop, deadline, done))
        for lane in lanes
        if lane
    ]
    for thread in threads:
        thread.start()
    try:
        for thread in threads:
            while thread.is_alive():
                thread.join(timeout=1)
    except KeyboardInterrupt:
        stop.set()
        for thread in threads:
            thread.join()

    print("\n[tiers] tier       result", flush=True)
    order = [t.name for t in TIERS]
    for outcome in sorted(done, key=lambda o: order.index(o.tier.name)):
        print(f"[tiers] {outcome.tier.name:<10} {summary(outcome)}")
    missing = wanted - {o.tier.name for o in done}
    for name in sorted(missing):
        print(f"[tiers] {name:<10} not run (interrupted)")
    print(f"[tiers] all tiers took {(time.monotonic() - started) / 60:.1f} min")
    passed = sum(o.passed for o in done)
    # A tier that failed with no failed test (a crash, a deadline) counts as one.
    failed = sum(o.failed or (0 if o.ok else 1) for o in done)
    skipped = sum(o.skipped for o in done)
    print(f"tests: {passed} passed, {failed} failed, {skipped} skipped", flush=True)
    return 0 if not missing and all(o.ok for o in done) else 1


if __name__ == "__main__":
    sys.exit(main())
