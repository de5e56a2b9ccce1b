"""The client's Kerberos login on a secure cluster: options, checks, and skein's errors mapped.

The driver messages are the ones measured on the secure local cluster (skein
0.8.2, Hadoop 3.4, Java 17).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tfyarn import _options
from tfyarn.client import config, connection, kerberos, last_driver
from tfyarn.client.compile import to_skein
from tfyarn.client.kerberos import KerberosError, Login
from tfyarn.contract.hadoop_conf import HadoopConf
from tfyarn.errors import SpecError, TfyarnError
from tfyarn.spec import JobSpec

REALM = "EXAMPLE.TEST"
ME = f"alice@{REALM}"

NO_TICKET = "Kerberos ticket not found, please kinit and restart"
TICKET_KDC_DOWN = (
    "Failed to get node reports, exception:\nDestHost:destPort localhost:8532 , "
    "LocalHost:localPort vm/127.0.0.1:0. Failed on local exception: "
    "javax.security.sasl.SaslException: GSS initiate failed [Caused by "
    "GSSException: No valid credentials provided (Mechanism level: Connection "
    "refused)]"
)
KEYTAB_KDC_DOWN = (
    "org.apache.hadoop.security.KerberosAuthException: failure to login: for "
    f"principal: {ME} from keytab /k javax.security.auth.login.LoginException: "
    "Connection refused\nCaused by: java.net.ConnectException: Connection refused"
)
NOT_IN_KEYTAB = (
    "org.apache.hadoop.security.KerberosAuthException: failure to login: for "
    f"principal: {ME} from keytab /k javax.security.auth.login.LoginException: "
    "Unable to obtain password from user"
)
BAD_KEYS = (
    "KerberosAuthException: failure to login: for principal: ... "
    "javax.security.auth.login.LoginException: Checksum failed"
)
RM_DOWN = (
    "Call From vm/127.0.0.1 to localhost:8032 failed on connection exception: "
    "java.net.ConnectException: Connection refused"
)


@pytest.mark.parametrize(
    ("said", "kind"),
    [
        (NO_TICKET, "no_ticket"),
        (TICKET_KDC_DOWN, "kdc_down"),
        (KEYTAB_KDC_DOWN, "kdc_down"),
        (NOT_IN_KEYTAB, "not_in_keytab"),
        (BAD_KEYS, "bad_keys"),
        ("Client not found in Kerberos database", "unknown"),
        ("Client cannot authenticate via:[TOKEN, KERBEROS]", "no_ticket"),
        (RM_DOWN, None),  # no Kerberos in it: the ResourceManager is down
        ("Unknown ApplicationId 'application_1_1'", None),
    ],
)
def test_driver_messages_map_to_one_kind(said: str, kind: str | None) -> None:
    assert kerberos.kind_of(said) == kind


def test_messages_name_the_fix_and_the_principal() -> None:
    keytab = Login(principal=ME, keytab="/etc/alice.keytab")
    no_ticket = kerberos.explain(NO_TICKET, Login(), REALM)
    assert isinstance(no_ticket, KerberosError)
    assert f"run `kinit {kerberos.expected_principal(REALM)}`" in str(no_ticket)
    assert "--keytab" in str(no_ticket)
    down = str(kerberos.explain(KEYTAB_KDC_DOWN, keytab, REALM))
    assert f"KDC of realm {REALM} did not answer" in down
    assert "the keytab /etc/alice.keytab" in down
    assert "klist -k /etc/alice.keytab" in str(
        kerberos.explain(NOT_IN_KEYTAB, keytab, REALM)
    )
    assert f"refused the key of {ME} in /etc/alice.keytab" in str(
        kerberos.explain(BAD_KEYS, keytab, REALM)
    )
    # A keytab login without credentials: the keytab's keys, not kinit.
    assert "refused the key" in str(kerberos.explain(NO_TICKET, keytab, REALM))
    for kind in ("no_ticket", "kdc_down", "not_in_keytab", "bad_keys", "unknown"):
        assert "\n" not in kerberos.message(kind, keytab, REALM)


def test_a_principal_and_a_keytab_come_together() -> None:
    with pytest.raises(SpecError, match="principal given without keytab"):
        Login(principal=ME)
    with pytest.raises(SpecError, match="keytab given without principal"):
        Login(keytab="/k")


def test_principal_and_keytab_are_client_options_never_in_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert {"principal", "keytab"} <= set(_options.client_keys())
    cfg = config.load(overrides={"principal": ME, "keytab": "alice.keytab"})
    own = config.client_options(cfg)
    assert own.login == Login(principal=ME, keytab=str(Path.cwd() / "alice.keytab"))
    script = tmp_path / "train.py"
    script.write_text("")
    spec = config.to_spec(str(script), (), cfg)
    assert ME not in spec.to_env() and "alice.keytab" not in str(spec.to_dict())
    assert config.client_options(config.load()).login == Login()


def secure_conf(tmp_path: Path, *, secure: bool = True) -> Path:
    conf = tmp_path / "conf"
    conf.mkdir(parents=True)
    auth = "kerberos" if secure else "simple"
    (conf / "core-site.xml").write_text(
        "<configuration><property><name>hadoop.security.authentication</name>"
        f"<value>{auth}</value></property></configuration>"
    )
    (conf / "yarn-site.xml").write_text(
        "<configuration><property><name>yarn.resourcemanager.principal</name>"
        f"<value>rm/_HOST@{REALM}</value></property></configuration>"
    )
    return conf


def test_the_cluster_says_whether_it_is_secure_and_its_realm(tmp_path: Path) -> None:
    conf = HadoopConf(secure_conf(tmp_path))
    assert conf.is_secure and conf.realm == REALM
    assert not HadoopConf(tmp_path).is_secure  # no core-site.xml: simple


needs_krb5 = pytest.mark.skipif(
    not (shutil.which("klist") and shutil.which("ktutil")),
    reason="needs MIT Kerberos' klist and ktutil (tests/system-packages.sh)",
)


@needs_krb5
def test_no_ticket_is_refused_only_on_a_secure_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KRB5CCNAME", f"FILE:{tmp_path / 'no-cache'}")
    with pytest.raises(KerberosError, match=rf"run `kinit \S+@{REALM}`"):
        kerberos.check(Login(), secure_conf(tmp_path))
    kerberos.check(Login(), secure_conf(tmp_path / "x", secure=False))


def make_keytab(path: Path, principal: str) -> Path:
    subprocess.run(
        ["ktutil"],
        input=(
            f"addent -password -p {principal} -k 1 -e aes256-cts-hmac-sha1-96\n"
            f"secret\nwkt {path}\nquit\n"
        ),
        capture_output=True,
        text=True,
        check=True,
    )
    return path


@needs_krb5
def test_a_keytab_is_checked_before_anything_starts(tmp_path: Path) -> None:
    conf = secure_conf(tmp_path)
    with pytest.raises(KerberosError, match="keytab not found: /nonexistent"):
        kerberos.check(Login(principal=ME, keytab="/nonexistent"), conf)
    with pytest.raises(KerberosError, match="is a directory"):
        kerberos.check(Login(principal=ME, keytab=str(tmp_path)), conf)
    junk = tmp_path / "junk.keytab"
    junk.write_text("not a keytab")
    with pytest.raises(KerberosError, match="is not a keytab"):
        kerberos.check(Login(principal=ME, keytab=str(junk)), conf)
    bob = make_keytab(tmp_path / "bob.keytab", f"bob@{REALM}")
    with pytest.raises(KerberosError, match=f"holds no key for {ME}; it holds bob@"):
        kerberos.check(Login(principal=ME, keytab=str(bob)), conf)
    alice = make_keytab(tmp_path / "alice.keytab", ME)
    kerberos.check(Login(principal=ME, keytab=str(alice)), conf)  # no ticket needed


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_an_unreadable_keytab_is_refused(tmp_path: Path) -> None:
    keytab = tmp_path / "k.keytab"
    keytab.write_bytes(b"\x05\x02")
    keytab.chmod(0)
    with pytest.raises(KerberosError, match="is not readable"):
        kerberos.check_keytab(Login(principal=ME, keytab=str(keytab)))


class DriverError(Exception):
    pass


def test_yarn_errors_names_kerberos_before_an_unreachable_resourcemanager(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import skein

    monkeypatch.setenv("HADOOP_CONF_DIR", str(secure_conf(tmp_path)))
    monkeypatch.setattr(last_driver, "log_path", lambda: tmp_path / "none.log")
    with (
        pytest.raises(KerberosError, match=r"KDC of realm EXAMPLE\.TEST did not"),
        connection.yarn_errors(),
    ):
        raise skein.exceptions.DriverError(TICKET_KDC_DOWN)
    with pytest.raises(connection.YarnUnreachableError), connection.yarn_errors():
        raise skein.exceptions.DriverError(RM_DOWN)
    # skein's "Unknown ApplicationId" after a refused login: its log tells.
    (tmp_path / "driver.log").write_text(f"WARN ipc.Client: ...\n{TICKET_KDC_DOWN}\n")
    monkeypatch.setattr(last_driver, "log_path", lambda: tmp_path / "driver.log")
    with (
        pytest.raises(KerberosError, match="did not answer"),
        connection.yarn_errors("application_1_1"),
    ):
        raise ValueError("Unknown ApplicationId 'application_1_1'")
    # On a cluster without Kerberos, the same log means nothing.
    monkeypatch.setenv(
        "HADOOP_CONF_DIR", str(secure_conf(tmp_path / "s", secure=False))
    )
    with (
        pytest.raises(connection.UnknownApplicationError),
        connection.yarn_errors("application_1_1"),
    ):
        raise ValueError("Unknown ApplicationId 'application_1_1'")


def test_login_as_reaches_connect_and_is_restored() -> None:
    login = Login(principal=ME, keytab="/k")
    before = connection._requested
    with connection.login_as(login):
        inside = connection._requested
    assert (before, inside, connection._requested) == (None, login, None)


def test_hdfs_namenodes_become_skein_file_systems(tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("")
    spec = JobSpec(
        script=str(script), hdfs_namenodes=("hdfs://nn2:8020/", "viewfs://cluster")
    )
    assert spec.hdfs_namenodes == ("hdfs://nn2:8020", "viewfs://cluster")
    app = to_skein(spec, am_source=str(script))
    assert list(app.file_systems) == ["hdfs://nn2:8020", "viewfs://cluster"]
    assert JobSpec.from_env(spec.to_env()) == spec
    for bad in ("nn2:8020", "s3://bucket", "hdfs://nn2:8020/data", "hdfs://"):
        with pytest.raises(
            SpecError, match=r"hdfs_namenodes: .* is not a name service"
        ):
            JobSpec(script=str(script), hdfs_namenodes=(bad,))
    assert issubclass(KerberosError, TfyarnError)


def test_a_keytab_login_reaches_this_process_hdfs_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("KRB5CCNAME", "FILE:/home/alice/cache")
    monkeypatch.delenv("KRB5_CLIENT_KTNAME", raising=False)
    kerberos.use_keytab_for_hdfs(Login())  # the ticket cache: nothing changes
    assert os.environ["KRB5CCNAME"] == "FILE:/home/alice/cache"
    assert "KRB5_CLIENT_KTNAME" not in os.environ
    kerberos.use_keytab_for_hdfs(Login(principal=ME, keytab="/k/alice.keytab"))
    assert os.environ["KRB5_CLIENT_KTNAME"] == "/k/alice.keytab"
    # A private cache: the user's own is never written.
    assert os.environ["KRB5CCNAME"].startswith("MEMORY:")
