"""Executor side, librdkafka path: read one offset range [start, end) of one partition into Arrow batches.

Used where the native fetcher (`fetch_reader`) cannot go: TLS and SASL connections, or
`fetcher=librdkafka`. Owns the per-task confluent-kafka Consumer (assign + seek, no group membership, no commits, fetch
settings tuned for bulk reads), the stop rule (next offset >= end, or the partition's end reached
with only gaps left: compaction, transaction markers), data-loss checks against the partition's
watermarks, and bounded retries of transient errors. Never talks to the driver (everything it needs
travels in the pickled `RangeReader`) and never decides ranges.
"""
from __future__ import annotations

import gc
import logging
import time
from bisect import bisect_left
from typing import Iterator, Optional

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition as KTP

from sparklog.client_pool import ClientPool
from sparklog.errors import (
    RangeReadError,
    end_beyond_log,
    partition_gone,
    records_aged_out,
    report_data_loss,
)
from sparklog.kafka_log import with_logger
from sparklog.planner import OffsetRange
from sparklog.reader_settings import ReaderSettings
from sparklog.records import to_record_batch
from sparklog.schema import (
    ARROW_BATCH_ROWS,
    CONSUME_BATCH,
    RETRY_BACKOFF_S,
    TRANSIENT_RETRIES,
    arrow_schema,
)

log = logging.getLogger(__name__)

_CONSUME_WAIT_S = 0.2
_TRANSIENT = frozenset({
    KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.NETWORK_EXCEPTION,
    KafkaError._RESOLVE, KafkaError.BROKER_NOT_AVAILABLE, KafkaError.REPLICA_NOT_AVAILABLE,
    KafkaError.KAFKA_STORAGE_ERROR, KafkaError.FENCED_LEADER_EPOCH, KafkaError.UNKNOWN_LEADER_EPOCH,
})
_OUT_OF_RANGE = frozenset({KafkaError.OFFSET_OUT_OF_RANGE, KafkaError._AUTO_OFFSET_RESET})
_POOL: ClientPool[Consumer] = ClientPool(close=Consumer.close, reset=Consumer.unassign)


def _conf_key(conf: dict[str, object]) -> tuple:
    return tuple(sorted((k, str(v)) for k, v in conf.items()))


class _Reopen(Exception):
    """Internal: drop the consumer and start again at the current offset."""


