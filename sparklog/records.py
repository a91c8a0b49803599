"""Convert a list of confluent-kafka messages of one partition into one `pyarrow.RecordBatch`.

Owns the row layout on the wire to Spark: columns are built in bulk (one C-level `map` per field and
one `pyarrow.array` per column, no per-row Python code), with exactly the Arrow types Spark checks.
Never polls a consumer and never filters messages: the caller passes data messages only.
"""
from __future__ import annotations

from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Message

from sparklog.schema import ARROW_HEADERS, ARROW_TIMESTAMP

_TIMESTAMP_PAIR = pa.struct([pa.field("type", pa.int32()), pa.field("ms", pa.int64())])
_ONE = pa.scalar(1, pa.int32())
_THOUSAND = pa.scalar(1000, pa.int64())


def to_record_batch(messages: Sequence[Message], topic: str, partition: int, schema: pa.Schema,
                    include_headers: bool) -> pa.RecordBatch:
    """Rows key, value, topic, partition, offset, timestamp, timestampType[, headers].

    timestampType follows the Java client: -1 none, 0 CreateTime, 1 LogAppendTime (librdkafka counts
    from 0 = not available, hence the minus one).
    """
    n = len(messages)
    ts = pa.array(list(map(Message.timestamp, messages)), _TIMESTAMP_PAIR)
    columns = [
        pa.array(list(map(Message.key, messages)), pa.binary()),
        pa.array(list(map(Message.value, messages)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(list(map(Message.offset, messages)), pa.int64()),
        pc.multiply(ts.field(1), _THOUSAND).cast(ARROW_TIMESTAMP),
        pc.subtract(ts.field(0), _ONE),
    ]
    if include_headers:
        columns.append(pa.array(list(map(Message.headers, messages)), ARROW_HEADERS))
    return pa.RecordBatch.from_arrays(columns, schema=schema)
