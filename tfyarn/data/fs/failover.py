"""How long the HDFS client keeps trying NameNodes: through a failover, or not at all.

hdfs-native (its ``NameServiceProxy::call_inner``) tries the NameNodes of
its target in turn. Each time it has tried them all (every ``n``-th failover,
``n`` NameNodes) it sleeps ``min(base * 2**round * jitter, max)`` ms,
``jitter`` uniform in [0.5, 1.5) and ``round`` the number of passes so far,
and after ``max.attempts`` failovers it gives up with the last error.

One rule picks the three settings (``dfs.client.failover.max.attempts``,
``.sleep.base.millis``, ``.sleep.max.millis``):

- a **name service with two or more NameNodes** (HA) gets :data:`HA`: seven
  passes of sleeps, so a call keeps trying for at least 19.5 s (at most
  24.5 s; :func:`total_sleep_ms`) and then tries every NameNode once more.
  Killing the active NameNode costs about a second for its ZKFC to notice and
  a few more for the standby to become active: the client rides that out;
- **one NameNode** (``hdfs://host:port``, or a service with one NameNode)
  gets :data:`FAST`: three attempts with 0.6-1.6 s of sleep between them, so
  a mistyped address fails at once instead of after hdfs-native's minutes of
  retries.

Which target: the URL's authority when it names a service of
``dfs.nameservices`` in hdfs-site.xml (an authority with a port is one
NameNode), ``fs.defaultFS`` for ``hdfs:///``, and for ``viewfs://`` every name
service its mount table links to (one client, so one setting, serves them
all: the widest service decides the number of attempts, and a narrower one
then gets more passes than seven).

Explicit settings win: ``storage_options`` over everything, and a key the
user's own core-site.xml or hdfs-site.xml sets is not overridden (hdfs-native
reads those files itself; ours are passed as overrides only for keys they do
not set).

The TensorFlow plugin applies the same rule, with the same numbers, in
``tfyarn/hdfs_plugin/src/failover.rs``: change both together.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlparse

from tfyarn.contract.hadoop_conf import HadoopConf, NameNode

MAX_ATTEMPTS = "dfs.client.failover.max.attempts"
SLEEP_BASE = "dfs.client.failover.sleep.base.millis"
SLEEP_MAX = "dfs.client.failover.sleep.max.millis"
KEYS = (MAX_ATTEMPTS, SLEEP_BASE, SLEEP_MAX)


@dataclass(frozen=True)
class Policy:
    """How often and how long hdfs-native tries a target's NameNodes.

    Parameters
    ----------
    passes : int
        Sleeps between passes over all NameNodes; after the last sleep each
        NameNode is tried once more.
    sleep_base_ms, sleep_max_ms : int
        hdfs-native's back-off: ``base * 2**pass``, jittered, capped at ``max``.
    """

    passes: int
    sleep_base_ms: int
    sleep_max_ms: int

    def max_attempts(self, namenodes: int) -> int:
        """``dfs.client.failover.max.attempts`` for ``namenodes`` NameNodes.

        hdfs-native sleeps at every ``namenodes``-th failover and gives up at
        the ``max_attempts``-th: ``passes`` sleeps, then one more try of each.

        Examples
        --------
        >>> HA.max_attempts(2), FAST.max_attempts(1)
        (15, 2)
        """
        n = max(1, namenodes)
        return self.passes * n + n - 1

    def options(self, namenodes: int) -> dict[str, str]:
        """The three client settings, as hdfs-native's config keys."""
        return {
            MAX_ATTEMPTS: str(self.max_attempts(namenodes)),
            SLEEP_BASE: str(self.sleep_base_ms),
            SLEEP_MAX: str(self.sleep_max_ms),
        }


#: A name service of two or more NameNodes: ride out a failover.
HA = Policy(passes=7, sleep_base_ms=500, sleep_max_ms=4000)
#: One NameNode: a wrong address fails in about two seconds.
FAST = Policy(passes=2, sleep_base_ms=200, sleep_max_ms=1000)


def total_sleep_ms(policy: Policy, jitter: float) -> float:
    """What hdfs-native sleeps in all before it gives up, at one ``jitter``.

    ``jitter`` 0.5 gives the least total, 1.5 the most (hdfs-native draws it
    per sleep from [0.5, 1.5)); the time the attempts themselves take comes on
    top (a refused connection: about a millisecond each).

    Examples
    --------
    >>> total_sleep_ms(HA, 0.5), total_sleep_ms(HA, 1.5)
    (19500.0, 24500.0)
    """
    return float(
        sum(
            min(policy.sleep_base_ms * 2**k * jitter, policy.sleep_max_ms)
            for k in range(1, policy.passes + 1)
        )
    )


