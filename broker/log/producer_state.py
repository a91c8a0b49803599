"""ProducerStateManager: idempotent-producer state of one partition (epochs, sequences, duplicates).

Owns: per producer id, its epoch and the metadata of its last 5 batches; the checks Kafka makes
before an append (epoch fencing, in-order sequences, duplicate detection); snapshots in the
partition directory (`<20-digit offset>.snapshot`, JSON) and rebuilding from batch headers;
expiring idle producers. Never reads or writes the log itself: the partition log feeds it headers.

Rules (Kafka's, per batch with producer_id >= 0):
- epoch lower than the known one: InvalidProducerEpochError;
- epoch higher: the batch must start at sequence 0, else OutOfOrderSequenceError;
- same epoch and the same (first, last) sequence as one of the last 5 batches: DuplicateSequenceError
  carrying the original base offset (and its LogAppendTime, or -1);
- same epoch otherwise: first sequence must be last sequence + 1 (int32 max wraps to 0), else
  OutOfOrderSequenceError.
- An unknown producer id is accepted at any sequence (Kafka 2.5+, KIP-360): its state may have
  expired or been removed with old segments, and rejecting it would wedge the producer.

Transactions (KIP-98): a transactional batch of a producer with no open transaction opens one at
its base offset; a non-transactional batch from a producer with an open transaction is refused
(InvalidTxnStateError); a marker (control batch, `apply_marker`) closes the open transaction and
returns it as a `CompletedTxn`, after checking the marker's coordinator epoch (not older than the
last one seen: TransactionCoordinatorFencedError) and producer epoch (not older: fenced). The first
unstable offset is the lowest first offset of an open transaction, or of a completed one whose
marker is not yet below the high watermark (`mark_replicated`): the last stable offset (LSO) is
the lower of it and the high watermark. A producer with an open transaction never expires.
"""
from __future__ import annotations

