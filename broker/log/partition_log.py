"""PartitionLog: the log of one topic partition, a directory `<topic>-<partition>` of segments.

Owns: appending produce batches (validate, producer checks, assign offsets, roll, write, index,
flush policy), reads for Fetch as (fd, position, length) slices of whole batches, offset lookups by
timestamp, log start offset (DeleteRecords, persisted in `log-start-offset.checkpoint`), retention,
loading and recovery at startup, producer state snapshots. For replication (Kafka's UnifiedLog):
the leader epoch of each batch and the `leader-epoch-checkpoint` (`leader_epochs`), appends of
batches copied from a leader (`append_as_follower`), the high watermark (`high-watermark.checkpoint`),
truncation to an offset or to an empty log at any offset. For transactions (KIP-98): appending a
coordinator's marker (`append_marker`), the last stable offset, and the aborted transactions of each
segment (`.txnindex`, rebuilt with the producer state on load) that read_committed fetches return.
For tiered storage (KIP-405, broker.tiered): a tiered partition's log start offset may lie below its first
local segment (`local_log_start_offset`), the offsets between are in remote storage (a read of them raises
OffsetMovedToTieredStorageError, and the fetch path asks the remote log manager), and local retention
(local.retention.ms/bytes) deletes only segments whose offsets are all below `remote_next_offset`, the end
of what the remote log manager has uploaded.

Invariants: offsets are increasing (dense except where compaction removed records); `log_end_offset`
is the next offset to assign; `log_start_offset <= high_watermark <= log_end_offset`, and without
replication (`replicated` False, one broker) `high_watermark` is `log_end_offset`; with it, the high
watermark only moves forward through `update_high_watermark` or down by truncation; the leader epoch
cache has no entry starting at or past `log_end_offset`; the last segment is the active one and is
never deleted by retention, nor is data above the high watermark; bytes are in the file (page cache)
before an append returns. Per-batch work only, never per record, except the off-hot-path timestamp
lookups.

Never knows about the network protocol, asyncio, other partitions, or which replica leads: the
broker passes leader epochs, the high watermark and truncation points in.
"""
from __future__ import annotations

import logging
import os
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from broker.config import LONG_MAX, TopicConfig
from kafka_protocol.errors import (OffsetMovedToTieredStorageError, OffsetOutOfRangeError, RecordListTooLargeError,
                                   UnexpectedAppendOffsetError)
from broker.log.constants import (
    DELETED_SUFFIX,
    HIGH_WATERMARK_FILE,
    INDEX_SUFFIX,
    LEADER_EPOCH,
    LEADER_EPOCH_FILE,
    LOG_START_OFFSET_FILE,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TMP_SUFFIX,
    TXN_INDEX_SUFFIX,
    offset_file_name,
)
from kafka_protocol.control_records import Marker, encode_marker, read_marker
from kafka_protocol.record_batch import INT32_MAX
from broker.log.fileutil import atomic_write, remove_quietly
from broker.log.leader_epoch_cache import LeaderEpochCache
from broker.log.log_segments import LogSegments
from broker.log.producer_state import CompletedTxn, ProducerStateManager
from broker.log.transaction_index import AbortedTxn
from kafka_protocol.record_batch import (
    BatchHeader,
    assign_offsets,
    check_headers,
    validate_batches,
    whole_batches_length,
)
from broker.log.recompress import recompress, target_codec
from broker.log.segment import LogSegment
from broker.log.fetch_slice import FetchSlice

