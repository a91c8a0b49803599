"""Executor side, native path: read one offset range [start, end) with the source's own Fetch client.

Each Fetch answer's record set (a view of the received frame) goes to the Rust decoder in one call
and comes back as one `pyarrow.RecordBatch`: no Python object per record. Owns the stop rule (next
offset >= end; or nothing left below the high watermark, or the last stable offset under
read_committed), Kafka's error handling as the JVM connector's consumer does it, and failOnDataLoss:
- OFFSET_OUT_OF_RANGE: the log's bounds are listed; records aged out below the log start are
  reported as data loss and skipped; anything else is retried;
- UNKNOWN_TOPIC_OR_PARTITION: metadata is refreshed; a partition that is still gone is data loss;
- NOT_LEADER_OR_FOLLOWER and the other retriable errors, and lost connections: the leader is
  looked up again and the Fetch retried with backoff until kafkaConsumer.pollTimeoutMs passes;
- a high watermark below the range's end: a partition's new leader starts from its own high
  watermark, which may lag the one the driver planned with until the followers fetch from it, so
  the read is retried for HIGH_WATERMARK_SETTLE_MS before the end is reported as beyond the log;
- a corrupt batch: the batches before it are read, then data loss naming topic, partition and
  offset; with failOnDataLoss false the reader goes on at the next batch when the same answer
  holds it, else skips the rest of the range (and says which offsets); any other error code fails
  the task with the code's name.
`prefetch` asks for the first records of a small task's ranges in one Fetch per leader (one round
trip instead of one per range); a range reader starts from its answer when it holds records, and
fetches on its own otherwise, so every error goes through the one path above.
Never talks to the driver and never decides ranges.
"""
from __future__ import annotations

import logging
import time
from typing import Iterator, Optional, Sequence

import pyarrow as pa
from kio.schema.errors import ErrorCode

from kafka_protocol.fetch_response import FetchedPartition
from sparklog.client_pool import ClientPool
from sparklog.direct_reads import direct_reads
from sparklog.errors import (
    RangeReadError,
    corrupt_records,
    end_beyond_log,
    partition_gone,
    records_aged_out,
    report_data_loss,
)
from sparklog.kafka_client import (
    EARLIEST,
    LATEST,
    BrokerUnavailableError,
    ClientConfig,
    KafkaClient,
    KafkaClientError,
    PartitionError,
)
from sparklog.native_decoder import MAX_BATCH_BYTES, CorruptBatchError, DecodedRange, decode_range
from sparklog.planner import OffsetRange
from sparklog.read_committed import AbortedTransactions, drop_aborted
from sparklog.reader_settings import ReaderSettings
from sparklog.schema import (
    ARROW_BATCH_ROWS,
    DECODE_ROWS,
    HIGH_WATERMARK_SETTLE_MS,
    PREFETCH_TASK_RECORDS,
    TRANSIENT_RETRIES,
    arrow_schema,
)

log = logging.getLogger(__name__)

_POOL: ClientPool[KafkaClient] = ClientPool(close=KafkaClient.close)
_RETRIABLE = frozenset(e.value for e in (
    ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available, ErrorCode.fenced_leader_epoch,
    ErrorCode.unknown_leader_epoch, ErrorCode.kafka_storage_error, ErrorCode.replica_not_available,
    ErrorCode.request_timed_out, ErrorCode.network_exception, ErrorCode.broker_not_available,
    ErrorCode.offset_not_available, ErrorCode.not_controller,
))
_GONE = frozenset({ErrorCode.unknown_topic_or_partition.value, ErrorCode.unknown_topic_id.value})
_OUT_OF_RANGE = ErrorCode.offset_out_of_range.value
_BACKOFF_S = (0.05, 0.1, 0.2, 0.5, 1.0)


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error code {code}"


def prefetch(ranges: Sequence[OffsetRange], settings: ReaderSettings) -> dict[OffsetRange, FetchedPartition]:
    """The first Fetch answer of each range of a small task (at most PREFETCH_TASK_RECORDS records),
    asked for in one request per leader and bounded by max.partition.fetch.bytes in all. Only answers
    holding records are kept; a failure here is left to the range readers, which fetch again. None with direct
    reads (`remoteStorage`): a range's start may lie in the bucket, where the range reader reads it itself."""
    config = settings.client
    todo = [r for r in ranges if r.end > r.start]
    if config is None or settings.remote_storage or len(todo) < 2 or sum(r.size for r in todo) > PREFETCH_TASK_RECORDS:
        return {}
    if len({r.tp for r in todo}) < len(todo):   # one partition twice in a request is not Kafka's
        return {}
    client = _POOL.acquire(config, lambda: KafkaClient(config))
    healthy = False
    try:
        answers = client.fetch_many([(r.topic, r.partition, r.start) for r in todo], config.partition_max_bytes)
        healthy = True
    except KafkaClientError as e:
        log.debug("pylog: prefetching %d ranges failed, each is fetched on its own: %s", len(todo), e)
        return {}
    finally:
        _POOL.release(config, client, healthy)
    out = {}
    for r in todo:
        fp = answers.get(r.tp)
        if fp is not None and fp.error_code == 0 and fp.records is not None and len(fp.records) > 0:
            out[r] = fp
    return out