import json
import logging
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from kafka_protocol.control_records import Marker
from kafka_protocol.errors import (
    DuplicateSequenceError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from broker.log.constants import PRODUCER_BATCH_WINDOW, SNAPSHOT_SUFFIX, SNAPSHOTS_TO_KEEP, offset_file_name
from kafka_protocol.record_batch import INT32_MAX, NO_PRODUCER_ID
from broker.log.fileutil import atomic_write, remove_quietly
from kafka_protocol.record_batch import BatchHeader

log = logging.getLogger(__name__)

_SNAPSHOT_VERSION = 2       # 2 added each producer's open transaction and coordinator epoch


@dataclass(slots=True, frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    base_offset: int
    last_offset: int
    timestamp: int
    log_append_time: int    # -1 for CreateTime batches


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a marker ended in this partition: its offsets from first record to marker."""

    producer_id: int
    first_offset: int
    last_offset: int        # the marker's offset
    aborted: bool


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int
    last_update_ms: int
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=PRODUCER_BATCH_WINDOW))
    txn_first_offset: int | None = None      # first offset of the producer's open transaction
    coordinator_epoch: int = -1              # of the last marker written for this producer
    last_timestamp: int = -1                 # of its last batch (max timestamp) or marker

    @property
    def last_seq(self) -> int | None:
        return self.batches[-1].last_seq if self.batches else None

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None

    def copy(self) -> "ProducerEntry":
        return ProducerEntry(self.producer_id, self.epoch, self.last_update_ms,
                             deque(self.batches, maxlen=PRODUCER_BATCH_WINDOW), self.txn_first_offset,
                             self.coordinator_epoch, self.last_timestamp)


class ProducerStateManager:
    """Sequence and epoch bookkeeping for the idempotent producers writing one partition."""

    def __init__(self, directory: Path, producer_id_expiration_ms: int) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerEntry] = {}
        self.ongoing: dict[int, int] = {}                # producer id -> first offset of its open transaction
        self._unreplicated: list[CompletedTxn] = []      # completed, marker not yet below the high watermark
        self._snapshot_offset: int | None = None   # offset of the snapshot matching memory, if any
        self._changed = False

    # --- checks and updates -------------------------------------------------------------------

    def check_batches(self, headers: list[BatchHeader]) -> None:
        """Check all batches of one append, each against the state left by the ones before it."""
        if len(headers) == 1:
            self.check(headers[0])
            return
        staged: dict[int, ProducerEntry] = {}
        for h in headers:
            if h.producer_id == NO_PRODUCER_ID:
                continue
            self.check(h, staged)
            entry = staged.get(h.producer_id) or self._entry_copy(h.producer_id, h)
            _apply(entry, h, entry.last_update_ms)
            if h.is_transactional and entry.txn_first_offset is None:
                entry.txn_first_offset = h.base_offset
            staged[h.producer_id] = entry

    def check_epoch(self, h: BatchHeader) -> None:
        """Only the epoch rule (the broker's own transactional writes carry no client sequences)."""
        entry = self.producers.get(h.producer_id)
        if entry is not None and h.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {h.producer_id} has epoch {h.producer_epoch}, older than the current epoch {entry.epoch}")

    def _entry_copy(self, producer_id: int, h: BatchHeader) -> ProducerEntry:
        entry = self.producers.get(producer_id)
        return entry.copy() if entry else ProducerEntry(producer_id, h.producer_epoch, 0)

    def check(self, h: BatchHeader, staged: dict[int, ProducerEntry] | None = None) -> None:
        """Raise the Kafka error for a batch that must not be appended; no-op for non-idempotent."""
        pid = h.producer_id
        if pid == NO_PRODUCER_ID:
            return
        entry = (staged or {}).get(pid) or self.producers.get(pid)
        if entry is None:
            return
        if entry.txn_first_offset is not None and not h.is_transactional and h.producer_epoch == entry.epoch:
            raise InvalidTxnStateError(
                f"producer {pid} has an open transaction, so its batches must be transactional")
        if h.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"producer {pid} has epoch {h.producer_epoch}, older than the current epoch {entry.epoch}")
        if h.producer_epoch > entry.epoch:
            if h.base_sequence != 0:
                raise OutOfOrderSequenceError(
                    f"producer {pid} started epoch {h.producer_epoch} at sequence {h.base_sequence}, not 0")
            return
        dup = entry.find_duplicate(h.base_sequence, h.last_sequence)
        if dup is not None:
            raise DuplicateSequenceError(
                f"producer {pid} batch with sequences {h.base_sequence}..{h.last_sequence} is a duplicate "
                f"of the batch at offset {dup.base_offset}", dup.base_offset, dup.log_append_time)
        last = entry.last_seq
        if last is None:
            return
        expected = 0 if last == INT32_MAX else last + 1
        if h.base_sequence != expected:
            raise OutOfOrderSequenceError(
                f"producer {pid} epoch {h.producer_epoch}: expected sequence {expected}, got {h.base_sequence}")

    def update(self, h: BatchHeader, now_ms: int) -> None:
        """Record an appended batch (offsets already assigned)."""
        if h.producer_id == NO_PRODUCER_ID:
            return
        self._changed = True
        entry = self.producers.get(h.producer_id)
        if entry is None:
            entry = self.producers[h.producer_id] = ProducerEntry(h.producer_id, h.producer_epoch, now_ms)
        _apply(entry, h, now_ms)
        if h.is_transactional and entry.txn_first_offset is None:
            entry.txn_first_offset = self.ongoing[h.producer_id] = h.base_offset

    # --- transactions ---------------------------------------------------------------------------

    def check_marker(self, marker: Marker) -> None:
        """Raise if a coordinator's marker must not be appended (an older coordinator or producer epoch)."""
        entry = self.producers.get(marker.producer_id)
        if entry is None:
            return
        if marker.coordinator_epoch < entry.coordinator_epoch:
            raise TransactionCoordinatorFencedError(
                f"marker for producer {marker.producer_id} from coordinator epoch {marker.coordinator_epoch}, "
                f"older than {entry.coordinator_epoch}")
        if marker.producer_epoch < entry.epoch:
            raise InvalidProducerEpochError(
                f"marker for producer {marker.producer_id} has epoch {marker.producer_epoch}, older than {entry.epoch}")

    def apply_marker(self, marker: Marker, offset: int, now_ms: int, timestamp_ms: int) -> CompletedTxn | None:
        """Record a marker appended at `offset` (with its batch timestamp): the producer's open
        transaction (if any) is complete."""
        self._changed = True
        pid = marker.producer_id
        entry = self.producers.get(pid)
        if entry is None:
            entry = self.producers[pid] = ProducerEntry(pid, marker.producer_epoch, now_ms)
        if marker.producer_epoch != entry.epoch:
            entry.epoch = marker.producer_epoch
            entry.batches.clear()
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_update_ms = max(entry.last_update_ms, now_ms)
        entry.last_timestamp = timestamp_ms
        first = entry.txn_first_offset
        entry.txn_first_offset = None
        self.ongoing.pop(pid, None)
        if first is None:
            return None
        done = CompletedTxn(pid, first, offset, not marker.commit)
        self._unreplicated.append(done)
        return done

    def mark_replicated(self, high_watermark: int) -> None:
        """Completed transactions whose marker is below the high watermark stop holding the LSO back."""
        if self._unreplicated:
            self._unreplicated = [t for t in self._unreplicated if t.last_offset >= high_watermark]

    def first_unstable_offset(self) -> int | None:
        """The lowest first offset of a transaction not yet decided for consumers, or None."""
        firsts = list(self.ongoing.values()) + [t.first_offset for t in self._unreplicated]
        return min(firsts) if firsts else None

    def remove_expired(self, now_ms: int) -> int:
        """Forget producers idle for longer than producer.id.expiration.ms (never one with an open
        transaction); returns how many."""
        cutoff = now_ms - self.producer_id_expiration_ms
        expired = [pid for pid, e in self.producers.items()
                   if e.last_update_ms < cutoff and e.txn_first_offset is None]
        for pid in expired:
            del self.producers[pid]
        self._changed = self._changed or bool(expired)
        return len(expired)

    # --- snapshots ------------------------------------------------------------------------------

    def snapshot_offsets(self) -> list[int]:
        out = []
        for p in self.directory.glob("*" + SNAPSHOT_SUFFIX):
            stem = p.name[:-len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                out.append(int(stem))
        return sorted(out)

    def _snapshot_path(self, offset: int) -> Path:
        return self.directory / offset_file_name(offset, SNAPSHOT_SUFFIX)

    def take_snapshot(self, offset: int) -> None:
        """Write the state as of `offset` (the log end offset) and keep only the newest snapshots.

        Not fsync'd: a snapshot only saves rebuild time. One lost or torn by a crash fails to parse
        and is skipped, and the state is rebuilt from the log after an older snapshot.
        Skipped when a snapshot at `offset` exists and nothing was appended since.
        """
        if offset == self._snapshot_offset and not self._changed:
            return
        doc = {
            "version": _SNAPSHOT_VERSION,
            "offset": offset,
            "producers": [
                {"id": e.producer_id, "epoch": e.epoch, "last_update_ms": e.last_update_ms,
                 "txn_first_offset": e.txn_first_offset, "coordinator_epoch": e.coordinator_epoch,
                 "last_timestamp": e.last_timestamp,
                 "batches": [[b.first_seq, b.last_seq, b.base_offset, b.last_offset, b.timestamp,
                              b.log_append_time] for b in e.batches]}
                for e in self.producers.values()
            ],
        }
        atomic_write(self._snapshot_path(offset), json.dumps(doc).encode(), durable=False)
        self._snapshot_offset, self._changed = offset, False
        for old in self.snapshot_offsets()[:-SNAPSHOTS_TO_KEEP]:
            remove_quietly(self._snapshot_path(old))

    def load_snapshot(self, log_end_offset: int) -> int | None:
        """Load the newest readable snapshot at or below `log_end_offset`; its offset, or None.

        Snapshots above the log end (the log was truncated by recovery) are deleted.
        """
        self._set_producers({})
        for offset in reversed(self.snapshot_offsets()):
            path = self._snapshot_path(offset)
            if offset > log_end_offset:
                log.info("removing producer snapshot %s above log end offset %d", path, log_end_offset)
                remove_quietly(path)
                continue
            try:
                doc = json.loads(path.read_bytes())
                self._set_producers({p["id"]: _entry_from_json(p) for p in doc["producers"]})
                self._snapshot_offset, self._changed = offset, False
                return offset
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("ignoring unreadable producer snapshot %s: %s", path, e)
                self._set_producers({})
        return None

    def _set_producers(self, producers: dict[int, ProducerEntry]) -> None:
        self.producers = producers
        self.ongoing = {pid: e.txn_first_offset for pid, e in producers.items() if e.txn_first_offset is not None}
        self._unreplicated = []

    def truncate_fully(self) -> None:
        """The log was emptied: forget every producer and remove every snapshot."""
        for offset in self.snapshot_offsets():
            remove_quietly(self._snapshot_path(offset))
        self._set_producers({})
        self._snapshot_offset, self._changed = None, False

    def replay(self, h: BatchHeader, marker: Marker | None) -> CompletedTxn | None:
        """Replay one batch appended after the loaded snapshot (its timestamp stands in for time);
        `marker` is the control batch's marker."""
        if h.producer_id == NO_PRODUCER_ID:
            return None
        now_ms = max(h.max_timestamp, 0)
        if marker is not None:
            return self.apply_marker(marker, h.base_offset, now_ms, h.max_timestamp)
        self.update(h, now_ms)
        return None


def _apply(entry: ProducerEntry, h: BatchHeader, now_ms: int) -> None:
    if h.producer_epoch != entry.epoch:
        entry.epoch = h.producer_epoch
        entry.batches.clear()
    entry.last_timestamp = h.max_timestamp
    entry.batches.append(BatchMetadata(
        h.base_sequence, h.last_sequence, h.base_offset, h.last_offset, h.max_timestamp,
        h.max_timestamp if h.timestamp_type == 1 else -1))
    entry.last_update_ms = max(entry.last_update_ms, now_ms)


def _entry_from_json(p: dict) -> ProducerEntry:
    first = p.get("txn_first_offset")
    entry = ProducerEntry(int(p["id"]), int(p["epoch"]), int(p["last_update_ms"]),
                          txn_first_offset=None if first is None else int(first),
                          coordinator_epoch=int(p.get("coordinator_epoch", -1)),
                          last_timestamp=int(p.get("last_timestamp", -1)))
    for b in p["batches"]:
        entry.batches.append(BatchMetadata(*(int(x) for x in b)))
    return entry
