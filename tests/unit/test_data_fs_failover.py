"""The HDFS client's failover settings: patient for an HA name service, quick
for one NameNode, and errors that name the service and its NameNodes."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from _am_support import hdfs_token

from tfyarn.contract.hadoop_conf import HadoopConf, NameNode
from tfyarn.contract.tokens import TokenFile
from tfyarn.data.fs import failover
from tfyarn.data.fs.errors import HdfsAuthError, NameNodeUnreachableError, mapped_error
from tfyarn.data.fs.hdfs import HdfsFileSystem

REPO = Path(__file__).resolve().parents[2]
HA_KEYS = {
    failover.MAX_ATTEMPTS: "15",
    failover.SLEEP_BASE: "500",
    failover.SLEEP_MAX: "4000",
}
FAST_KEYS = {
    failover.MAX_ATTEMPTS: "2",
    failover.SLEEP_BASE: "200",
    failover.SLEEP_MAX: "1000",
}
NS1 = failover.NameService(
    "ns1", (NameNode("nn1", "10.0.0.1:8020"), NameNode("nn2", "10.0.0.2:8020"))
)


def _site(props: dict[str, str]) -> str:
    body = "".join(
        f"<property><name>{k}</name><value>{v}</value></property>"
        for k, v in props.items()
    )
    return f"<configuration>{body}</configuration>"


def _conf_dir(
    tmp_path: Path,
    hdfs: dict[str, str] | None = None,
    core: dict[str, str] | None = None,
    addresses: tuple[str, str] = ("10.0.0.1:8020", "10.0.0.2:8020"),
) -> Path:
    """A client configuration with the HA name service ns1 and the one-NameNode
    service solo."""
    props = {
        "dfs.nameservices": "ns1,solo",
        "dfs.ha.namenodes.ns1": "nn1,nn2",
        "dfs.namenode.rpc-address.ns1.nn1": addresses[0],
        "dfs.namenode.rpc-address.ns1.nn2": addresses[1],
        "dfs.client.failover.proxy.provider.ns1": (
            "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider"
        ),
        "dfs.ha.namenodes.solo": "only",
        "dfs.namenode.rpc-address.solo.only": "10.0.0.9:8020",
        **(hdfs or {}),
    }
    (tmp_path / "hdfs-site.xml").write_text(_site(props))
    (tmp_path / "core-site.xml").write_text(_site(core or {}))
    return tmp_path


def _simulate(
    namenodes: int, options: dict[str, str], jitter: float
) -> tuple[list[float], list[int]]:
    """hdfs-native's NameServiceProxy::call_inner against NameNodes that all
    fail: the sleeps it takes (ms) and the NameNode of each attempt."""
    max_attempts = int(options[failover.MAX_ATTEMPTS])
    base = int(options[failover.SLEEP_BASE])
    cap = int(options[failover.SLEEP_MAX])
    sleeps: list[float] = []
    tried: list[int] = []
    index = failovers = 0
    while True:
        tried.append(index)
        if failovers >= max_attempts:
            return sleeps, tried
        failovers += 1
        if failovers % namenodes == 0:
            rounds = min(failovers // namenodes, 32)
            sleeps.append(min(int(base * (1 << rounds) * jitter), cap))
        index = (index + 1) % namenodes


@pytest.mark.parametrize("namenodes", [2, 3, 5])
def test_an_ha_service_rides_out_20_s_and_gives_up_within_25_s(namenodes: int) -> None:
    options = failover.HA.options(namenodes)
    least, tried = _simulate(namenodes, options, 0.5)
    most, _ = _simulate(namenodes, options, 1.5)
    # The bounds the READMEs state, from hdfs-native's own loop.
    assert sum(least) == 19_500 and sum(most) == 24_500
    assert failover.total_sleep_ms(failover.HA, 0.5) == sum(least)
    assert failover.total_sleep_ms(failover.HA, 1.5) == sum(most)
    # After the last sleep every NameNode gets one more try: one that became
    # active during the final pause is found.
    assert sorted(tried[-namenodes:]) == list(range(namenodes))
    assert len(least) == failover.HA.passes


def test_one_namenode_fails_within_two_seconds() -> None:
    options = failover.FAST.options(1)
    assert options == FAST_KEYS  # the values before HA support: unchanged
    least, tried = _simulate(1, options, 0.5)
    most, _ = _simulate(1, options, 1.5)
    assert len(tried) == 3 and sum(least) == 600 and sum(most) == 1600


def test_the_readmes_state_the_bound_the_constants_give() -> None:
    least = f"{failover.total_sleep_ms(failover.HA, 0.5) / 1000:g} s"
    most = f"{failover.total_sleep_ms(failover.HA, 1.5) / 1000:g} s"
    for readme in ("tfyarn/data/README.md", "tfyarn/hdfs_plugin/README.md"):
        text = " ".join((REPO / readme).read_text().split())
        assert least in text and most in text, readme


def test_the_plugin_uses_the_same_numbers() -> None:
    rust = " ".join((REPO / "tfyarn/hdfs_plugin/src/failover.rs").read_text().split())
    for policy, name in ((failover.HA, "HA"), (failover.FAST, "FAST")):
        expected = (
            f"pub const {name}: Policy = Policy {{ passes: {policy.passes}, "
            f"sleep_base_ms: {policy.sleep_base_ms}, "
            f"sleep_max_ms: {policy.sleep_max_ms} }};"
        )
        assert expected in rust, expected


@pytest.mark.parametrize(
    ("scheme", "netloc", "default_fs", "expected"),
    [
        ("hdfs", "ns1", None, HA_KEYS),
        ("hdfs", "", "hdfs://ns1", HA_KEYS),
        ("hdfs", "", "viewfs://cluster", HA_KEYS),
        ("viewfs", "cluster", None, HA_KEYS),
        ("hdfs", "nn.example.com:8020", "hdfs://ns1", FAST_KEYS),
        ("hdfs", "", "hdfs://nn.example.com:8020", FAST_KEYS),
        ("hdfs", "solo", None, FAST_KEYS),
        ("hdfs", "unknown", None, FAST_KEYS),
        ("viewfs", "other", None, FAST_KEYS),
    ],
)
def test_the_target_decides_the_settings(
    tmp_path: Path,
    scheme: str,
    netloc: str,
    default_fs: str | None,
    expected: dict[str, str],
) -> None:
    core = {"fs.viewfs.mounttable.cluster.link./data": "hdfs://ns1/data"}
    if default_fs:
        core["fs.defaultFS"] = default_fs
    conf = HadoopConf(_conf_dir(tmp_path, core=core))
    services = failover.name_services(scheme, netloc, conf)
    assert failover.client_options(services, conf) == expected


def test_settings_the_user_made_win(tmp_path: Path) -> None:
    conf = HadoopConf(
        _conf_dir(
            tmp_path,
            hdfs={failover.MAX_ATTEMPTS: "40"},
            core={failover.SLEEP_MAX: "7000"},
        )
    )
    services = failover.name_services("hdfs", "ns1", conf)
    # hdfs-native reads the site files itself: their keys are not overridden.
    assert failover.client_options(services, conf) == {failover.SLEEP_BASE: "500"}
    explicit = {failover.SLEEP_BASE: "100", failover.MAX_ATTEMPTS: "3"}
    assert failover.client_options(services, conf, explicit) == explicit


def test_the_client_gets_the_settings_and_the_conf_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hdfs_native

    made: list[tuple[object, ...]] = []
    monkeypatch.setattr(hdfs_native, "Client", lambda *args: made.append(args))
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.setenv("HADOOP_HOME", str(tmp_path))
    (tmp_path / "etc" / "hadoop").mkdir(parents=True)
    _conf_dir(tmp_path / "etc" / "hadoop")  # read as hdfs-native reads it
    monkeypatch.setattr(
        "tfyarn.contract.hadoop_conf.local_cluster_conf_dir", lambda: None
    )
    fs = HdfsFileSystem("hdfs", "ns1", storage_options={failover.SLEEP_MAX: "9"})
    fs._get_client()
    assert made == [("hdfs://ns1", {**HA_KEYS, failover.SLEEP_MAX: "9"}, None)]
    assert fs.services == (NS1,)


def test_an_unreachable_service_is_named_with_its_namenodes() -> None:
    refused = OSError("Connection refused (os error 111)")
    error = mapped_error("stat", "hdfs://ns1/x", refused, "hdfs://ns1", (NS1,))
    assert isinstance(error, NameNodeUnreachableError)
    text = str(error)
    assert "the name service ns1 (nn1 at 10.0.0.1:8020, nn2 at 10.0.0.2:8020)" in text
    assert "none could be reached" in text
    assert "`hdfs haadmin -ns ns1 -getAllServiceState`" in text
    assert "`tfyarn cluster status`" in text
    assert "dfs.namenode.rpc-address.ns1.*" in text


def test_a_service_of_standby_namenodes_says_so() -> None:
    # What hdfs-native raises when it gives up on standby NameNodes.
    standby = RuntimeError(
        'RPCError("org.apache.hadoop.ipc.StandbyException", "Operation category '
        "READ is not supported in state standby. Visit "
        'https://s.apache.org/sbnn-error\\n\\tat org.apache.hadoop.X(X.java:1)")'
    )
    error = mapped_error("list", "hdfs://ns1/x", standby, "hdfs://ns1", (NS1,))
    assert isinstance(error, NameNodeUnreachableError)
    text = str(error)
    assert "all are standby" in text and "nn2 at 10.0.0.2:8020" in text
    assert "StandbyException: Operation category READ" in text
    assert "X.java" not in text
    # One standby NameNode named by host:port: name the service instead.
    direct = mapped_error("list", "hdfs://h:8020/x", standby, "hdfs://h:8020")
    assert isinstance(direct, NameNodeUnreachableError)
    assert "hdfs://h:8020 is a standby NameNode" in str(direct)
    assert "hdfs://<nameservice>/" in str(direct)


def test_a_host_port_namenode_keeps_its_message() -> None:
    refused = OSError("Connection refused (os error 111)")
    text = str(mapped_error("stat", "hdfs://h:1/x", refused, "hdfs://h:1"))
    assert text.startswith("cannot reach hdfs://h:1 for stat of hdfs://h:1/x")
    assert "haadmin" not in text


def test_a_dead_service_fails_naming_its_namenodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The real client, against two NameNode addresses where nothing listens;
    # storage_options shorten the retries, as they may.
    conf = _conf_dir(tmp_path, addresses=("127.0.0.1:1", "127.0.0.1:2"))
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    fs = HdfsFileSystem("hdfs", "ns1", storage_options=FAST_KEYS)
    start = time.monotonic()
    with pytest.raises(NameNodeUnreachableError) as caught:
        fs.info("hdfs://ns1/x")
    assert time.monotonic() - start < 10
    assert "ns1 (nn1 at 127.0.0.1:1, nn2 at 127.0.0.1:2)" in str(caught.value)


def test_a_dead_service_is_retried_past_a_short_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With the HA settings the client is still retrying after 2 s (one
    # NameNode's quick settings would have given up by then), so the deadline
    # answers, naming the service.
    conf = _conf_dir(tmp_path, addresses=("127.0.0.1:1", "127.0.0.1:2"))
    monkeypatch.setenv("HADOOP_CONF_DIR", str(conf))
    fs = HdfsFileSystem("hdfs", "ns1", timeout=2)
    with pytest.raises(
        NameNodeUnreachableError, match="did not answer within 2 s"
    ) as e:
        fs.info("hdfs://ns1/x")
    assert "no NameNode of the name service ns1 (nn1 at 127.0.0.1:1" in str(e.value)
    assert "hdfs haadmin -ns ns1 -getAllServiceState" in str(e.value)


def test_an_ended_ha_token_is_found_by_its_service(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "container_tokens"
    issued_ms = int((time.time() - 300) * 1000)
    path.write_bytes(TokenFile((hdfs_token("ha-hdfs:ns1", issued_ms),)).to_bytes())
    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(path))
    gss = RuntimeError('GSSAPIError("GSS_S_NO_CRED", "No Kerberos credentials")')
    error = mapped_error("open", "hdfs://ns1/x", gss, "hdfs://ns1")
    assert isinstance(error, HdfsAuthError)
    assert "token for hdfs://ns1 was refused: it expired" in str(error)
    other = mapped_error("open", "hdfs://ns2/x", gss, "hdfs://ns2")
    assert "hdfs://NAMESERVICE" in str(other)


def test_a_name_service_is_left_to_the_client_to_find_its_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Containers reach hdfs://host:port by IP (its token's service); a name
    # service has no address to resolve: hdfs-native looks up ha-hdfs:<name>.
    from tfyarn.data.fs.hdfs import token_url

    monkeypatch.setenv("HADOOP_TOKEN_FILE_LOCATION", str(tmp_path / "tokens"))
    monkeypatch.setenv(
        "HADOOP_CONF_DIR", str(_conf_dir(tmp_path, core={"fs.defaultFS": "hdfs://ns1"}))
    )
    assert token_url("hdfs://ns1") == "hdfs://ns1"
    assert token_url(None) is None  # hdfs:/// stays fs.defaultFS
    assert token_url("hdfs://localhost:8020") == "hdfs://127.0.0.1:8020"
