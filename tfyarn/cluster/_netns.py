"""Hosts of a multi-host local cluster: network namespaces on a bridge.

Each worker host is a network namespace (``ip netns``) joined to a bridge by a
veth pair. The bridge carries the master address (NameNode, ResourceManager run
in the root namespace and bind it); each host gets the next address of the
cluster's /24. Nothing routes beyond that subnet: namespaces get no default
route, the bridge no forwarding, so no packet leaves the machine.

Names (namespaces, links, host names) and the subnet derive from a short hash
of the cluster's base dir, so two clusters side by side never share one; what a
start made is written to ``<base_dir>/run/hosts.json`` and a stop removes
exactly that.

Host names resolve through a marked block in ``/etc/hosts`` (one per cluster).
``/etc/netns/<ns>/hosts`` alone would not do: it is seen only by processes in
that namespace, while the client, the NameNode and the ResourceManager run in
the root namespace and must resolve every host too.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import ipaddress
import json
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from tfyarn.errors import ClusterError

HOSTS_FILE = Path("/etc/hosts")
STATE_FILE = "hosts.json"
# Private /16 the per-cluster /24s are taken from; a /24 already routed or
# addressed on this machine is skipped.
POOL = ipaddress.IPv4Network("10.231.0.0/16")
IP_TIMEOUT_S = 10.0
MAX_NODES = 200


@dataclasses.dataclass(frozen=True)
class Host:
    """One worker host: ``name`` (node1), ``host`` (its host name), ``address``,
    the namespace ``netns`` and its veth ends (``link`` in the root namespace,
    ``peer`` inside, renamed ``eth0``)."""

    name: str
    host: str
    address: str
    netns: str
    link: str
    peer: str


@dataclasses.dataclass(frozen=True)
class Layout:
    """Everything a multi-host start makes: bridge, its address, the hosts."""

    cluster_id: str
    bridge: str
    subnet: str
    master_address: str
    master_host: str
    hosts: tuple[Host, ...]

    def to_dict(self) -> dict[str, object]:
        data = dataclasses.asdict(self)
        data["hosts"] = [dataclasses.asdict(h) for h in self.hosts]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Layout:
        hosts = tuple(Host(**h) for h in data["hosts"])  # type: ignore[attr-defined]
        return cls(**{**data, "hosts": hosts})  # type: ignore[arg-type]

    def host(self, name: str) -> Host:
        for h in self.hosts:
            if name in (h.name, h.host, h.netns):
                return h
        raise ClusterError(
            f"no host {name!r} in this cluster; its hosts are "
            f"{', '.join(h.name for h in self.hosts)}"
        )


def cluster_id(base_dir: Path) -> str:
    """Six hex digits naming a cluster's links and namespaces (from its base dir)."""
    return hashlib.sha1(str(base_dir).encode()).hexdigest()[:6]


def pick_subnet(
    cid: str, taken: Iterable[ipaddress.IPv4Network]
) -> ipaddress.IPv4Network:
    """The cluster's /24 in POOL: from its id, skipping any overlapping ``taken``."""
    subnets = list(POOL.subnets(new_prefix=24))
    first = int(cid, 16) % len(subnets)
    busy = list(taken)
    for i in range(len(subnets)):
        net = subnets[(first + i) % len(subnets)]
        if not any(net.overlaps(t) for t in busy):
            return net
    raise ClusterError(f"every /24 in {POOL} is in use on this machine")


def layout(base_dir: Path, nodes: int, subnet: ipaddress.IPv4Network) -> Layout:
    """Names and addresses of a cluster of ``nodes`` hosts (pure)."""
    if not 1 <= nodes <= MAX_NODES:
        raise ClusterError(f"nodes must be between 1 and {MAX_NODES}, got {nodes}")
    cid = cluster_id(base_dir)
    addresses = list(subnet.hosts())
    hosts = tuple(
        Host(
            name=f"node{i}",
            host=f"node{i}.tfy-{cid}.test",
            address=str(addresses[i]),
            netns=f"tfy-{cid}-node{i}",
            link=f"tfy{cid}v{i}",
            peer=f"tfy{cid}p{i}",
        )
        for i in range(1, nodes + 1)
    )
    return Layout(
        cluster_id=cid,
        bridge=f"tfy{cid}br",
        subnet=str(subnet),
        master_address=str(addresses[0]),
        master_host=f"master.tfy-{cid}.test",
        hosts=hosts,
    )