__all__ = ["AppendResult", "FetchSlice", "PartitionLog"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int     # -1 for CreateTime topics
    log_start_offset: int
    record_count: int


class PartitionLog:
    """The segments of one partition and the operations the broker performs on them."""

    def __init__(self, directory: Path, topic: str, partition: int, config: TopicConfig, *,
                 recover: bool, producer_id_expiration_ms: int = 86400000,
                 clock: Callable[[], float] = time.time, replicated: bool = False) -> None:
        self.directory = Path(directory)
        self.topic = topic
        self.partition = partition
        self.on_flush: Callable[[float], None] | None = None     # told each flush's seconds (the log manager's)
        self.config = config
        self.clock = clock
        self.segments = LogSegments()
        self._pending_deletes: list[tuple[int, LogSegment]] = []
        self.producers = ProducerStateManager(self.directory, producer_id_expiration_ms)
        self.log_start_offset = 0
        self.log_end_offset = 0
        # tiered storage: set by the remote log manager once it manages this partition (None: not tiered)
        self.remote_next_offset: int | None = None
        self.leader_epochs: LeaderEpochCache
        self._replicated = replicated
        self._high_watermark = 0               # meaningful only when replicated
        self._high_watermark_written: int | None = None
        self._unflushed_messages = 0
        self._last_flush_ms = self._now_ms()
        self._closed = False
        self.directory.mkdir(parents=True, exist_ok=True)
        self._load(recover)

    def __repr__(self) -> str:
        return (f"PartitionLog({self.name}, start={self.log_start_offset}, hw={self.high_watermark}, "
                f"end={self.log_end_offset})")

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def active_segment(self) -> LogSegment:
        return self.segments.active

    @property
    def local_log_start_offset(self) -> int:
        """The first offset on the local disk (below it, down to the log start offset: remote storage)."""
        return max(self.log_start_offset, self.segments[0].base_offset)

    @property
    def tiered(self) -> bool:
        return self.remote_next_offset is not None

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    # --- loading ----------------------------------------------------------------------------------

    def _load(self, recover: bool) -> None:
        started = time.monotonic()
        bases = self._scan_directory()
        checkpoint = self._read_log_start_checkpoint()
        if not bases:
            bases = [checkpoint]
        for base in bases:
            self._add_segment(self._open_segment(base, jitter=False))
        # Sealed segments: a stat per index file now; their contents are sanity-checked (and
        # rebuilt if corrupt) when first loaded, so startup never reads old indexes.
        for seg in self.segments[:-1]:
            if seg.indexes_missing():
                log.warning("%s: index files of %s are missing or partial; rebuilding", self.name, seg.log_path)
                seg.rebuild_indexes()
        active = self.active_segment
        if recover:
            active.recover()
        else:
            active.load_tail()
        active.restore_roll_clock(self._now_ms())
        self.log_end_offset = active.next_offset
        if self.config.remote_storage_enable and checkpoint < self.segments[0].base_offset:
            # a tiered partition: the offsets below the first local segment are in remote storage (the remote
            # log manager checks that against what is there when it takes the partition on)
            self.log_start_offset = min(checkpoint, self.log_end_offset)
        else:
            self.log_start_offset = min(max(checkpoint, self.segments[0].base_offset), self.log_end_offset)
        self._load_leader_epochs()
        if self._replicated:
            self._load_high_watermark()
        self._load_producer_state()
        log.debug("%s: loaded %d segments (recover=%s) in %.3fs, offsets %d..%d", self.name,
                  len(self.segments), recover, time.monotonic() - started,
                  self.log_start_offset, self.log_end_offset)

    def _scan_directory(self) -> list[int]:
        """Base offsets of the `.log` files; removes leftover `*.deleted`/`*.tmp` and orphan indexes."""
        bases: set[int] = set()
        indexes: list[tuple[int, Path]] = []
        for path in self.directory.iterdir():
            name = path.name
            if name.endswith(DELETED_SUFFIX) or name.endswith(TMP_SUFFIX):
                log.info("%s: removing leftover %s", self.name, name)
                remove_quietly(path)
                continue
            stem, dot, suffix = name.partition(".")
            if not stem.isdigit():
                continue
            if "." + suffix == LOG_SUFFIX:
                bases.add(int(stem))
            elif "." + suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                indexes.append((int(stem), path))
        for base, path in indexes:
            if base not in bases:
                log.info("%s: removing index %s without a log file", self.name, path.name)
                remove_quietly(path)
        return sorted(bases)

    def _open_segment(self, base_offset: int, *, jitter: bool) -> LogSegment:
        cfg = self.config
        jitter_ms = 0
        if jitter and cfg.segment_jitter_ms > 0:
            jitter_ms = random.randrange(min(cfg.segment_jitter_ms, cfg.segment_ms))
        return LogSegment(self.directory, base_offset, index_interval_bytes=cfg.index_interval_bytes,
                          max_index_bytes=cfg.segment_index_bytes, roll_jitter_ms=jitter_ms)

    def _add_segment(self, seg: LogSegment) -> None:
        self.segments.append(seg)

    def _read_log_start_checkpoint(self) -> int:
        try:
            return max(int((self.directory / LOG_START_OFFSET_FILE).read_text().strip() or 0), 0)
        except FileNotFoundError:
            return 0
        except ValueError:
            log.warning("%s: unreadable %s; using the first segment's base offset",
                        self.name, LOG_START_OFFSET_FILE)
            return 0

    def _write_log_start_checkpoint(self) -> None:
        atomic_write(self.directory / LOG_START_OFFSET_FILE, f"{self.log_start_offset}\n".encode())

    def _load_leader_epochs(self) -> None:
        """The epoch cache, cut to the loaded log (recovery may have truncated the tail)."""
        path = self.directory / LEADER_EPOCH_FILE
        try:
            self.leader_epochs = LeaderEpochCache(path)
        except ValueError as e:     # written atomically, so only a damaged disk gets here
            log.error("%s: %s; rebuilding it from the batches' leader epochs", self.name, e)
            remove_quietly(path)
            self.leader_epochs = LeaderEpochCache(path)
            for h in self._headers_from(self.log_start_offset):
                if h.partition_leader_epoch >= 0:
                    self.leader_epochs.assign(h.partition_leader_epoch, max(h.base_offset, self.log_start_offset))
        self.leader_epochs.truncate_from_end(self.log_end_offset)
        self.leader_epochs.truncate_from_start(self.log_start_offset)

    def _load_producer_state(self) -> None:
        """Producer state from the newest snapshot, then every later batch replayed; the aborted
        transactions those batches end are written to the segments' transaction indexes again."""
        snapshot = self.producers.load_snapshot(self.log_end_offset)
        start = snapshot if snapshot is not None else self.segments[0].base_offset
        for seg in self.segments.from_offset(start):
            seg.txn_index.truncate_to(start)
        if start < self.log_end_offset:
            for seg, h in self._batches_from(start):
                marker = read_marker(seg.read_batch(h)) if h.is_control else None
                self._index_if_aborted(seg, self.producers.replay(h, marker))

    def release_idle_indexes(self, idle_s: float, now: float | None = None) -> int:
        """Release the indexes of sealed segments not looked up for `idle_s` seconds; how many."""
        now = time.monotonic() if now is None else now
        active = self.active_segment
        return sum(1 for seg in self.segments if seg is not active and now - seg.last_used > idle_s
                   and seg.release_indexes())

    def _headers_from(self, offset: int) -> Iterator[BatchHeader]:
        """Headers of all batches whose last offset is >= `offset`, in order (no CRC checks)."""
        for _, h in self._batches_from(offset):
            yield h

    def _batches_from(self, offset: int) -> Iterator[tuple[LogSegment, BatchHeader]]:
        for seg in self.segments.from_offset(offset):
            seg.ensure_loaded()
            _, pos = seg.offset_index.lookup(offset)
            for h in seg.iter_headers(pos):
                if h.last_offset >= offset:
                    yield seg, h

    def _index_if_aborted(self, seg: LogSegment, done: CompletedTxn | None) -> None:
        """An aborted transaction goes to the transaction index of the segment holding its marker."""
        if done is None or not done.aborted:
            return
        open_firsts = self.producers.ongoing.values()
        lso = min(min(open_firsts, default=done.last_offset + 1), done.last_offset + 1)
        seg.txn_index.append(AbortedTxn(done.producer_id, done.first_offset, done.last_offset, lso))

    # --- writing ------------------------------------------------------------------------------------

    def update_config(self, config: TopicConfig) -> None:
        """New topic settings; index size applies to segments created from now on."""
        self.config = config
        self.active_segment.index_interval_bytes = config.index_interval_bytes

    def append(self, records: bytes | bytearray | memoryview, now_ms: int | None = None, *,
               leader_epoch: int | None = None, coordinator: bool = False) -> AppendResult:
        """Validate, check producer sequences, assign offsets and write the batches of one request.

        `coordinator`: records the broker writes itself (a transaction's offset commits, Kafka's
        AppendOrigin.COORDINATOR): producer epochs are checked, sequences are not.

        `leader_epoch` (a replicated partition's leader): stamped into every batch and recorded in
        `leader_epochs` as starting at this append's first offset if it is a new epoch. None: the
        one-broker default, epoch 0 stamped and no epoch bookkeeping.
        """
        if now_ms is None:
            now_ms = self._now_ms()
        cfg = self.config
        if len(records) > cfg.segment_bytes:
            raise RecordListTooLargeError(
                f"{len(records)} bytes of records exceed segment.bytes {cfg.segment_bytes} of {self.name}")
        headers = validate_batches(records, cfg.max_message_bytes, compacted="compact" in cfg.cleanup_policy,
                                   create_time=cfg.message_timestamp_type == "CreateTime",
                                   timestamp_range=_timestamp_range(cfg, now_ms))
        codec = target_codec(cfg.compression_type)
        if codec is not None:
            level = {1: cfg.compression_gzip_level, 3: cfg.compression_lz4_level, 4: cfg.compression_zstd_level}.get(codec)
            rewritten = recompress(records, headers, codec, level)
            if rewritten is not None:     # the topic stores another codec than the producer sent (Kafka's rule)
                # same records, so no second walk: new positions and sizes, the validated max timestamps
                recompressed = check_headers(rewritten, cfg.max_message_bytes)
                for new, old in zip(recompressed, headers):
                    new.max_timestamp, new.max_timestamp_wrong = old.max_timestamp, old.max_timestamp_wrong
                records, headers = rewritten, recompressed
        if coordinator:
            for h in headers:
                self.producers.check_epoch(h)
        else:
            self.producers.check_batches(headers)
        buf = bytearray(records)
        log_append_time = now_ms if cfg.message_timestamp_type == "LogAppendTime" else None
        if leader_epoch is None:
            assign_offsets(buf, headers, self.log_end_offset, log_append_time, LEADER_EPOCH)
        else:
            assign_offsets(buf, headers, self.log_end_offset, log_append_time, leader_epoch)
            self.leader_epochs.assign(leader_epoch, self.log_end_offset)
        last_offset = headers[-1].last_offset
        segment = self._maybe_roll(len(buf), last_offset, now_ms)
        segment.append(buf, headers, now_ms)
        for h in headers:
            self.producers.update(h, now_ms)
        self.log_end_offset = last_offset + 1
        count = sum(h.records_count for h in headers)
        self._unflushed_messages += count
        if self._unflushed_messages >= cfg.flush_messages:
            self.flush()
        return AppendResult(headers[0].base_offset, last_offset,
                            -1 if log_append_time is None else log_append_time,
                            self.log_start_offset, count)

    def append_marker(self, marker: Marker, now_ms: int | None = None, *,
                      leader_epoch: int | None = None) -> AppendResult:
        """Append a transaction coordinator's marker (WriteTxnMarkers): the producer's open
        transaction in this partition ends, committed or aborted. Checked against the producer's
        state first (TransactionCoordinatorFencedError, InvalidProducerEpochError)."""
        if now_ms is None:
            now_ms = self._now_ms()
        self.producers.check_marker(marker)
        buf = bytearray(encode_marker(marker, now_ms))
        headers = check_headers(buf, INT32_MAX)
        epoch = LEADER_EPOCH if leader_epoch is None else leader_epoch
        assign_offsets(buf, headers, self.log_end_offset, None, epoch)
        if leader_epoch is not None:
            self.leader_epochs.assign(leader_epoch, self.log_end_offset)
        offset = headers[0].base_offset
        segment = self._maybe_roll(len(buf), offset, now_ms)
        segment.append(buf, headers, now_ms)
        self.log_end_offset = offset + 1
        self._index_if_aborted(segment, self.producers.apply_marker(marker, offset, now_ms, now_ms))
        self._unflushed_messages += 1
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()
        return AppendResult(offset, offset, -1, self.log_start_offset, 1)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendResult:
        """Append batches copied from the leader (a Fetch response): offsets and epochs are kept.

        Checks each batch's header and CRC32C, not its records nor the topic's size limit (the
        leader accepted them, as Kafka's follower). The first batch must not start below the log end
        offset and each batch must start above the previous one, else UnexpectedAppendOffsetError;
        a start above the log end offset is accepted (compaction leaves gaps, as Kafka allows).
        Producer state is applied without sequence checks (Kafka's replication origin); the leader
        epoch cache learns each batch's partitionLeaderEpoch. A trailing partial batch is ignored;
        with no whole batch, nothing is appended (record_count 0, base_offset the log end offset).
        """
        now_ms = self._now_ms()
        view = memoryview(records)
        whole = whole_batches_length(view)
        if whole == 0:
            return AppendResult(self.log_end_offset, self.log_end_offset - 1, -1, self.log_start_offset, 0)
        headers = check_headers(view[:whole], INT32_MAX)
        expected = self.log_end_offset
        for h in headers:
            if h.base_offset < expected or h.last_offset_delta < 0:
                what = "the log end offset" if h is headers[0] else "the previous batch's next offset"
                raise UnexpectedAppendOffsetError(
                    f"follower append to {self.name}: batch at offset {h.base_offset} (last offset "
                    f"{h.last_offset}) does not follow {what} {expected}", h.base_offset, expected)
            expected = h.last_offset + 1
        for h in headers:
            if h.partition_leader_epoch >= 0:
                self.leader_epochs.assign(h.partition_leader_epoch, h.base_offset)
        count = 0
        for chunk in _segment_chunks(headers, self.config.segment_bytes):
            first, last = chunk[0], chunk[-1]
            start, end = first.position, last.position + last.size
            for h in chunk:
                h.position -= start
            self.log_end_offset = first.base_offset     # above the end across a gap: a roll starts there
            segment = self._maybe_roll(end - start, last.last_offset, now_ms)
            segment.append(view[start:end], chunk, now_ms)
            for h in chunk:
                if h.is_control and h.producer_id >= 0:
                    marker = read_marker(view[start + h.position:start + h.position + h.size])
                    self._index_if_aborted(segment, self.producers.apply_marker(marker, h.base_offset, now_ms,
                                                                                h.max_timestamp))
                else:
                    self.producers.update(h, now_ms)
                count += h.records_count
            self.log_end_offset = last.last_offset + 1
        self._unflushed_messages += count
        if self._unflushed_messages >= self.config.flush_messages:
            self.flush()
        return AppendResult(headers[0].base_offset, headers[-1].last_offset, -1, self.log_start_offset, count)

    # --- high watermark ---------------------------------------------------------------------------

    @property
    def replicated(self) -> bool:
        """Whether other replicas decide the high watermark (cluster mode); False: it is the log end."""
        return self._replicated

    @replicated.setter
    def replicated(self, value: bool) -> None:
        if value and not self._replicated:
            self._replicated = True
            self._load_high_watermark()
        elif not value:
            self._replicated = False

    @property
    def high_watermark(self) -> int:
        """The offset below which records are committed (readable by consumers)."""
        return self._high_watermark if self._replicated else self.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        """The offset below which every transaction is decided (read_committed reads below it)."""
        high_watermark = self.high_watermark
        self.producers.mark_replicated(high_watermark)
        first_unstable = self.producers.first_unstable_offset()
        return high_watermark if first_unstable is None else min(first_unstable, high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions with records in [fetch_offset, upper_bound), for a read_committed
        Fetch: searched from the segment holding `fetch_offset` on (an entry sits with its marker)."""
        out: list[AbortedTxn] = []
        for seg in self.segments.from_offset(fetch_offset):
            found, complete = seg.txn_index.collect(fetch_offset, upper_bound)
            out.extend(found)
            if complete or seg.base_offset >= upper_bound:
                break
        return out

    def update_high_watermark(self, offset: int) -> int:
        """Move the high watermark forward to `offset`, clamped to [log start, log end]; returns it.

        A lower value is ignored (only truncation moves it down). No-op without replication."""
        if not self._replicated:
            return self.log_end_offset
        offset = min(max(offset, self.log_start_offset), self.log_end_offset)
        if offset > self._high_watermark:
            self._high_watermark = offset
        return self._high_watermark

    def checkpoint_high_watermark(self) -> None:
        """Write the high watermark to `high-watermark.checkpoint` if it changed since the last write."""
        if not self._replicated or self._high_watermark == self._high_watermark_written:
            return
        atomic_write(self.directory / HIGH_WATERMARK_FILE, f"{self._high_watermark}\n".encode())
        self._high_watermark_written = self._high_watermark

    def _load_high_watermark(self) -> None:
        """The checkpointed high watermark clamped to the log (the log start offset without one, as Kafka)."""
        path = self.directory / HIGH_WATERMARK_FILE
        stored = self.log_start_offset
        try:
            stored = int(path.read_text().strip())
            self._high_watermark_written = stored
        except FileNotFoundError:
            pass
        except ValueError:
            log.warning("%s: unreadable %s; starting from the log start offset", self.name, HIGH_WATERMARK_FILE)
        self._high_watermark = min(max(stored, self.log_start_offset), self.log_end_offset)

    def _maybe_roll(self, incoming: int, last_offset: int, now_ms: int) -> LogSegment:
        seg = self.active_segment
        if seg.size == 0:
            return seg
        cfg = self.config
        reason = None
        if seg.size + incoming > cfg.segment_bytes:
            reason = f"size {seg.size} + {incoming} > segment.bytes {cfg.segment_bytes}"
        elif seg.first_append_ms is not None and now_ms - seg.first_append_ms > cfg.segment_ms - seg.roll_jitter_ms:
            reason = f"age {now_ms - seg.first_append_ms} ms > segment.ms {cfg.segment_ms}"
        elif seg.index_is_full:
            reason = "index is full"
        elif seg.offset_would_overflow(last_offset):
            reason = "relative offset would overflow"
        if reason is None:
            return seg
        return self.roll(reason)

    def roll(self, reason: str = "requested") -> LogSegment:
        """Seal the active segment and start a new one at the log end offset."""
        old = self.active_segment
        if old.size == 0:
            return old
        old.seal()
        new = self._open_segment(self.log_end_offset, jitter=True)
        self._add_segment(new)
        self.producers.take_snapshot(self.log_end_offset)
        log.info("%s: rolled segment %d -> %d (%s)", self.name, old.base_offset, new.base_offset, reason)
        return new

    def flush(self) -> None:
        """fsync every segment written since the last flush (log and index files)."""
        started = time.monotonic()
        for seg in self.segments:
            if seg.dirty:
                seg.flush()
        if self._replicated:
            self.checkpoint_high_watermark()
        self._unflushed_messages = 0
        self._last_flush_ms = self._now_ms()
        if self.on_flush is not None:
            self.on_flush(time.monotonic() - started)

    def maybe_flush(self, now_ms: int) -> None:
        """flush.ms policy: fsync if there are unflushed messages older than flush.ms."""
        if self._unflushed_messages and now_ms - self._last_flush_ms >= self.config.flush_ms:
            self.flush()

    # --- reading -------------------------------------------------------------------------------

    def _check_range(self, offset: int) -> None:
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.name}: "
                f"log start offset {self.log_start_offset}, log end offset {self.log_end_offset}")
        if offset < self.local_log_start_offset:
            raise OffsetMovedToTieredStorageError(
                f"offset {offset} of {self.name} is in remote storage (local log start offset "
                f"{self.local_log_start_offset})")

    def read(self, offset: int, max_bytes: int, min_one_batch: bool = True, *,
             max_offset: int | None = None) -> FetchSlice:
        """Whole batches from the one holding `offset`, within one segment, up to `max_bytes`.

        `max_offset` (a consumer's fetch: the high watermark) keeps only batches whose last offset
        is below it; from `max_offset` up to the log end offset the answer is empty, not an error.
        """
        self._check_range(offset)
        active = self.active_segment
        end = self.log_end_offset
        if max_offset is not None and max_offset < end:
            end = max_offset
        else:
            max_offset = None
        if offset < end:
            segments = self.segments.from_offset(offset)
            for i, seg in enumerate(segments):
                found = seg.read_slice(offset, max_bytes, min_one_batch)
                if found is None:
                    continue
                position, length = found
                if max_offset is not None and (i + 1 == len(segments) or segments[i + 1].base_offset > max_offset):
                    cut = seg.find_batch(max_offset)      # the first batch reaching max_offset
                    if cut is not None and cut.position < position + length:
                        length = max(cut.position - position, 0)
                if length == 0 and max_offset is not None:
                    break
                return FetchSlice(seg.fd, position, length, seg.base_offset)
        return FetchSlice(active.fd, active.size, 0, active.base_offset)

    def fetch_upper_bound(self, region: FetchSlice) -> int:
        """The offset just past a read's batches: the next batch's base offset, else the next
        segment's base offset, else the log end (the bound of a read_committed fetch's aborted
        transactions, as Kafka's)."""
        end = region.position + region.length
        segments = self.segments.from_offset(region.segment_base_offset)
        seg = segments[0]
        if end + 8 <= seg.size:
            return int.from_bytes(os.pread(seg.fd, 8, end), "big", signed=True)
        return segments[1].base_offset if len(segments) > 1 else self.log_end_offset

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record with timestamp >= `timestamp_ms`, or None."""
        for seg in self.segments:
            if seg.largest_timestamp < timestamp_ms:
                continue
            found = seg.find_timestamp(timestamp_ms, self.log_start_offset)
            if found is not None:
                return found
        return None

    def max_timestamp(self) -> tuple[int, int]:
        """(timestamp, offset) of the record with the largest timestamp; (-1, -1) when empty."""
        if self.log_start_offset >= self.log_end_offset:
            return -1, -1
        best: LogSegment | None = None
        for seg in self.segments:
            if seg.largest_timestamp >= 0 and (best is None or seg.largest_timestamp > best.largest_timestamp):
                best = seg
        if best is None:
            return -1, -1
        ts = best.largest_timestamp
        return ts, best.record_with_timestamp(ts, best.offset_of_largest_timestamp)

    def size_in_bytes(self) -> int:
        return self.segments.size_in_bytes()

    # --- deleting data ---------------------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: make `offset` (-1: the high watermark) the log start offset; returns it."""
        high_watermark = self.high_watermark
        if offset == -1:
            offset = high_watermark
        if offset < 0 or offset > high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete records before offset {offset} of {self.name}: "
                f"high watermark is {high_watermark}, log end offset {self.log_end_offset}")
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._write_log_start_checkpoint()
            self.leader_epochs.truncate_from_start(offset)
            now = self._now_ms()
            self._delete_prefix(lambda seg, next_base: next_base <= offset, now, "log start offset")
        return self.log_start_offset

    def apply_retention(self, now_ms: int) -> int:
        """Delete old non-active segments by retention.ms and retention.bytes (a tiered partition: by
        local.retention.ms and local.retention.bytes, and only segments already uploaded); returns how many."""
        cfg = self.config
        if self.tiered:
            return self._apply_local_retention(now_ms)
        if "delete" not in cfg.cleanup_policy:
            return 0
        deleted = 0
        if cfg.retention_ms >= 0:
            def expired(seg: LogSegment, _next: int) -> bool:
                ts = seg.largest_timestamp
                return now_ms - (ts if ts >= 0 else seg.last_modified_ms()) > cfg.retention_ms
            deleted += self._delete_prefix(expired, now_ms, "retention.ms")
        if cfg.retention_bytes >= 0:
            excess = self.size_in_bytes() - cfg.retention_bytes

            def over_size(seg: LogSegment, _next: int) -> bool:
                nonlocal excess
                if excess - seg.size < 0:
                    return False
                excess -= seg.size
                return True
            deleted += self._delete_prefix(over_size, now_ms, "retention.bytes")
        if deleted and self.segments[0].base_offset > self.log_start_offset:
            self.log_start_offset = self.segments[0].base_offset
            self._write_log_start_checkpoint()
            self.leader_epochs.truncate_from_start(self.log_start_offset)
        return deleted

    def _apply_local_retention(self, now_ms: int) -> int:
        """A tiered partition's local retention: uploaded segments past local.retention.ms/bytes (-2: the
        retention.ms/bytes) leave the disk; the log start offset stays, the remote copy serves them."""
        cfg = self.config
        uploaded = self.remote_next_offset or 0
        keep_ms = cfg.retention_ms if cfg.local_retention_ms == -2 else cfg.local_retention_ms
        keep_bytes = cfg.retention_bytes if cfg.local_retention_bytes == -2 else cfg.local_retention_bytes
        deleted = 0
        if keep_ms >= 0:
            def expired(seg: LogSegment, next_base: int) -> bool:
                ts = seg.largest_timestamp
                return next_base <= uploaded and now_ms - (ts if ts >= 0 else seg.last_modified_ms()) > keep_ms
            deleted += self._delete_prefix(expired, now_ms, "local.retention.ms, uploaded")
        if keep_bytes >= 0:
            excess = self.size_in_bytes() - keep_bytes

            def over_size(seg: LogSegment, next_base: int) -> bool:
                nonlocal excess
                if next_base > uploaded or excess - seg.size < 0:
                    return False
                excess -= seg.size
                return True
            deleted += self._delete_prefix(over_size, now_ms, "local.retention.bytes, uploaded")
        return deleted

    def advance_log_start(self, offset: int) -> None:
        """The remote log manager deleted remote segments (retention): the log now starts at `offset`."""
        offset = min(offset, self.log_end_offset)
        if offset > self.log_start_offset:
            self.log_start_offset = offset
            self._write_log_start_checkpoint()
            self.leader_epochs.truncate_from_start(offset)
            self._delete_prefix(lambda seg, next_base: next_base <= offset, self._now_ms(), "log start offset")

    def _delete_prefix(self, predicate: Callable[[LogSegment, int], bool], now_ms: int, why: str) -> int:
        """Delete the oldest non-active segments while `predicate(segment, next_base_offset)` holds
        (never one holding offsets at or above the high watermark)."""
        count = 0
        high_watermark = self.high_watermark
        while (len(self.segments) > 1 and self.segments[1].base_offset <= high_watermark
               and predicate(self.segments[0], self.segments[1].base_offset)):
            self._schedule_delete(self.segments.pop_first(), now_ms, why)
            count += 1
        return count

    # --- truncation (replication) ----------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch at or above `offset`; returns the new log end offset.

        Whole batches go (Kafka's LogSegment.truncateTo): the log ends where the first batch whose
        last offset is >= `offset` began. Later segments are deleted, the one holding that batch is
        cut (log and both indexes); the epoch cache, high watermark and producer state follow the new
        end. At or past the log end nothing changes; below the first segment the log is emptied
        and starts at `offset` (`truncate_fully_and_start_at`).
        """
        if offset < 0:
            raise ValueError(f"cannot truncate {self.name} to negative offset {offset}")
        if offset >= self.log_end_offset:
            return self.log_end_offset
        if offset < self.segments[0].base_offset:
            self.truncate_fully_and_start_at(offset)
            return self.log_end_offset
        now_ms = self._now_ms()
        while self.active_segment.base_offset > offset:
            self._schedule_delete(self.segments.pop_last(), now_ms, f"truncation to {offset}")
        active = self.active_segment
        old_end = self.log_end_offset
        self.log_end_offset = active.truncate_to_offset(offset)
        active.restore_roll_clock(now_ms)
        self._after_truncation()
        log.info("%s: truncated to offset %d: log end offset %d -> %d", self.name, offset, old_end,
                 self.log_end_offset)
        return self.log_end_offset

    def truncate_fully_and_start_at(self, offset: int, log_start: int | None = None) -> None:
        """Delete every segment and start empty at `offset`: log start = high watermark = log end.

        For a follower below the leader's log start offset, or (`log_start` below `offset`) below a tiered
        leader's earliest local offset, the offsets between held in remote storage. The epoch cache and
        producer state are cleared.
        """
        if offset < 0:
            raise ValueError(f"cannot start {self.name} at negative offset {offset}")
        now_ms = self._now_ms()
        while self.segments:
            self._schedule_delete(self.segments.pop_last(), now_ms, f"truncation to start at {offset}")
        self._add_segment(self._open_segment(offset, jitter=True))
        self.log_end_offset = self.log_start_offset = offset
        if log_start is not None and log_start < offset:
            self.log_start_offset = log_start
            self.remote_next_offset = offset
        self._write_log_start_checkpoint()
        self.leader_epochs.clear()
        self.producers.truncate_fully()
        self._high_watermark = offset
        log.info("%s: emptied, starting at offset %d", self.name, offset)

    def restore_tiered_state(self, snapshot: bytes | None, leader_epochs: bytes | None) -> None:
        """Just started empty at a tiered leader's earliest local offset: take the producer snapshot and leader
        epoch checkpoint the remote segment ending here recorded (Kafka's follower builds the same state)."""
        if leader_epochs is not None:
            atomic_write(self.directory / LEADER_EPOCH_FILE, leader_epochs)
            self._load_leader_epochs()
        if snapshot is not None:
            atomic_write(self.directory / offset_file_name(self.log_end_offset, ".snapshot"), snapshot, durable=False)
            self._load_producer_state()

    def _after_truncation(self) -> None:
        end = self.log_end_offset
        if self.log_start_offset > end:
            self.log_start_offset = end
            self._write_log_start_checkpoint()
        self.leader_epochs.truncate_from_end(end)
        self._high_watermark = min(max(self._high_watermark, self.log_start_offset), end)
        self._load_producer_state()     # snapshots above the end go; replay from the newest one left

    def _schedule_delete(self, seg: LogSegment, now_ms: int, why: str) -> None:
        """Rename a removed segment's files to `*.deleted`; they go after file.delete.delay.ms."""
        seg.mark_deleted()
        self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, seg))
        log.info("%s: deleted segment %d (%s)", self.name, seg.base_offset, why)

    def replace_segments(self, old: list[LogSegment], swap_path: Path) -> LogSegment:
        """Log cleaner: swap consecutive sealed segments `old` for the cleaned file `swap_path`.

        The cleaned segment takes the first old segment's base offset; the old files become
        `*.deleted` (their fds stay open for in-flight reads) and go after file.delete.delay.ms.
        """
        i = self.segments.index(old[0])
        if list(self.segments[i:i + len(old)]) != old or old[-1] is self.active_segment:
            raise ValueError(f"{self.name}: segments to replace must be consecutive and sealed")
        aborted = [e for seg in old for e in seg.txn_index.entries()]
        now = self._now_ms()
        for seg in old:
            seg.mark_deleted()
            self._pending_deletes.append((now + self.config.file_delete_delay_ms, seg))
        base = old[0].base_offset
        swap_path.replace(self.directory / offset_file_name(base, LOG_SUFFIX))
        new = self._open_segment(base, jitter=False)
        new.rebuild_indexes()
        for entry in aborted:
            new.txn_index.append(entry)
        new.seal()
        self.segments.replace(old, new)
        return new

    def purge_deleted(self, now_ms: int) -> int:
        """Really remove `*.deleted` files whose file.delete.delay.ms has passed; returns how many."""
        due = [seg for at, seg in self._pending_deletes if at <= now_ms]
        if due:
            self._pending_deletes = [(at, seg) for at, seg in self._pending_deletes if at > now_ms]
            for seg in due:
                seg.remove_files()
        return len(due)

    def expire_producers(self, now_ms: int) -> int:
        return self.producers.remove_expired(now_ms)

    # --- lifecycle ------------------------------------------------------------------------------

    def close(self) -> None:
        """Flush, snapshot producer state, close files. Pending `*.deleted` files go at next start."""
        if self._closed:
            return
        self.flush()
        self.producers.take_snapshot(self.log_end_offset)
        self._close_files()

    def _close_files(self) -> None:
        for seg in self.segments:
            seg.close()
        for _, seg in self._pending_deletes:
            seg.close()
        self._pending_deletes = []
        self._closed = True

    def delete(self) -> None:
        """Topic deletion: close every file and remove the partition directory."""
        self._close_files()
        shutil.rmtree(self.directory, ignore_errors=True)
        log.info("%s: deleted partition directory %s", self.name, self.directory)


def _segment_chunks(headers: list[BatchHeader], segment_bytes: int) -> Iterator[list[BatchHeader]]:
    """Consecutive batches in groups that each fit one segment (a larger batch alone), by size and
    by relative offset (int32 from the group's first offset)."""
    group: list[BatchHeader] = []
    size = 0
    for h in headers:
        if group and (size + h.size > segment_bytes or h.last_offset - group[0].base_offset > INT32_MAX):
            yield group
            group, size = [], 0
        group.append(h)
        size += h.size
    if group:
        yield group


def _timestamp_range(cfg: TopicConfig, now_ms: int) -> tuple[int, int]:
    """The CreateTime timestamps a record may carry (message.timestamp.before/after.max.ms, and the
    deprecated difference.max.ms bounding both, as Kafka reads them)."""
    before = min(cfg.message_timestamp_before_max_ms, cfg.message_timestamp_difference_max_ms)
    after = min(cfg.message_timestamp_after_max_ms, cfg.message_timestamp_difference_max_ms)
    low = now_ms - before if before < LONG_MAX else -2**63
    high = now_ms + after if after < LONG_MAX else 2**63 - 1
    return max(low, -2**63), min(high, 2**63 - 1)
