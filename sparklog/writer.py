"""Sinks into Kafka topics: `df.write.format("pylog")` (append) and `df.writeStream.format("pylog")`.

Semantics: at-least-once by default. Each Spark task owns one idempotent producer, sends its rows, and
waits for every acknowledgement before reporting success; any delivery failure fails the task (never a
silent drop). A retried task or a re-run micro-batch sends its rows again, so a reader can see
duplicates, as with Spark's own Kafka sink. `deliveryGuarantee=exactly-once` writes each task's rows
in a Kafka transaction that the driver commits with the batch (`exactly_once_sink`): read_committed
readers see every row once.

Two producers, chosen by the `producer` option (auto | native | librdkafka), as the read side's
`fetcher`: the native path (`native_sink`: Arrow columns encoded in Rust, sent by the sink's own
Produce client, no Python object per row) for plain TCP, librdkafka (`_TaskProducer`, one
`produce` call per row) for TLS and SASL. Keyed rows land on the same partitions either way only
with the native path's murmur2 (the Java client's and Spark's choice); librdkafka's default
partitioner hashes keys with CRC32 (consistent_random).

Owns the input-schema checks (value required; key, topic, partition, headers optional; the `topic`
option overrides the column, as in Spark) and the produce loop. Never reads from Kafka.
"""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any, Iterator, List, Optional

import pyarrow as pa
from confluent_kafka import KafkaError, KafkaException, Producer
from pyspark import TaskContext
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from sparklog import client_configs, exactly_once_sink
from sparklog.errors import in_one_line
from sparklog.kafka_log import with_logger
from sparklog.native_sink import NativeTaskProducer
from sparklog.options import OptionError, WriteOptions, native_producer
from sparklog.produce_client import ProduceClient
from sparklog.reachability import check_reachable
from sparklog.schema import HEADER_TYPE

log = logging.getLogger(__name__)

FLUSH_TIMEOUT_S = 300.0


@dataclass
class WriteResult(WriterCommitMessage):
    records: int


def check_input_schema(schema: StructType, topic_option: Optional[str]) -> None:
    """Spark Kafka's `KafkaWriter.validateQuery`, with its messages."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if topic_option is None:
        if "topic" not in fields:
            raise OptionError("topic option required when no 'topic' attribute is present. "
                              "Use the topic option for setting a topic.")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise OptionError("Topic type must be a String")
    if "key" in fields and not isinstance(fields["key"], (StringType, BinaryType)):
        raise OptionError("key attribute type must be a String or BinaryType")
    if "value" not in fields:
        raise OptionError("Required attribute 'value' not found")
    if not isinstance(fields["value"], (StringType, BinaryType)):
        raise OptionError("value attribute type must be a String or BinaryType")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise OptionError("partition attribute type must be an IntegerType")
    if "headers" in fields:
        t = fields["headers"]
        ok = (isinstance(t, ArrayType) and isinstance(t.elementType, StructType)
              and [(f.name, type(f.dataType)) for f in t.elementType.fields]
              == [(f.name, type(f.dataType)) for f in HEADER_TYPE.fields])
        if not ok:
            raise OptionError("headers attribute type must be an array of struct<key:string,value:binary>")


def _column(batch: pa.RecordBatch, name: str) -> Optional[List[Any]]:
    names = [n.lower() for n in batch.schema.names]
    return batch.column(names.index(name)).to_pylist() if name in names else None


class _TaskProducer:
    """One task's producer: send, flush, and raise on the first delivery failure."""

    def __init__(self, opts: WriteOptions) -> None:
        self.opts = opts
        self.failures: list[str] = []
        conf = {**client_configs.producer(opts), "error_cb": self._on_error, "on_delivery": self._on_delivery}
        self.producer = Producer(with_logger(conf))
        self.sent = 0

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self.failures.append(f"fatal producer error: {err}")

    def _on_delivery(self, err: Optional[KafkaError], msg: Any) -> None:
        if err is not None:
            self.failures.append(f"{msg.topic()}-{msg.partition()}: {err}")

    def send_batch(self, batch: pa.RecordBatch) -> None:
        n = batch.num_rows
        values = _column(batch, "value")
        keys = _column(batch, "key") or [None] * n
        topics = [self.opts.topic] * n if self.opts.topic else _column(batch, "topic")
        assert values is not None and topics is not None   # check_input_schema ran on the driver
        if None in topics:
            raise ValueError("null topic present in the data. Use the topic option for setting a topic.")
        parts = _column(batch, "partition") or [-1] * n      # -1: let the partitioner choose
        headers = _column(batch, "headers")
        produce, poll = self.producer.produce, self.producer.poll
        if headers is None:
            rows: Iterator[tuple] = zip(topics, values, keys, parts)
        else:
            rows = ((t, v, k, p, [(h["key"], h["value"]) for h in hs] if hs else None)
                    for t, v, k, p, hs in zip(topics, values, keys, parts, headers))
        for row in rows:
            t, v, k, p = row[0], row[1], row[2], row[3]
            p = -1 if p is None else p
            while True:
                try:
                    if len(row) == 4:
                        produce(t, v, k, partition=p)
                    else:
                        produce(t, v, k, partition=p, headers=row[4])
                    break
                except BufferError:
                    poll(0.05)
        poll(0)
        if self.failures:
            self._raise()
        self.sent += n

    def finish(self) -> WriteResult:
        remaining = self.producer.flush(FLUSH_TIMEOUT_S)
        if remaining:
            self.failures.append(f"{remaining} record(s) still undelivered after {FLUSH_TIMEOUT_S:.0f} s")
        if self.failures:
            self._raise()
        return WriteResult(self.sent)

    def _raise(self) -> None:
        more = f" (and {len(self.failures) - 1} more)" if len(self.failures) > 1 else ""
        raise KafkaException(f"pylog sink: delivery to {self.opts.bootstrap_servers} failed: "
                             f"{self.failures[0]}{more}")


