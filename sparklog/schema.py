"""The fixed row layout of the `pylog` source: Spark schema and the exact Arrow schema Spark expects.

Owns the column names and types (those of Spark's built-in Kafka connector) and the tuning constants
shared by driver and executors. Never talks to a broker.
"""
from __future__ import annotations

import functools

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

FORMAT_NAME = "pylog"

HEADER_TYPE = StructType([StructField("key", StringType()), StructField("value", BinaryType())])


def spark_schema(include_headers: bool) -> StructType:
    """key, value, topic, partition, offset, timestamp, timestampType[, headers] as Spark's Kafka source."""
    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        fields.append(StructField("headers", ArrayType(HEADER_TYPE)))
    return StructType(fields)


ARROW_HEADERS = pa.list_(pa.field("element", pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])))
ARROW_TIMESTAMP = pa.timestamp("us", tz="UTC")


@functools.cache
def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema Spark checks yielded batches against (`to_arrow_schema(schema, timezone="UTC")`);
    built once per process (pyspark's conversion costs about 0.25 ms, and every range reader needs it)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema(include_headers), timezone="UTC")


# Executor-side tuning, in one place.
ARROW_BATCH_ROWS = 32_768          # rows per yielded pyarrow.RecordBatch (bounded memory per task)
DECODE_ROWS = 65_536               # rows decoded at a time from one Fetch answer (bounded memory per task)
PREFETCH_TASK_RECORDS = 250_000    # a task this small asks for its ranges' first records in one Fetch
COALESCE_BYTES = 32 * 1024 * 1024  # small Arrow batches of a task are joined up to ARROW_BATCH_ROWS rows and this
CONSUME_BATCH = 10_000             # messages asked of librdkafka per consume() call
TRANSIENT_RETRIES = 3              # consumer re-creations after transient errors, per range
RETRY_BACKOFF_S = 0.5
DEFAULT_POLL_TIMEOUT_MS = 120_000  # kafkaConsumer.pollTimeoutMs default (spark.network.timeout)
HIGH_WATERMARK_SETTLE_MS = 2_000  # how long a high watermark below a range's end may be a new leader catching up
DEFAULT_FETCH_OFFSET_RETRIES = 3   # fetchOffset.numRetries
DEFAULT_FETCH_OFFSET_RETRY_MS = 1000  # fetchOffset.retryIntervalMs
DEFAULT_MAX_TRIGGER_DELAY = "15m"

# librdkafka settings for fast range reads; any `kafka.*` option overrides them.
EXECUTOR_CONSUMER_DEFAULTS: dict[str, object] = {
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "error",          # out-of-range must surface, never silently reset
    "isolation.level": "read_uncommitted",  # Spark's Kafka consumer default
    "fetch.max.bytes": 64 * 1024 * 1024,
    "max.partition.fetch.bytes": 8 * 1024 * 1024,
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 131_072,
    "fetch.queue.backoff.ms": 1,            # default 1000 ms stalls a fast reader whenever the queue fills
    "fetch.wait.max.ms": 10,                # ranges end at or below the high watermark: no long polls needed
}
