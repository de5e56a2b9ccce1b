"""Hadoop token files: read, merge and write them; the dates inside a delegation token.

A YARN container finds its delegation tokens in the file named by
``HADOOP_TOKEN_FILE_LOCATION`` (Hadoop's ``Credentials`` "token storage"
format: ``HDTS``, a version byte, then Writable-encoded tokens and secrets).
The master reads it to learn when the job's HDFS tokens end, and both the
master and every task rewrite it when fresh tokens arrive (``am/tokens.py``), so
hdfs-native, which reads the file for each new NameNode connection, finds them.
Pure Python, standard library only.
"""

from __future__ import annotations

import io
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

MAGIC = b"HDTS"
WRITABLE = 0  # Credentials.SerializedFormat.WRITABLE (what YARN writes)
PROTOBUF = 1
HDFS_KIND = "HDFS_DELEGATION_TOKEN"
# Kinds whose identifier is an AbstractDelegationTokenIdentifier (dates inside).
DELEGATION_KINDS = (
    HDFS_KIND,
    "RM_DELEGATION_TOKEN",
    "WEBHDFS delegation",
    "SWEBHDFS delegation",
)


# hdfs-native ignores a delegation token whose maximum date is less than this
# far away (security/user.rs, get_token; 0.14.7): a token is of no use to a
# new connection from then on, though the NameNode still accepts it.
CLIENT_SLACK_S = 60.0


class TokenFileError(ValueError):
    """Not a Hadoop token file this code can read."""


@dataclass(frozen=True)
class Token:
    """One token: Hadoop's ``Token`` fields and the alias it is stored under."""

    alias: bytes
    identifier: bytes
    password: bytes
    kind: str
    service: str


@dataclass(frozen=True)
class Dates:
    """What a delegation token's identifier says about its life (epoch seconds)."""

    owner: str
    renewer: str
    issued: float
    max_date: float


@dataclass(frozen=True)
class TokenFile:
    """The tokens and secret keys of one token file."""

    tokens: tuple[Token, ...] = ()
    secrets: tuple[tuple[bytes, bytes], ...] = field(default=())

    @classmethod
    def from_bytes(cls, data: bytes) -> TokenFile:
        """Parse a token file (either of Hadoop's two formats).

        Raises
        ------
        TokenFileError
            Not a token file, or cut short.
        """
        if data[:4] != MAGIC or len(data) < 5:
            raise TokenFileError("not a Hadoop token file (no HDTS header)")
        try:
            if data[4] == WRITABLE:
                return _read_writable(io.BytesIO(data[5:]))
            if data[4] == PROTOBUF:
                return _read_protobuf(data[5:])
        except (IndexError, EOFError, UnicodeDecodeError) as exc:
            raise TokenFileError(f"a truncated or corrupt token file: {exc}") from exc
        raise TokenFileError(f"unknown token file version {data[4]}")

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> TokenFile:
        return cls.from_bytes(Path(path).read_bytes())

    def to_bytes(self) -> bytes:
        """The file in the Writable format, which every Hadoop client reads."""
        out = io.BytesIO()
        out.write(MAGIC + bytes([WRITABLE]))
        _write_vlong(out, len(self.tokens))
        for t in self.tokens:
            _write_bytes(out, t.alias)
            _write_bytes(out, t.identifier)
            _write_bytes(out, t.password)
            _write_bytes(out, t.kind.encode())
            _write_bytes(out, t.service.encode())
        _write_vlong(out, len(self.secrets))
        for alias, secret in self.secrets:
            _write_bytes(out, alias)
            _write_bytes(out, secret)
        return out.getvalue()

    def of_kind(self, kind: str) -> list[Token]:
        return [t for t in self.tokens if t.kind == kind]

    def merged(self, fresh: TokenFile) -> TokenFile:
        """This file with ``fresh``'s tokens in place of those of the same kind
        and service (others, such as YARN's AMRMToken, are kept)."""
        new = {(t.kind, t.service) for t in fresh.tokens}
        kept = [t for t in self.tokens if (t.kind, t.service) not in new]
        return TokenFile(tokens=(*kept, *fresh.tokens), secrets=self.secrets)


