"""Calls lost in a NameNode failover, made good (tfyarn.data.fs.lost_calls),
against a fake hdfs-native client; the real thing is
tests/integration/ha/test_lost_calls.py."""

from __future__ import annotations

from typing import Any

import pytest

from tfyarn.data.fs import HdfsFileSystem, lost_calls
from tfyarn.data.fs.lost_calls import (
    AGAIN,
    ASKED_AGAIN,
    SEND_AGAIN,
    KeptBytes,
    made_good,
    resent_when_asked,
)

LOST = OSError("RPC listener disconnected")
# What hdfs-native 0.14 raises when a NameNode still taking over is asked for a
# delegation token it has not loaded yet (seen on 3.1.1, the plugin's twin).
ASKED = RuntimeError(
    'RPCError("org.apache.hadoop.ipc.RetriableException", '
    '"org.apache.hadoop.security.token.SecretManager$InvalidToken: token '
    "(HDFS_DELEGATION_TOKEN token 7 for alice) can't be found in cache\\n"
    '\\tat org.apache.hadoop.ipc.Server$Handler.run(Server.java:2678)\\n")'
)
STANDBY = RuntimeError(
    'RPCError("org.apache.hadoop.ipc.StandbyException", "Operation category READ '
    'is not supported in state standby")'
)


def no_sleep(_: float) -> None:
    pass


class Calls:
    """A call that fails with the given errors first, then returns ``value``."""

    def __init__(self, *errors: BaseException, value: Any = "done") -> None:
        self.errors = list(errors)
        self.value = value
        self.count = 0

    def __call__(self) -> Any:
        self.count += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.value


def test_a_lost_call_that_was_applied_is_not_sent_again() -> None:
    call = Calls(LOST)
    assert made_good(True, call, lambda _: "applied", sleep=no_sleep) == "applied"
    assert call.count == 1


def test_a_lost_call_that_was_not_applied_is_sent_again() -> None:
    call = Calls(LOST)
    assert made_good(True, call, lambda _: SEND_AGAIN, sleep=no_sleep) == "done"
    assert call.count == 2


def test_a_call_lost_every_time_fails_after_the_last_try() -> None:
    call = Calls(*[LOST] * 5)
    with pytest.raises(OSError, match="listener"):
        made_good(True, call, lambda _: SEND_AGAIN, sleep=no_sleep)
    assert call.count == 1 + AGAIN


@pytest.mark.parametrize(
    ("ha", "error"),
    [
        (False, LOST),  # one NameNode: no failover explains it
        (True, FileNotFoundError("/x")),  # the NameNode answered
        (True, OSError("Connection refused (os error 111)")),  # the service is down
        (True, RuntimeError("RPCError(SafeModeException)")),
    ],
)
def test_other_errors_stand_without_a_look(ha: bool, error: BaseException) -> None:
    call = Calls(error)
    looked = []
    with pytest.raises(type(error)):
        made_good(ha, call, lambda e: looked.append(e) or "applied", sleep=no_sleep)
    assert (call.count, looked) == (1, [])


def test_a_loss_nothing_explains_raises_its_own_error() -> None:
    def took_effect(lost: OSError) -> str:
        raise lost

    with pytest.raises(OSError, match="listener"):
        made_good(True, Calls(LOST), took_effect, sleep=no_sleep)


class FakeWriter:
    def __init__(
        self, store: dict[str, bytes], fail: list[tuple[str, BaseException]]
    ) -> None:
        self.store = store
        self.fail = fail
        self.data = bytearray()

    def _maybe_fail(self, op: str) -> None:
        if self.fail and self.fail[0][0] == op:
            raise self.fail.pop(0)[1]

    def write(self, data: bytes) -> int:
        self._maybe_fail("write")
        self.data += data
        return len(data)

    def close(self) -> None:
        self._maybe_fail("close")
        self.store["f"] = bytes(self.data)


class FakeClient:
    """One file ``f``; failures to raise, in order, at create/write/close."""

    def __init__(self, *fail: tuple[str, BaseException]) -> None:
        self.store: dict[str, bytes] = {}
        self.fail = list(fail)
        self.creates = self.deletes = 0

    def create(self) -> FakeWriter:
        self.creates += 1
        if self.fail and self.fail[0][0] == "create":
            raise self.fail.pop(0)[1]
        return FakeWriter(self.store, self.fail)

    def delete(self) -> None:
        self.deletes += 1
        self.store.pop("f", None)