def write_all(opts: WriteOptions, batches: Iterator[pa.RecordBatch]) -> WriteResult:
    if native_producer(opts):
        native = NativeTaskProducer(opts.topic, client_configs.native_producer(opts))
        try:
            for batch in batches:
                native.send_batch(batch)
            return WriteResult(native.sent)
        finally:
            native.close()
    task = _TaskProducer(opts)
    for batch in batches:
        task.send_batch(batch)
    return task.finish()


def check_destination(opts: WriteOptions) -> None:
    """On the driver, before any task: a broker answers, and the `topic` option's topic exists (a broker that
    allows it creates it now, as Kafka's producer asks); otherwise one error naming the address or topic."""
    check_reachable(opts.bootstrap_servers)
    if not (native_producer(opts) and opts.topic):
        return
    client = ProduceClient(client_configs.native_producer(opts))
    try:
        client.partitions(opts.topic)
    finally:
        client.close()


@in_one_line
class PylogBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise OptionError("Save mode Overwrite not allowed for pylog (Kafka). Allowed save modes are Append "
                              "(use .mode(\"append\")); records are always appended to the topic.")
        check_input_schema(schema, opts.topic)
        if native_producer(opts):
            client_configs.native_producer(opts)     # bad kafka.* values fail on the driver
        check_destination(opts)
        self.opts = opts
        self.write_id = uuid.uuid4().hex             # exactly-once: this job's transactional ids

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.opts.exactly_once:
            task = TaskContext.get()
            partition = task.partitionId() if task is not None else 0
            return exactly_once_sink.write_task(
                self.opts, iterator, f"{self.opts.transactional_id_prefix}{self.write_id}-{partition}", None)
        return write_all(self.opts, iterator)

    def commit(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        if self.opts.exactly_once:
            exactly_once_sink.commit(self.opts, messages, "the write")
            return
        total = sum(m.records for m in messages if isinstance(m, WriteResult))
        log.info("pylog sink: wrote %d record(s) in %d task(s)", total, len(messages))

    def abort(self, messages: List[Optional[WriterCommitMessage]]) -> None:
        if self.opts.exactly_once:
            exactly_once_sink.abort(self.opts, messages, "the write")


@in_one_line
class PylogStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        check_input_schema(schema, opts.topic)
        if native_producer(opts):
            client_configs.native_producer(opts)
        check_destination(opts)
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.opts.exactly_once:
            query_id, batch_id, partition = exactly_once_sink.stream_task_ids()
            return exactly_once_sink.write_task(
                self.opts, iterator, f"{self.opts.transactional_id_prefix}{query_id}-{partition}", batch_id)
        return write_all(self.opts, iterator)

    def commit(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
        if self.opts.exactly_once:
            exactly_once_sink.commit(self.opts, messages, f"batch {batchId}", batchId)
            return
        total = sum(m.records for m in messages if isinstance(m, WriteResult))
        log.info("pylog sink: batch %d wrote %d record(s)", batchId, total)

    def abort(self, messages: List[Optional[WriterCommitMessage]], batchId: int) -> None:
        if self.opts.exactly_once:
            exactly_once_sink.abort(self.opts, messages, f"batch {batchId}")
