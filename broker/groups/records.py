"""The record formats of `__consumer_offsets`, byte-compatible with Kafka's, and group -> partition.

Owns: encoding and decoding the keys and values Kafka's group coordinator writes (OffsetCommitKey
v1, OffsetCommitValue v3 (reads v0-v3), GroupMetadataKey v2, GroupMetadataValue v3 (reads v0-v3)),
and `partition_for`, Kafka's `abs(groupId.hashCode) % offsets.topic.num.partitions`.

Pure functions over bytes: never touches logs, groups or the network.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

OFFSET_KEY_VERSION = 1
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSION = 3
GROUP_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


def java_string_hash(s: str) -> int:
    """Java's String.hashCode (UTF-16 code units, int32 overflow)."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for(group_id: str, num_partitions: int) -> int:
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


@dataclass(frozen=True)
class OffsetKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    group: str


@dataclass
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1


@dataclass
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass
class GroupValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: list[MemberRecord] = field(default_factory=list)


# -- primitive writers/readers
def _str(s: str | None) -> bytes:
    if s is None:
        return _I16.pack(-1)
    b = s.encode()
    return _I16.pack(len(b)) + b


def _bytes(b: bytes | None) -> bytes:
    if b is None:
        return _I32.pack(-1)
    return _I32.pack(len(b)) + b


class _In:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def _take(self, st: struct.Struct) -> int:
        (v,) = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        return v

    def i16(self) -> int:
        return self._take(_I16)

    def i32(self) -> int:
        return self._take(_I32)

    def i64(self) -> int:
        return self._take(_I64)

    def string(self) -> str | None:
        n = self.i16()
        if n < 0:
            return None
        s = self.buf[self.pos:self.pos + n].decode()
        self.pos += n
        return s

    def blob(self) -> bytes:
        n = self.i32()
        if n < 0:
            return b""
        b = bytes(self.buf[self.pos:self.pos + n])
        self.pos += n
        return b


# -- keys
def offset_key(group: str, topic: str, partition: int) -> bytes:
    return _I16.pack(OFFSET_KEY_VERSION) + _str(group) + _str(topic) + _I32.pack(partition)


def group_key(group: str) -> bytes:
    return _I16.pack(GROUP_KEY_VERSION) + _str(group)


def decode_key(buf: bytes) -> OffsetKey | GroupKey | None:
    """The key of a `__consumer_offsets` record; None for kinds pylog does not use (transactions, 848)."""
    r = _In(buf)
    version = r.i16()
    if version in (0, 1):
        return OffsetKey(r.string() or "", r.string() or "", r.i32())
    if version == 2:
        return GroupKey(r.string() or "")
    return None


# -- values
def offset_value(v: OffsetValue) -> bytes:
    return (_I16.pack(OFFSET_VALUE_VERSION) + _I64.pack(v.offset) + _I32.pack(v.leader_epoch)
            + _str(v.metadata) + _I64.pack(v.commit_timestamp))


def decode_offset_value(buf: bytes) -> OffsetValue:
    r = _In(buf)
    version = r.i16()
    offset = r.i64()
    epoch = r.i32() if version >= 3 else -1
    metadata = r.string() or ""
    ts = r.i64()
    return OffsetValue(offset, epoch, metadata, ts)


def group_value(v: GroupValue) -> bytes:
    out = bytearray(_I16.pack(GROUP_VALUE_VERSION))
    out += _str(v.protocol_type) + _I32.pack(v.generation) + _str(v.protocol) + _str(v.leader)
    out += _I64.pack(v.current_state_timestamp) + _I32.pack(len(v.members))
    for m in v.members:
        out += _str(m.member_id) + _str(m.group_instance_id) + _str(m.client_id) + _str(m.client_host)
        out += _I32.pack(m.rebalance_timeout_ms) + _I32.pack(m.session_timeout_ms)
        out += _bytes(m.subscription) + _bytes(m.assignment)
    return bytes(out)


def decode_group_value(buf: bytes) -> GroupValue:
    r = _In(buf)
    version = r.i16()
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string()
    leader = r.string()
    ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.i32()):
        member_id = r.string() or ""
        instance = r.string() if version >= 3 else None
        client_id = r.string() or ""
        host = r.string() or ""
        session = r.i32()
        rebalance = session
        if version >= 1:
            rebalance, session = session, r.i32()
        members.append(MemberRecord(member_id, instance, client_id, host, rebalance, session, r.blob(), r.blob()))
    return GroupValue(protocol_type, generation, protocol, leader, ts, members)


def subscribed_topics(subscription: bytes) -> set[str] | None:
    """Topics of a consumer protocol subscription (any version); None when it cannot be parsed."""
    try:
        r = _In(subscription)
        r.i16()
        return {r.string() or "" for _ in range(r.i32())}
    except (struct.error, UnicodeDecodeError):
        return None
