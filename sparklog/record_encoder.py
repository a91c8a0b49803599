"""The sink's native encoding step: Arrow columns → Kafka v2 record batches, one partition at a time.

Owns handing pyarrow arrays to `pylog_native` as their raw buffers (no copy, no Python object per
row), the row → partition assignment (`Partitioner`: an explicit partition, murmur2 of the key as the
Java client's default partitioner, a sticky partition for keyless rows) and the codec names. Never
talks to a broker: `produce_client` sends what this builds.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Any, Optional

import pyarrow as pa
import pyarrow.compute as pc
import pylog_native

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

VarColumn = tuple[Any, Any, Any, int, int, bool]
FixedColumn = tuple[Any, Any, int, int]


class EncodeError(ValueError):
    """Rows that cannot become records (a bad partition number, a null header key)."""


def var_column(arr: pa.Array) -> VarColumn:
    """A binary/string (or large_*) array as (validity, offsets, data, offset, length, large)."""
    t = arr.type
    large = pa.types.is_large_binary(t) or pa.types.is_large_string(t)
    if not (large or pa.types.is_binary(t) or pa.types.is_string(t)):
        raise TypeError(f"expected a binary or string array, got {t}")
    validity, offsets, data = arr.buffers()[:3]
    return (validity if arr.null_count else None, offsets, data, arr.offset, len(arr), large)


def fixed_column(arr: pa.Array) -> FixedColumn:
    """An int32/int64 array as (validity, values, offset, length)."""
    validity, values = arr.buffers()[:2]
    return (validity if arr.null_count else None, values, arr.offset, len(arr))


def headers_column(arr: pa.Array) -> tuple[Any, Any, int, int, VarColumn, VarColumn]:
    """list<struct<key, value>> as (list validity, list offsets, offset, length, keys, values)."""
    validity, offsets = arr.buffers()[:2]
    entries = arr.values          # the whole child: list offsets index into it
    return (validity if arr.null_count else None, offsets, arr.offset, len(arr),
            var_column(entries.field(0)), var_column(entries.field(1)))


def milliseconds(arr: pa.Array) -> pa.Array:
    """A timestamp column as int64 ms since the epoch (floored, as Kafka's clients do); ints pass through."""
    if pa.types.is_timestamp(arr.type):
        us = arr.cast(pa.timestamp("us", arr.type.tz), safe=False).cast(pa.int64())
        return pc.floor(pc.divide(us.cast(pa.float64()), 1000.0)).cast(pa.int64())
    return arr.cast(pa.int64())


@dataclass(frozen=True)
class BatchSettings:
    """How batches are built: codec, its level, the largest batch (bytes, header included)."""

    codec: int = 0
    level: Optional[int] = None
    max_batch_bytes: int = 1_000_000


@dataclass
class Columns:
    """The columns of one Arrow batch that become records (all of them, or one topic's rows)."""

    value: VarColumn
    key: Optional[VarColumn] = None
    headers: Optional[tuple[Any, ...]] = None
    timestamp: Optional[FixedColumn] = None
    partition: Optional[FixedColumn] = None
    rows: int = 0

    @classmethod
    def from_arrays(cls, value: pa.Array, key: Optional[pa.Array] = None, headers: Optional[pa.Array] = None,
                    timestamp: Optional[pa.Array] = None, partition: Optional[pa.Array] = None) -> "Columns":
        return cls(var_column(value),
                   var_column(key) if key is not None and key.null_count < len(key) else None,
                   headers_column(headers) if headers is not None and headers.null_count < len(headers) else None,
                   fixed_column(milliseconds(timestamp)) if timestamp is not None else None,
                   fixed_column(partition.cast(pa.int32())) if partition is not None and partition.null_count < len(partition)
                   else None,
                   len(value))


def encode(cols: Columns, rows: Any, settings: BatchSettings, producer_id: int = -1, producer_epoch: int = -1,
           base_sequence: int = -1, now_ms: Optional[int] = None, transactional: bool = False) -> list[tuple[Any, int]]:
    """Record batches of `rows` (a buffer from `Partitioner.assign`, or None for every row):
    [(batch bytes as a buffer, record count)]; `transactional` marks them as a transaction's."""
    try:
        return pylog_native.encode_batches(
            cols.value, cols.key, cols.headers, cols.timestamp, rows, settings.codec, settings.level,
            settings.max_batch_bytes, int(time.time() * 1000) if now_ms is None else now_ms,
            producer_id, producer_epoch, base_sequence, transactional)
    except pylog_native.EncodeError as e:
        raise EncodeError(str(e)) from None


class Partitioner:
    """Row → partition for one topic, state kept across batches (the sticky partition of keyless rows)."""

    def __init__(self, num_partitions: int, switch_bytes: int, seed: Optional[int] = None) -> None:
        self.num_partitions = num_partitions
        self.switch_bytes = switch_bytes
        self.sticky = random.Random(seed).randrange(num_partitions) if num_partitions > 0 else 0
        self.sticky_bytes = 0

    def assign(self, cols: Columns) -> list[tuple[int, Any, int]]:
        """[(partition, rows buffer, row count)] for the partitions that get rows, in partition order."""
        try:
            groups, self.sticky, self.sticky_bytes = pylog_native.partition_rows(
                cols.value, cols.key, cols.partition, self.num_partitions, self.sticky, self.sticky_bytes,
                self.switch_bytes)
        except pylog_native.EncodeError as e:
            raise EncodeError(str(e)) from None
        return groups