class FetchRangeReader:
    """Iterate `pyarrow.RecordBatch`es (one per Fetch answer) of one `OffsetRange`; `first`, when
    given, is the answer of a Fetch at the range's start made for it (see `prefetch`)."""

    def __init__(self, rng: OffsetRange, settings: ReaderSettings, first: Optional[FetchedPartition] = None) -> None:
        assert settings.client is not None
        self._first = first
        self.rng = rng
        self.s = settings
        self.config: ClientConfig = settings.client
        self.next_offset = rng.start
        self.end = rng.end
        self._schema = arrow_schema(settings.include_headers)
        self._max_bytes = self.config.partition_max_bytes
        self._failures = 0
        self._out_of_range = 0
        self._deadline = 0.0
        self._below_end_since: float | None = None   # when the high watermark was first seen below the end
        self._direct = (direct_reads(settings.remote_storage, settings.remote_storage_env) if settings.remote_storage
                        else None)

    def _where(self) -> str:
        return (f"topic-partition {self.rng.topic}-{self.rng.partition}, offsets [{self.rng.start}, {self.rng.end}), "
                f"at offset {self.next_offset}")

    def _report(self, message: str) -> None:
        report_data_loss(message, self.s.fail_on_data_loss, log)

    def _progress(self) -> None:
        self._failures = 0
        self._out_of_range = 0
        self._below_end_since = None
        self._deadline = time.monotonic() + self.s.poll_timeout_ms / 1000

    def _retry(self, reason: str) -> None:
        """Back off before the next attempt; fail once kafkaConsumer.pollTimeoutMs passed without progress."""
        if time.monotonic() > self._deadline:
            raise RangeReadError(f"pylog: no progress reading {self._where()} for {self.s.poll_timeout_ms} ms "
                                 f"(kafkaConsumer.pollTimeoutMs); last error: {reason}")
        delay = _BACKOFF_S[min(self._failures, len(_BACKOFF_S) - 1)]
        self._failures += 1
        if self._failures in (1, 10) or self._failures % 50 == 0:
            log.warning("pylog: retrying %s (attempt %d): %s", self._where(), self._failures, reason)
        time.sleep(delay)

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        client = _POOL.acquire(self.config, lambda: KafkaClient(self.config))
        healthy = False
        try:
            yield from self._read(client)
            healthy = True
        finally:
            _POOL.release(self.config, client, healthy)

    def _read(self, client: KafkaClient) -> Iterator[pa.RecordBatch]:
        topic, partition = self.rng.topic, self.rng.partition
        self._progress()
        while self.next_offset < self.end:
            try:
                if self._first is not None:
                    fetched, self._first = self._first, None
                elif (direct := self._direct_chunk(client)) is not None:
                    fetched = direct
                else:
                    fetched = client.fetch(topic, partition, self.next_offset, self._max_bytes)
                code = fetched.error_code
            except PartitionError as e:          # no leader known, or the topic is unknown
                code = e.code
            except BrokerUnavailableError as e:
                self._retry(str(e))
                continue
            except KafkaClientError as e:
                raise RangeReadError(f"pylog: reading {self._where()} failed: {e}") from None
            if code != 0:
                self._on_error(client, code)
                continue
            records = fetched.records
            if records is not None and len(records) > 0:
                yield from self._decode(fetched, records)
                continue
            if fetched.preferred_read_replica >= 0:   # a prefetch answer naming a replica in our rack: fetch there
                continue
            limit = (fetched.last_stable_offset if self.config.read_committed and fetched.last_stable_offset >= 0
                     else fetched.high_watermark)
            if self.next_offset >= limit:        # nothing left to read below the end of the log
                if limit < self.end:
                    if not self._settled(limit):
                        continue
                    self._report(end_beyond_log(topic, partition, self.end, limit))
                self.end = self.next_offset
                break
            self._retry(f"no records returned below the high watermark {limit}")

    def _direct_chunk(self, client: KafkaClient) -> FetchedPartition | None:
        """The next batches from the bucket when they lie in a remote segment (sparklog.direct_reads); None: the
        broker answers. A store that fails turns direct reads off for the rest of this range."""
        if self._direct is None:
            return None
        topic, partition = self.rng.topic, self.rng.partition
        try:
            topic_id = client.topic_id(topic)
            chunk = self._direct.read(topic, partition, topic_id, self.next_offset, self.config.read_committed) \
                if topic_id is not None else None
        except Exception as e:  # noqa: BLE001 - the broker can always answer instead
            log.warning("pylog: reading %s from %s failed, reading through the broker instead: %s", self._where(),
                        self._direct.url, e)
            self._direct = None
            return None
        if chunk is None:
            return None
        return FetchedPartition(topic, partition, 0, -1, -1, -1, chunk.aborted_transactions, chunk.records)

    def _settled(self, limit: int) -> bool:
        """Has the log's end stayed at `limit`, below the range's end, long enough to be reported? Else back
        off for another Fetch: after a leader change the new leader's high watermark catches up with the
        one the driver planned with (Kafka answers ListOffsets with OFFSET_NOT_AVAILABLE meanwhile, KIP-207;
        Spark's tasks poll through it)."""
        now = time.monotonic()
        if self._below_end_since is None:
            self._below_end_since = now
        if now - self._below_end_since >= min(HIGH_WATERMARK_SETTLE_MS, self.s.poll_timeout_ms) / 1000:
            return True
        self._retry(f"the high watermark {limit} is below the range's end {self.end}")
        return False

    def _decode(self, fetched: FetchedPartition, records: memoryview) -> Iterator[pa.RecordBatch]:
        """The rows of one Fetch answer, decoded DECODE_ROWS at a time (bounded memory whatever the
        compression ratio); a corrupt batch is reported, a batch larger than was asked for re-fetched."""
        topic, partition = self.rng.topic, self.rng.partition
        aborted = AbortedTransactions(fetched.aborted_transactions) if self.config.read_committed else None
        pos = 0
        while pos < len(records) and self.next_offset < self.end:
            try:
                decoded = decode_range(records[pos:], topic, partition, self.next_offset, self.end, self._schema,
                                       self.s.include_headers, max_rows=DECODE_ROWS)
            except CorruptBatchError as e:
                if e.good is not None and e.good.next_offset > self.next_offset:
                    yield from self._rows(e.good, aborted)
                resume = e.resume_at if e.resume_at is not None and e.resume_at > self.next_offset else self.end
                self._report(corrupt_records(topic, partition, self.next_offset, min(resume, self.end), str(e)))
                self.next_offset = resume
                return
            if decoded.next_offset < 0:
                if pos == 0:                     # one batch is larger than what was asked for
                    if self._max_bytes >= MAX_BATCH_BYTES:
                        raise RangeReadError(f"pylog: reading {self._where()} failed: a record batch is larger "
                                             f"than {MAX_BATCH_BYTES} bytes")
                    self._max_bytes = min(self._max_bytes * 4, MAX_BATCH_BYTES)
                return                           # else: a partial batch ends the answer; fetch from here
            yield from self._rows(decoded, aborted)
            pos += decoded.consumed

    def _rows(self, decoded: DecodedRange, aborted: AbortedTransactions | None) -> Iterator[pa.RecordBatch]:
        """The rows of complete batches, read_committed applied, in Arrow batches of bounded size."""
        rows = decoded.batch
        if aborted is not None:
            rows = drop_aborted(rows, aborted.dropped(decoded.batches))
        self.next_offset = max(self.next_offset, decoded.next_offset)
        self._progress()
        for first in range(0, rows.num_rows, ARROW_BATCH_ROWS):   # bounded Arrow batches for the JVM
            yield rows.slice(first, ARROW_BATCH_ROWS)

    def _on_error(self, client: KafkaClient, code: int) -> None:
        topic, partition = self.rng.topic, self.rng.partition
        if code == _OUT_OF_RANGE:
            self._out_of_range += 1
            if self._out_of_range > TRANSIENT_RETRIES:
                raise RangeReadError(f"pylog: reading {self._where()} failed: offset out of range "
                                     f"{self._out_of_range} times in a row")
            try:
                low = client.list_offset(topic, partition, EARLIEST)
                high = client.list_offset(topic, partition, LATEST)
            except KafkaClientError as e:
                self._retry(f"offset out of range, then listing offsets failed: {e}")
                return
            if self.next_offset < low:
                self._report(records_aged_out(topic, partition, self.next_offset, low, self.end))
                self.next_offset = min(low, self.end)
            elif self.next_offset > high:
                self._report(end_beyond_log(topic, partition, self.end, high))
                self.next_offset = self.end
        elif code in _GONE:
            client.forget_leader(topic, partition)
            try:
                errors = client.refresh_metadata(topic)
            except KafkaClientError as e:
                self._retry(str(e))
                return
            topic_error = errors.get(-1)
            if topic_error in _GONE or (topic_error is None and partition not in errors):
                self._report(partition_gone(topic, partition, self.next_offset, self.end))
                self.next_offset = self.end
            else:
                self._retry(error_name(code))
        elif code in _RETRIABLE:
            client.forget_leader(topic, partition)
            self._retry(error_name(code))
        else:
            raise RangeReadError(f"pylog: reading {self._where()} failed: the broker answered {error_name(code)}")