@dataclass(frozen=True)
class NameService:
    """An HDFS name service a client reaches, and its NameNodes."""

    name: str
    namenodes: tuple[NameNode, ...]

    def describe(self) -> str:
        """``ns1 (nn1 at h1:8020, nn2 at h2:8020)`` for messages."""
        nodes = ", ".join(
            f"{n.id} at {n.address}" if n.id else n.address for n in self.namenodes
        )
        return f"{self.name} ({nodes or 'no NameNode addresses configured'})"


def describe(services: tuple[NameService, ...]) -> str:
    """``the name service ns1 (nn1 at ..., nn2 at ...)`` (or ``services``)."""
    word = "name service" if len(services) == 1 else "name services"
    return f"the {word} " + "; ".join(s.describe() for s in services)


def name_services(
    scheme: str, netloc: str, conf: HadoopConf | None
) -> tuple[NameService, ...]:
    """The name services of ``conf`` a client for ``scheme://netloc`` talks to.

    Parameters
    ----------
    scheme, netloc : str
        From the URL (``netloc`` empty: ``fs.defaultFS``).
    conf : HadoopConf or None
        The configuration the client reads.

    Returns
    -------
    tuple of NameService
        Empty for ``host:port`` (one NameNode, no service) or without a
        configuration.

    Raises
    ------
    HadoopConfError
        A site file cannot be read; the message names it.
    """
    if conf is None:
        return ()
    services = conf.name_services
    found: dict[str, NameService] = {}
    for target in _targets(scheme, netloc, conf):
        nodes = services.get(target)
        if nodes is not None and target not in found:
            found[target] = NameService(target, tuple(nodes))
    return tuple(found.values())


def _targets(scheme: str, netloc: str, conf: HadoopConf, depth: int = 0) -> list[str]:
    """The port-less ``hdfs://`` authorities behind ``scheme://netloc``."""
    if scheme == "hdfs" and not netloc and depth == 0:
        default = urlparse(conf.default_fs or "")
        if default.scheme in ("hdfs", "viewfs") and default.netloc:
            return _targets(default.scheme, default.netloc, conf, depth + 1)
        return []
    if scheme == "hdfs":
        return [] if ":" in netloc else [netloc]
    if scheme == "viewfs" and depth < 2:
        # hdfs-native reads core-site.xml and hdfs-site.xml as one map.
        props = {**conf.core, **conf.hdfs}
        prefix = f"fs.viewfs.mounttable.{netloc}."
        out: list[str] = []
        for key, value in props.items():
            if key.startswith(prefix + "link.") or key == prefix + "linkFallback":
                link = urlparse(value)
                if link.scheme == "hdfs" and link.netloc:
                    out += _targets("hdfs", link.netloc, conf, depth + 1)
        return out
    return []


def client_options(
    services: tuple[NameService, ...],
    conf: HadoopConf | None,
    explicit: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The settings to hand hdfs-native as overrides for a client.

    Parameters
    ----------
    services : tuple of NameService
        What :func:`name_services` found for the client's target.
    conf : HadoopConf or None
        The configuration hdfs-native reads: a failover key it sets is left
        to it.
    explicit : mapping, optional
        The caller's ``storage_options``: they win over everything.

    Examples
    --------
    >>> ns = NameService("ns1", (NameNode("nn1", "a:8020"), NameNode("nn2", "b:8020")))
    >>> client_options((ns,), None)[MAX_ATTEMPTS]
    '15'
    >>> client_options((), None, {SLEEP_MAX: "9"})[SLEEP_MAX]
    '9'
    """
    widest = max((len(s.namenodes) for s in services), default=1)
    policy = HA if widest >= 2 else FAST
    site = {**conf.core, **conf.hdfs} if conf is not None else {}
    ours = {k: v for k, v in policy.options(widest).items() if k not in site}
    return {**ours, **(explicit or {})}


def what_to_check(services: tuple[NameService, ...]) -> str:
    """The advice for a name service none of whose NameNodes served a call."""
    names = [s.name for s in services]
    admin = " or ".join(f"`hdfs haadmin -ns {n} -getAllServiceState`" for n in names)
    keys = ", ".join(f"dfs.namenode.rpc-address.{n}.*" for n in names)
    return (
        f"Check which NameNode is active with {admin} (`tfyarn cluster status` "
        f"for the local cluster), and the addresses in {keys} of "
        "$HADOOP_CONF_DIR/hdfs-site.xml"
    )
