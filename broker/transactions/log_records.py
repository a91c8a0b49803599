"""`__transaction_state` records in Kafka's own format (TransactionLogKey / TransactionLogValue v0).

Key: version int16 = 0, transactional id (string). Value v0: producer id int64, producer epoch
int16, transaction timeout int32, state int8, partitions (array of topic string and int32 partition
array), last update time int64, start time int64. A null value is a tombstone (an expired id).
The partition of a transactional id is Kafka's: abs(Java hashCode) modulo the partition count.
Sans-I/O.
"""
from __future__ import annotations

import struct

from broker.groups.records import partition_for
from broker.transactions.metadata import TxnMetadata, TxnState

__all__ = ["TRANSACTION_STATE_TOPIC", "decode_key", "decode_value", "encode_key", "encode_value", "partition_for"]

TRANSACTION_STATE_TOPIC = "__transaction_state"

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_HEAD = struct.Struct(">hqhib")        # version, producer id, epoch, timeout, state
_TIMES = struct.Struct(">qq")


def _string(s: str) -> bytes:
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(0) + _string(transactional_id)


def decode_key(buf: bytes) -> str:
    (version,) = _I16.unpack_from(buf, 0)
    if version != 0:
        raise ValueError(f"unknown __transaction_state key version {version}")
    (n,) = _I16.unpack_from(buf, 2)
    return buf[4:4 + n].decode()


def encode_value(m: TxnMetadata) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for topic, partition in sorted(m.partitions):
        by_topic.setdefault(topic, []).append(partition)
    out = bytearray(_HEAD.pack(0, m.producer_id, m.producer_epoch, m.timeout_ms, int(m.state)))
    out += _I32.pack(len(by_topic))
    for topic, partitions in by_topic.items():
        out += _string(topic) + _I32.pack(len(partitions))
        for p in partitions:
            out += _I32.pack(p)
    out += _TIMES.pack(m.last_update_ms, m.start_ms)
    return bytes(out)


def decode_value(transactional_id: str, buf: bytes) -> TxnMetadata:
    version, pid, epoch, timeout, state = _HEAD.unpack_from(buf, 0)
    if version not in (0, 1):
        raise ValueError(f"unknown __transaction_state value version {version}")
    pos = _HEAD.size
    if version == 1:        # Kafka 4's flexible version: compact arrays; read what pylog and Kafka 3 never write
        raise ValueError("__transaction_state value version 1 (Kafka 4) is not supported")
    (count,) = _I32.unpack_from(buf, pos)
    pos += 4
    partitions = set()
    for _ in range(max(count, 0)):
        (n,) = _I16.unpack_from(buf, pos)
        topic = buf[pos + 2:pos + 2 + n].decode()
        pos += 2 + n
        (k,) = _I32.unpack_from(buf, pos)
        pos += 4
        for _ in range(k):
            (p,) = _I32.unpack_from(buf, pos)
            pos += 4
            partitions.add((topic, p))
    last_update, start = _TIMES.unpack_from(buf, pos)
    return TxnMetadata(transactional_id, pid, epoch, timeout, TxnState(state), frozenset(partitions), start,
                       last_update)