class RangeReader:
    """Iterate `pyarrow.RecordBatch`es of at most ARROW_BATCH_ROWS rows for one `OffsetRange`."""

    def __init__(self, rng: OffsetRange, settings: ReaderSettings) -> None:
        self.rng = rng
        self.s = settings
        self.next_offset = rng.start
        self.end = rng.end
        self._consumer: Optional[Consumer] = None
        self._schema = arrow_schema(settings.include_headers)
        self._failures = 0

    def _where(self) -> str:
        return (f"topic-partition {self.rng.topic}-{self.rng.partition}, offsets [{self.rng.start}, {self.rng.end}), "
                f"at offset {self.next_offset}")

    # --- consumer lifecycle -------------------------------------------------------------------------

    def _close(self, healthy: bool = False) -> None:
        if self._consumer is not None:
            c, self._consumer = self._consumer, None
            _POOL.release(_conf_key(self.s.consumer_conf), c, healthy)

    def _open(self) -> None:
        """New consumer; check the range against the partition's watermarks; assign at next_offset."""
        tp = KTP(self.rng.topic, self.rng.partition)
        try:
            conf = self.s.consumer_conf
            self._consumer = _POOL.acquire(_conf_key(conf), lambda: Consumer(with_logger(conf)))
            low, high = self._consumer.get_watermark_offsets(tp, timeout=max(10.0, self.s.poll_timeout_ms / 4000),
                                                             cached=False)
        except KafkaException as e:
            self._transient(e.args[0] if e.args else None, str(e))
            raise _Reopen() from e
        if self.next_offset < low:
            report_data_loss(records_aged_out(self.rng.topic, self.rng.partition, self.next_offset, low, self.end),
                             self.s.fail_on_data_loss, log)
            self.next_offset = min(low, self.end)
        if high < self.end:
            report_data_loss(end_beyond_log(self.rng.topic, self.rng.partition, self.end, high),
                             self.s.fail_on_data_loss, log)
            self.end = max(high, self.next_offset)
        if self.next_offset < self.end:
            self._consumer.assign([KTP(self.rng.topic, self.rng.partition, self.next_offset)])

    def _transient(self, err: Optional[KafkaError], text: str) -> None:
        """Count a transient failure; raise once the bound is exceeded or the error is not transient."""
        if err is not None and (err.fatal() or (err.code() not in _TRANSIENT and not err.retriable())):
            raise RangeReadError(f"pylog: reading {self._where()} failed: {text}")
        self._failures += 1
        if self._failures > TRANSIENT_RETRIES:
            raise RangeReadError(f"pylog: reading {self._where()} failed after {TRANSIENT_RETRIES} retries: {text}")
        log.warning("pylog: transient error reading %s (retry %d/%d): %s", self._where(), self._failures,
                    TRANSIENT_RETRIES, text)
        self._close()
        time.sleep(RETRY_BACKOFF_S * self._failures)

    # --- reading ---------------------------------------------------------------------------------

    def _on_errors(self, errors: list[KafkaError], messages: list[Message]) -> tuple[Optional[int], bool]:
        """Handle error events; returns (end-of-partition offset if seen, whether to reopen)."""
        eof: Optional[int] = None
        for m in messages:
            err = m.error()
            if err is None:
                continue
            code = err.code()
            if code == KafkaError._PARTITION_EOF:
                eof = m.offset()
            elif code in _OUT_OF_RANGE:
                report_data_loss(f"Cannot fetch offset {self.next_offset} (TopicPartition: {self.rng.topic}-"
                                 f"{self.rng.partition}): offset out of range", self.s.fail_on_data_loss, log)
                self._failures += 1
                if self._failures > TRANSIENT_RETRIES:
                    raise RangeReadError(f"pylog: reading {self._where()} failed: offset out of range "
                                         f"{self._failures} times in a row")
                return eof, True   # reopen: the watermark check moves next_offset to the log start
            elif code == KafkaError.UNKNOWN_TOPIC_OR_PART:
                report_data_loss(partition_gone(self.rng.topic, self.rng.partition, self.next_offset, self.end),
                                 self.s.fail_on_data_loss, log)
                self.next_offset = self.end
                return eof, False
            else:
                self._transient(err, str(err))
                return eof, True
        return eof, False

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        pending: list[Message] = []
        # Messages, bytes and tuples form no cycles; the cyclic GC only rescans the pending messages
        # over and over (it costs ~40% of a read), so pause it while this range is read.
        gc_was_enabled = gc.isenabled()
        gc.disable()
        completed = False
        try:
            while self.next_offset < self.end:
                if self._consumer is None:
                    try:
                        self._open()
                    except _Reopen:
                        continue
                    deadline = time.monotonic() + self.s.poll_timeout_ms / 1000.0
                    if self.next_offset >= self.end:
                        break
                assert self._consumer is not None
                msgs = self._consumer.consume(min(CONSUME_BATCH, self.end - self.next_offset), _CONSUME_WAIT_S)
                if not msgs:
                    if time.monotonic() > deadline:
                        raise RangeReadError(f"pylog: timed out after {self.s.poll_timeout_ms} ms "
                                             f"(kafkaConsumer.pollTimeoutMs) reading {self._where()}")
                    continue
                errors = list(filter(None, map(Message.error, msgs)))
                eof: Optional[int] = None
                reopen = False
                if errors:
                    eof, reopen = self._on_errors(errors, msgs)
                    msgs = [m for m in msgs if m.error() is None]
                if msgs:
                    if _offset(msgs[0]) < self.next_offset:
                        msgs = msgs[bisect_left(msgs, self.next_offset, key=_offset):]
                    if msgs and _offset(msgs[-1]) >= self.end:
                        msgs = msgs[:bisect_left(msgs, self.end, key=_offset)]
                    if msgs:
                        self.next_offset = _offset(msgs[-1]) + 1
                        pending.extend(msgs)
                        deadline = time.monotonic() + self.s.poll_timeout_ms / 1000.0
                        self._failures = 0
                if eof is not None and self.next_offset < self.end:
                    if eof >= self.end:
                        self.next_offset = self.end   # only gaps (compaction, txn markers) remain
                    else:
                        reopen = True                 # the watermark check decides: data loss or wait
                if reopen:
                    self._close()
                while len(pending) >= ARROW_BATCH_ROWS:
                    yield self._batch(pending[:ARROW_BATCH_ROWS])
                    pending = pending[ARROW_BATCH_ROWS:]
            if pending:
                yield self._batch(pending)
            completed = True
        finally:
            self._close(healthy=completed)
            if gc_was_enabled:
                gc.enable()

    def _batch(self, messages: list[Message]) -> pa.RecordBatch:
        return to_record_batch(messages, self.rng.topic, self.rng.partition, self._schema, self.s.include_headers)


def _offset(m: Message) -> int:
    """A fetched message's offset (librdkafka's typing allows None only for messages without one)."""
    offset = m.offset()
    assert offset is not None
    return offset