@pytest.mark.parametrize(
    ("where", "error", "times"),
    [
        ("create", LOST, 1),
        ("write", LOST, 1),
        ("close", LOST, 1),
        # A block or a close the NameNode asked for again (a create so asked
        # is sent again whole by HdfsFileSystem._call).
        ("write", ASKED, 3),
        ("close", ASKED, 3),
    ],
)
def test_a_new_file_lost_or_asked_again_mid_write_is_written_anew_whole(
    where: str, error: BaseException, times: int
) -> None:
    client = FakeClient(*[(where, error)] * times)
    out = KeptBytes(True, client.create, client.delete, sleep=no_sleep)
    out.write(b"abc")
    out.write(b"def")
    out.close()
    assert client.store["f"] == b"abcdef"
    assert (client.creates, client.deletes) == (1 + times, times)


@pytest.mark.parametrize(
    ("ha", "error", "said"),
    [
        (False, LOST, "listener"),  # without a name service a loss is the caller's
        (True, STANDBY, "StandbyException"),  # a refusal, not a loss
    ],
)
def test_a_close_no_failover_explains_is_not_written_anew(
    ha: bool, error: BaseException, said: str
) -> None:
    client = FakeClient(("close", error))
    out = KeptBytes(ha, client.create, client.delete, sleep=no_sleep)
    out.write(b"abc")
    with pytest.raises(type(error), match=said):
        out.close()
    assert client.creates == 1


def test_a_file_beyond_what_is_kept_is_not_written_anew(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lost_calls, "KEEP", 4)
    client = FakeClient(("close", LOST))
    out = KeptBytes(True, client.create, client.delete, sleep=no_sleep)
    out.write(b"abc")
    out.write(b"de")
    with pytest.raises(OSError, match="listener"):
        out.close()


@pytest.mark.parametrize(
    ("error", "said", "rewrites"),
    [(LOST, "listener", AGAIN), (ASKED, "RetriableException", ASKED_AGAIN)],
)
def test_a_file_failing_again_and_again_fails_after_the_last_rewrite(
    error: BaseException, said: str, rewrites: int
) -> None:
    client = FakeClient(*[("close", error)] * (rewrites + 1))
    out = KeptBytes(True, client.create, client.delete, sleep=no_sleep)
    out.write(b"abc")
    with pytest.raises(type(error), match=said):
        out.close()
    assert client.creates == 1 + rewrites


def test_a_call_the_namenode_asks_again_for_is_sent_again_a_second_later() -> None:
    call = Calls(ASKED, ASKED)
    slept: list[float] = []
    assert resent_when_asked(call, sleep=slept.append) == "done"
    assert call.count == 3 and slept == [lost_calls.SETTLE_S] * 2


def test_a_call_asked_again_every_time_fails_after_the_last_try() -> None:
    call = Calls(*[ASKED] * (ASKED_AGAIN + 2))
    with pytest.raises(RuntimeError, match="RetriableException"):
        resent_when_asked(call, sleep=no_sleep)
    assert call.count == 1 + ASKED_AGAIN


@pytest.mark.parametrize("error", [STANDBY, LOST, FileNotFoundError("/x")])
def test_other_refusals_are_not_sent_again(error: BaseException) -> None:
    call = Calls(error)
    with pytest.raises(type(error)):
        resent_when_asked(call, sleep=no_sleep)
    assert call.count == 1


class AskingClient:
    """hdfs-native's client whose NameNode asks twice before each answer."""

    def __init__(self) -> None:
        self.asked = 0

    def get_file_info(self, path: str) -> Any:
        self.asked += 1
        if self.asked % 3:
            raise ASKED

        class Status:
            length, isdir = 5, False

        return Status()


def test_every_namespace_call_of_tfyarn_data_is_sent_again_when_asked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(lost_calls, "SETTLE_S", 0.0)
    fs = HdfsFileSystem("hdfs", "nn.example:8020", timeout=10)
    fs._client = client = AskingClient()
    assert fs.info("hdfs://nn.example:8020/f").size == 5
    assert client.asked == 3