# -- /etc/hosts block ------------------------------------------------------


def _markers(base_dir: Path) -> tuple[str, str]:
    return (
        f"# BEGIN tfyarn local cluster {base_dir} (removed by `tfyarn cluster stop`)",
        f"# END tfyarn local cluster {base_dir}",
    )


def hosts_block(base_dir: Path, lay: Layout) -> str:
    begin, end = _markers(base_dir)
    lines = [begin, f"{lay.master_address}\t{lay.master_host}"]
    lines += [f"{h.address}\t{h.host}" for h in lay.hosts]
    return "\n".join([*lines, end]) + "\n"


def without_block(text: str, base_dir: Path) -> str:
    """``text`` (an /etc/hosts) without this cluster's block (pure)."""
    begin, end = _markers(base_dir)
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.rstrip("\n") == begin:
            skipping = True
            continue
        if skipping:
            if line.rstrip("\n") == end:
                skipping = False
            continue
        out.append(line)
    return "".join(out)


def _edit_hosts(path: Path, edit: Callable[[str], str]) -> bool:
    """Rewrite ``path`` through ``edit`` under an exclusive lock (two clusters
    starting at once must not lose each other's block). In place, not by
    rename: /etc/hosts may be a bind mount. Returns whether it changed."""
    with open(path, "r+") as stream:
        fcntl.flock(stream, fcntl.LOCK_EX)
        text = stream.read()
        new = edit(text)
        if new == text:
            return False
        stream.seek(0)
        stream.write(new)
        stream.truncate()
        return True


def add_hosts(base_dir: Path, lay: Layout, path: Path = HOSTS_FILE) -> None:
    def edit(text: str) -> str:
        text = without_block(text, base_dir)
        if text and not text.endswith("\n"):
            text += "\n"
        return text + hosts_block(base_dir, lay)

    _edit_hosts(path, edit)


def remove_hosts(base_dir: Path, path: Path = HOSTS_FILE) -> bool:
    try:
        return _edit_hosts(path, lambda text: without_block(text, base_dir))
    except OSError:
        return False


# -- ip --------------------------------------------------------------------


def check_can_make_hosts() -> None:
    """Refuse, before anything is made, when namespaces cannot be made here."""
    problems = []
    if os.geteuid() != 0:
        problems.append("it runs as a user other than root (ip netns needs root)")
    if shutil.which("ip") is None:
        problems.append("the `ip` command (Debian package iproute2) is not on PATH")
    if problems:
        raise ClusterError(
            "`tfyarn cluster start --nodes N` makes each host a network namespace "
            "with `ip netns`, veth pairs and a bridge, and cannot here: "
            + "; ".join(problems)
            + ". Run it as root with iproute2 installed (apt-get install iproute2), "
            "or start the single-node cluster on loopback (omit --nodes)."
        )


