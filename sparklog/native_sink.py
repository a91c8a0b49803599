"""The sink's native path: one Spark task's Arrow batches → record batches → its own Produce client.

Owns the per-task loop: pick the rows of each topic (the `topic` option, or the `topic` column split
with Arrow compute, never row by row), assign partitions (`record_encoder.Partitioner`, one per
topic), encode each partition's rows natively with the producer's sequences, and send
(`produce_client`). Each Arrow batch is acknowledged before the next is read, so a task holds at
most one batch's records. Chosen by `writer` for plain-TCP connections; librdkafka covers TLS/SASL.
"""
from __future__ import annotations

from typing import Iterator, Optional

import pyarrow as pa
import pyarrow.compute as pc

from sparklog.produce_client import ProduceClient, ProduceError, ProducerConfig
from sparklog.transactional_producer import Transaction
from sparklog.record_encoder import BatchSettings, Columns, EncodeError, Partitioner, encode


def _column(batch: pa.RecordBatch, name: str) -> Optional[pa.Array]:
    names = [n.lower() for n in batch.schema.names]
    return batch.column(names.index(name)) if name in names else None


def _by_topic(batch: pa.RecordBatch, topic_option: Optional[str]) -> Iterator[tuple[str, pa.RecordBatch]]:
    if topic_option:
        yield topic_option, batch
        return
    topics = _column(batch, "topic")
    assert topics is not None                 # check_input_schema ran on the driver
    if topics.null_count:
        raise ValueError("null topic present in the data. Use the topic option for setting a topic.")
    names = pc.unique(topics).to_pylist()
    if len(names) == 1:
        yield names[0], batch
        return
    for name in names:
        yield name, batch.filter(pc.equal(topics, name))


def _columns(batch: pa.RecordBatch) -> Columns:
    value = _column(batch, "value")
    assert value is not None
    return Columns.from_arrays(value, _column(batch, "key"), _column(batch, "headers"),
                               partition=_column(batch, "partition"))


class NativeTaskProducer:
    """One task's producer over the native encoder; `send_batch` returns once the batch is acknowledged."""

    def __init__(self, topic_option: Optional[str], config: ProducerConfig,
                 transactional_id: Optional[str] = None, transaction_timeout_ms: int = 0) -> None:
        self.topic_option = topic_option
        self.config = config
        self.settings = BatchSettings(codec=config.codec, max_batch_bytes=config.max_batch_bytes)
        self.client = ProduceClient(config)
        self.transaction: Optional[Transaction] = None
        if transactional_id is None:
            self.client.init_producer()
        else:
            self.transaction = Transaction(self.client, transactional_id, transaction_timeout_ms)
            self.transaction.init()
        self.partitioners: dict[str, Partitioner] = {}
        self.sent = 0

    def _partitioner(self, topic: str) -> Partitioner:
        p = self.partitioners.get(topic)
        if p is None:
            p = self.partitioners[topic] = Partitioner(self.client.partitions(topic), self.settings.max_batch_bytes)
        return p

    def send_batch(self, batch: pa.RecordBatch) -> None:
        c = self.client
        for topic, rows in _by_topic(batch, self.topic_option):
            cols = _columns(rows)
            try:
                groups = self._partitioner(topic).assign(cols)
                txn = self.transaction
                if txn is not None:
                    txn.add_partitions((topic, partition) for partition, _, _ in groups)
                for partition, selected, count in groups:
                    base = c.take_sequence(topic, partition, count)
                    for data, n in encode(cols, selected, self.settings, c.producer_id, c.producer_epoch, base,
                                          transactional=txn is not None):
                        c.enqueue(topic, partition, data, n)
            except EncodeError as e:
                raise ProduceError(topic, -1, str(e)) from None
        c.flush()
        self.sent += batch.num_rows

    def close(self) -> None:
        self.client.close()