def dates(token: Token) -> Dates | None:
    """Issue and maximum dates of a delegation token; None for other kinds.

    The identifier (``AbstractDelegationTokenIdentifier``) is: a version
    byte (0), owner, renewer and real user (Text), issue and maximum date
    (vlong, ms), sequence number and master key id (vint).
    """
    if token.kind not in DELEGATION_KINDS:
        return None
    stream = io.BytesIO(token.identifier)
    try:
        if stream.read(1) != b"\x00":
            return None
        owner = _read_bytes(stream).decode()
        renewer = _read_bytes(stream).decode()
        _read_bytes(stream)  # real user
        issued = _read_vlong(stream)
        max_date = _read_vlong(stream)
    except (EOFError, UnicodeDecodeError):
        return None
    return Dates(owner, renewer, issued / 1000.0, max_date / 1000.0)


def usable_until(d: Dates) -> float:
    """When new hdfs-native connections stop using a token with these dates."""
    return d.max_date - CLIENT_SLACK_S


def write_atomically(path: str | os.PathLike[str], data: bytes) -> None:
    """Replace ``path`` with ``data`` so readers see the old file or the new one,
    never half of it (a temporary file beside it, private, then renamed)."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


# -- Hadoop's Writable encoding (WritableUtils) --------------------------------


def _read_vlong(stream: io.BytesIO) -> int:
    first = _byte(stream)
    if first >= -112:
        return first
    size = (-119 - first) if first < -120 else (-111 - first)
    value = 0
    for _ in range(size - 1):
        value = (value << 8) | (_byte(stream) & 0xFF)
    negative = first < -120 or -112 <= first < 0
    return ~value if negative else value


def _write_vlong(out: io.BytesIO, value: int) -> None:
    if -112 <= value <= 127:
        out.write(value.to_bytes(1, "big", signed=True))
        return
    size = -112
    if value < 0:
        value = ~value
        size = -120
    tmp = value
    while tmp:
        tmp >>= 8
        size -= 1
    out.write(size.to_bytes(1, "big", signed=True))
    count = -(size + 120) if size < -120 else -(size + 112)
    out.write(value.to_bytes(count, "big"))


def _byte(stream: io.BytesIO) -> int:
    raw = stream.read(1)
    if not raw:
        raise EOFError("unexpected end of data")
    return int.from_bytes(raw, "big", signed=True)


def _read_bytes(stream: io.BytesIO) -> bytes:
    size = _read_vlong(stream)
    data = stream.read(size)
    if size < 0 or len(data) != size:
        raise EOFError("unexpected end of data")
    return data


def _write_bytes(out: io.BytesIO, data: bytes) -> None:
    _write_vlong(out, len(data))
    out.write(data)


def _read_writable(stream: io.BytesIO) -> TokenFile:
    tokens = []
    for _ in range(_read_vlong(stream)):
        alias = _read_bytes(stream)
        identifier, password = _read_bytes(stream), _read_bytes(stream)
        kind, service = _read_bytes(stream).decode(), _read_bytes(stream).decode()
        tokens.append(Token(alias, identifier, password, kind, service))
    secrets = []
    for _ in range(_read_vlong(stream)):
        secrets.append((_read_bytes(stream), _read_bytes(stream)))
    return TokenFile(tuple(tokens), tuple(secrets))


# -- the protobuf format (CredentialsProto, written delimited) ----------------


def _read_protobuf(data: bytes) -> TokenFile:
    size, pos = _varint(data, 0)
    message = data[pos : pos + size]
    if len(message) != size:
        raise EOFError("unexpected end of data")
    tokens, secrets = [], []
    for number, value in _fields(message):
        entry = dict(_fields(value))
        alias = entry.get(1, b"")
        if number == 1 and 2 in entry:  # tokens: CredentialsKVProto{alias, token}
            t = dict(_fields(entry[2]))
            tokens.append(
                Token(
                    alias,
                    t.get(1, b""),
                    t.get(2, b""),
                    t.get(3, b"").decode(),
                    t.get(4, b"").decode(),
                )
            )
        elif number == 2:  # secrets: CredentialsKVProto{alias, secret}
            secrets.append((alias, entry.get(3, b"")))
    return TokenFile(tuple(tokens), tuple(secrets))


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, pos


def _fields(message: bytes) -> list[tuple[int, bytes]]:
    """The length-delimited fields of a message (all these messages have)."""
    out, pos = [], 0
    while pos < len(message):
        key, pos = _varint(message, pos)
        if key & 7 != 2:
            raise EOFError(f"unexpected protobuf wire type {key & 7}")
        size, pos = _varint(message, pos)
        out.append((key >> 3, message[pos : pos + size]))
        pos += size
    return out
