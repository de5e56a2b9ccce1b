"""Hadoop token files (tfyarn/contract/tokens.py): read, merge, write, dates."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from _am_support import AMRM, hdfs_token

from tfyarn.contract import tokens
from tfyarn.contract.tokens import HDFS_KIND, Token, TokenFile, TokenFileError


@pytest.mark.parametrize(
    "value",
    [
        0,
        1,
        -1,
        127,
        -112,
        128,
        -113,
        255,
        256,
        65_535,
        -65_536,
        1_795_500_006_958,
        -(2**40),
        2**62,
    ],
)
def test_hadoop_vlongs_round_trip(value: int) -> None:
    out = io.BytesIO()
    tokens._write_vlong(out, value)
    assert tokens._read_vlong(io.BytesIO(out.getvalue())) == value


def test_known_vlong_bytes_match_hadoop() -> None:
    # From a token file written by Hadoop 3.4 (DelegationTokenFetcher).
    raw = bytes.fromhex("8a01a20c21dbf3")
    assert tokens._read_vlong(io.BytesIO(raw)) == 0x01A20C21DBF3
    out = io.BytesIO()
    tokens._write_vlong(out, 0x01A20C21DBF3)
    assert out.getvalue() == raw


def test_a_file_written_by_hadoop_parses_and_rewrites_byte_for_byte() -> None:
    # DelegationTokenFetcher's output on the secure local cluster.
    raw = bytes.fromhex(
        "48445453"
        "00"
        "01"
        "0e" + b"127.0.0.1:8520".hex() + "2d"
        "00"
        "15" + b"root@TFYARN10588.TEST".hex() + "04" + b"root".hex() + "00"
        "8a01a20c21dbf3"
        "8a01a20c23b0b3"
        "01"
        "02"
        "14"
        "5b0a7f7b6e247189050cc5c08a1cc6a1cdc48266"
        "15" + b"HDFS_DELEGATION_TOKEN".hex() + "0e" + b"127.0.0.1:8520".hex() + "00"
    )
    parsed = TokenFile.from_bytes(raw)
    (token,) = parsed.tokens
    assert (token.kind, token.service) == (HDFS_KIND, "127.0.0.1:8520")
    dates = tokens.dates(token)
    assert dates is not None
    assert dates.owner == "root@TFYARN10588.TEST" and dates.renewer == "root"
    assert dates.max_date - dates.issued == pytest.approx(120.0)
    assert parsed.to_bytes() == raw


def test_merged_replaces_same_kind_and_service_and_keeps_the_rest() -> None:
    old = TokenFile(
        tokens=(
            AMRM,
            hdfs_token("10.0.0.1:8020", issued_ms=1000),
            hdfs_token("10.0.0.2:8020", issued_ms=1000),
        ),
        secrets=((b"k", b"v"),),
    )
    fresh = TokenFile(tokens=(hdfs_token("10.0.0.1:8020", issued_ms=5000),))
    merged = TokenFile.from_bytes(old.merged(fresh).to_bytes())
    by_service = {(t.kind, t.service): t for t in merged.tokens}
    assert len(merged.tokens) == 3
    assert ("YARN_AM_RM_TOKEN", "") in by_service  # the master's AMRMToken stays
    issued = {
        s: tokens.dates(t).issued for (k, s), t in by_service.items() if k == HDFS_KIND
    }  # type: ignore[union-attr]
    assert issued == {"10.0.0.1:8020": 5.0, "10.0.0.2:8020": 1.0}
    assert merged.secrets == ((b"k", b"v"),)


def test_the_protobuf_format_is_read_too() -> None:
    def field(number: int, data: bytes) -> bytes:
        return bytes([number << 3 | 2, len(data)]) + data

    token = (
        field(1, b"ID")
        + field(2, b"PW")
        + field(3, HDFS_KIND.encode())
        + field(4, b"h:1")
    )
    body = field(1, field(1, b"alias") + field(2, token)) + field(
        2, field(1, b"k") + field(3, b"s")
    )
    raw = b"HDTS\x01" + bytes([len(body)]) + body
    parsed = TokenFile.from_bytes(raw)
    assert parsed.tokens == (Token(b"alias", b"ID", b"PW", HDFS_KIND, "h:1"),)
    assert parsed.secrets == ((b"k", b"s"),)


@pytest.mark.parametrize(
    "raw", [b"", b"NOPE\x00", b"HDTS\x07", b"HDTS\x00\x01\x0e127.0"]
)
def test_what_is_not_a_token_file_is_refused(raw: bytes) -> None:
    with pytest.raises(TokenFileError):
        TokenFile.from_bytes(raw)


def test_dates_only_for_delegation_tokens() -> None:
    assert tokens.dates(AMRM) is None
    assert tokens.dates(hdfs_token("h:1")) is not None


def test_write_atomically_replaces_and_leaves_nothing_beside(tmp_path: Path) -> None:
    target = tmp_path / "container_tokens"
    target.write_bytes(b"old")
    tokens.write_atomically(target, b"new")
    assert target.read_bytes() == b"new"
    assert [p.name for p in tmp_path.iterdir()] == ["container_tokens"]
    assert target.stat().st_mode & 0o077 == 0  # private, like the NodeManager's