def ip(*args: str, netns: str | None = None, check: bool = True) -> str:
    command = ["ip", *args] if netns is None else ["ip", "-n", netns, *args]
    try:
        proc = subprocess.run(
            command, capture_output=True, text=True, timeout=IP_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(
            f"`{' '.join(command)}` took over {IP_TIMEOUT_S:.0f} s"
        ) from exc
    if check and proc.returncode != 0:
        raise ClusterError(f"`{' '.join(command)}` failed: {proc.stderr.strip()}")
    return proc.stdout


def taken_networks() -> list[ipaddress.IPv4Network]:
    """Every IPv4 network routed or addressed in the root namespace."""
    nets = []
    for line in ip("-4", "-o", "addr", "show").splitlines():
        parts = line.split()
        if "inet" in parts:
            nets.append(ipaddress.IPv4Interface(parts[parts.index("inet") + 1]).network)
    for line in ip("-4", "route", "show").splitlines():
        first = line.split()[0] if line.split() else ""
        if first and first != "default":
            try:
                nets.append(ipaddress.IPv4Network(first, strict=False))
            except ValueError:
                pass
    return nets


def existing_netns() -> set[str]:
    return {
        line.split()[0] for line in ip("netns", "list").splitlines() if line.split()
    }


def link_exists(name: str) -> bool:
    return Path(f"/sys/class/net/{name}").exists()


def create(lay: Layout) -> None:
    """Make the bridge, then each host's namespace and veth pair (idempotent)."""
    prefix = ipaddress.IPv4Network(lay.subnet).prefixlen
    if not link_exists(lay.bridge):
        ip("link", "add", lay.bridge, "type", "bridge")
        ip("addr", "add", f"{lay.master_address}/{prefix}", "dev", lay.bridge)
    ip("link", "set", lay.bridge, "up")
    allow_bridged(lay.bridge, True)
    have = existing_netns()
    for h in lay.hosts:
        if h.netns not in have:
            ip("netns", "add", h.netns)
        create_host_link(lay, h)
        ip("link", "set", "lo", "up", netns=h.netns)


def create_host_link(lay: Layout, h: Host) -> None:
    prefix = ipaddress.IPv4Network(lay.subnet).prefixlen
    if link_exists(h.link):
        return
    ip("link", "add", h.link, "type", "veth", "peer", "name", h.peer)
    ip("link", "set", h.peer, "netns", h.netns)
    ip("link", "set", h.peer, "name", "eth0", netns=h.netns)
    ip("addr", "add", f"{h.address}/{prefix}", "dev", "eth0", netns=h.netns)
    ip("link", "set", "eth0", "up", netns=h.netns)
    ip("link", "set", h.link, "master", lay.bridge)
    ip("link", "set", h.link, "up")


def set_partitioned(h: Host, partitioned: bool) -> None:
    """Cut (or restore) the host's only link; its processes keep running."""
    ip("link", "set", h.link, "down" if partitioned else "up")


def is_partitioned(h: Host) -> bool:
    try:
        state = Path(f"/sys/class/net/{h.link}/operstate").read_text().strip()
    except OSError:
        return True
    return state == "down"


def netns_pids(netns: str) -> list[int]:
    out = ip("netns", "pids", netns, check=False)
    return [int(p) for p in out.split() if p.isdigit()]


def destroy(lay: Layout) -> list[str]:
    """Remove every namespace and link of ``lay`` that exists; names what went."""
    removed = []
    have = existing_netns()
    for h in lay.hosts:
        if link_exists(h.link):
            ip("link", "del", h.link, check=False)  # takes its peer with it
            removed.append(h.link)
        if h.netns in have:
            ip("netns", "del", h.netns, check=False)
            removed.append(h.netns)
    if link_exists(lay.bridge):
        ip("link", "del", lay.bridge, check=False)
        removed.append(lay.bridge)
    allow_bridged(lay.bridge, False)
    return removed


def allow_bridged(bridge: str, allow: bool) -> None:
    """Let host-to-host packets cross the bridge even if FORWARD drops them.

    With br_netfilter loaded (Docker loads it and sets the FORWARD policy to
    DROP), frames between two ports of a bridge go through iptables' FORWARD
    chain, and DataNodes or TensorFlow servers on two hosts could not reach
    each other (measured: connect timeouts node2 -> node1). One ACCEPT rule
    for traffic in and out of this bridge only; none when iptables is absent.
    """
    if shutil.which("iptables") is None:
        return
    rule = ["FORWARD", "-i", bridge, "-o", bridge, "-j", "ACCEPT"]
    if allow and _iptables("-C", *rule) != 0:
        _iptables("-I", *rule)
    for _ in range(10 if not allow else 0):  # every copy a start may have added
        if _iptables("-C", *rule) != 0:
            break
        _iptables("-D", *rule)


def _iptables(*args: str) -> int:
    try:
        done = subprocess.run(
            ["iptables", "-w", "5", *args],
            capture_output=True,
            timeout=IP_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return 1
    return done.returncode


def save_layout(base_dir: Path, lay: Layout) -> None:
    path = base_dir / "run" / STATE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(lay.to_dict(), indent=2) + "\n")


def load_layout(base_dir: Path) -> Layout | None:
    try:
        return Layout.from_dict(json.loads((base_dir / "run" / STATE_FILE).read_text()))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def forget_layout(base_dir: Path) -> None:
    (base_dir / "run" / STATE_FILE).unlink(missing_ok=True)


def in_netns(netns: str, command: Sequence[str]) -> list[str]:
    """``command`` run in ``netns`` (``ip netns exec`` execs it: same pid)."""
    return ["ip", "netns", "exec", netns, *command]
