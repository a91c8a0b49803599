"""LogCleaner: log compaction for topics with `cleanup.policy` containing `compact`.

Owns: choosing which compacted partition to clean (dirty ratio against min.cleanable.dirty.ratio,
checked every log.cleaner.backoff.ms), building the key -> latest offset map of the dirty section,
rewriting the sealed segments keeping only the latest record per key (records without a key are
dropped, tombstones are dropped once older than delete.retention.ms, records of aborted
transactions are dropped and never count as a key's latest), merging small cleaned
segments up to segment.bytes, and completing an interrupted swap at startup (`recover_swaps`).

Invariants: the active segment is never touched, nor any segment reaching the last stable offset
(an undecided transaction's records are neither latest nor dropped); markers stay; offsets are preserved (a compacted log has gaps);
a batch whose records all survive is copied byte for byte, others are re-encoded uncompressed with
their producer fields kept. Crash safety: the cleaned file is fsync'd as `<base>.log.cleaned`, then
renamed to `<base>.log.swap` (the commit point) before the old segments are retired; startup turns
a leftover `.swap` into the segment and removes the segments it replaced.

Never knows about the network protocol, groups or asyncio; runs one partition per pass on the
caller's thread.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from broker.log.constants import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, offset_file_name
from kafka_protocol.record_batch import INT32_MAX
from broker.log.fileutil import fsync_dir, remove_quietly
from broker.log.log_manager import LogManager, parse_partition_dir
from broker.log.partition_log import PartitionLog
from broker.log.batch_scan import iter_headers
from kafka_protocol.record_builder import decode_records, encode_batch
from broker.log.segment import LogSegment
from broker.log.transaction_index import AbortedTxn
from kafka_protocol.record_batch import BatchHeader

log = logging.getLogger(__name__)

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"


@dataclass
class CleanResult:
    partition: str
    segments_before: int
    segments_after: int
    bytes_before: int
    bytes_after: int
    records_removed: int


@dataclass
class _Cleaned:
    """One sealed segment's surviving records, written to `path`."""

    segment: LogSegment
    path: Path
    size: int = 0
    removed: int = 0


class LogCleaner:
    """Compacts the partition logs of a LogManager whose topic config says `compact`."""

    def __init__(self, logs: LogManager, *, enabled: bool = True, backoff_ms: int = 15000) -> None:
        self.logs = logs
        self.enabled = enabled
        self.backoff_ms = backoff_ms
        self._first_dirty: dict[tuple[str, int], int] = {}
        self._next_run_ms = 0

    # -- scheduling
    def maybe_clean(self, now_ms: int) -> CleanResult | None:
        """Clean the dirtiest eligible partition if log.cleaner.backoff.ms has passed since the last check."""
        if not self.enabled or now_ms < self._next_run_ms:
            return None
        self._next_run_ms = now_ms + self.backoff_ms
        best: tuple[float, PartitionLog] | None = None
        for plog in self.logs.all_logs():
            if "compact" not in plog.config.cleanup_policy or len(plog.segments) < 2:
                continue
            ratio = self.dirty_ratio(plog)
            if ratio >= plog.config.min_cleanable_dirty_ratio and ratio > 0 and (best is None or ratio > best[0]):
                best = (ratio, plog)
        if best is None:
            return None
        result = self.clean(best[1], now_ms)
        if result.records_removed or result.segments_after != result.segments_before:
            log.info("cleaned %s: %d -> %d segments, %d -> %d bytes, %d records removed", result.partition,
                     result.segments_before, result.segments_after, result.bytes_before, result.bytes_after,
                     result.records_removed)
        return result

    def dirty_ratio(self, plog: PartitionLog) -> float:
        """Share of the sealed segments' bytes written since the last cleaning."""
        first_dirty = self._first_dirty.get((plog.topic, plog.partition), -1)
        sealed = plog.segments[:-1]
        total = sum(s.size for s in sealed)
        if total == 0:
            return 0.0
        dirty = sum(s.size for i, s in enumerate(sealed)
                    if (sealed[i + 1].base_offset if i + 1 < len(sealed) else plog.active_segment.base_offset) > first_dirty)
        return dirty / total

    # -- cleaning
    def clean(self, plog: PartitionLog, now_ms: int) -> CleanResult:
        """Compact every sealed segment of `plog` against the keys of its dirty section."""
        key = (plog.topic, plog.partition)
        first_dirty = self._first_dirty.get(key, -1)
        stable = plog.last_stable_offset
        segments = list(plog.segments)
        sealed = [seg for seg, nxt in zip(segments, segments[1:]) if nxt.base_offset <= stable]
        if not sealed:
            return CleanResult(plog.name, len(segments), len(segments), plog.size_in_bytes(), plog.size_in_bytes(), 0)
        end_offset = segments[len(sealed)].base_offset
        before = (len(plog.segments), plog.size_in_bytes())
        aborted = plog.aborted_transactions(sealed[0].base_offset, end_offset)
        latest = self._offset_map(sealed, first_dirty, aborted)
        horizon = now_ms - plog.config.delete_retention_ms
        cleaned = [self._clean_segment(plog, seg, latest, horizon, aborted) for seg in sealed]
        for group in self._groups(cleaned, plog.config.segment_bytes):
            self._swap_group(plog, group)
        self._first_dirty[key] = end_offset
        removed = sum(c.removed for c in cleaned)
        return CleanResult(plog.name, before[0], len(plog.segments), before[1], plog.size_in_bytes(), removed)

    @staticmethod
    def _offset_map(sealed: list[LogSegment], first_dirty: int, aborted: list[AbortedTxn]) -> dict[bytes, int]:
        latest: dict[bytes, int] = {}
        for seg in sealed:
            for h in seg.iter_headers():
                if h.last_offset < first_dirty or h.is_control or _is_aborted(h, aborted):
                    continue
                for r in decode_records(seg.read_batch(h)):
                    if r.key is not None and r.offset >= first_dirty:
                        latest[r.key] = r.offset
        return latest

    @staticmethod
    def _clean_segment(plog: PartitionLog, seg: LogSegment, latest: dict[bytes, int], horizon: int,
                       aborted: list[AbortedTxn]) -> _Cleaned:
        """Write the records of `seg` that survive into `<base>.log.cleaned`."""
        path = plog.directory / (offset_file_name(seg.base_offset, LOG_SUFFIX) + CLEANED_SUFFIX)
        out = _Cleaned(seg, path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for h in seg.iter_headers():
                if _is_aborted(h, aborted):
                    out.removed += h.records_count
                    continue
                raw = seg.read_batch(h)
                if h.is_control:
                    out.size += os.write(fd, raw)
                    continue
                records = decode_records(raw)
                keep = [r for r in records
                        if r.key is not None and latest.get(r.key, -1) <= r.offset
                        and not (r.value is None and h.max_timestamp < horizon)]
                out.removed += len(records) - len(keep)
                if len(keep) == len(records):
                    out.size += os.write(fd, raw)
                elif keep:
                    out.size += os.write(fd, encode_batch(
                        keep, producer_id=h.producer_id, producer_epoch=h.producer_epoch,
                        base_sequence=h.base_sequence, log_append_time=h.timestamp_type == 1,
                        partition_leader_epoch=h.partition_leader_epoch))
        finally:
            os.close(fd)
        return out

    @staticmethod
    def _groups(cleaned: list[_Cleaned], max_bytes: int) -> list[list[_Cleaned]]:
        """Consecutive cleaned segments whose total size fits in one segment and whose offsets fit int32 deltas."""
        groups: list[list[_Cleaned]] = []
        for i, c in enumerate(cleaned):
            nxt = cleaned[i + 1].segment.base_offset if i + 1 < len(cleaned) else None
            if groups:
                g = groups[-1]
                fits = sum(x.size for x in g) + c.size <= max_bytes
                span_ok = nxt is None or nxt - 1 - g[0].segment.base_offset <= INT32_MAX
                if fits and span_ok:
                    g.append(c)
                    continue
            groups.append([c])
        return groups

    @staticmethod
    def _swap_group(plog: PartitionLog, group: list[_Cleaned]) -> None:
        first = group[0]
        if len(group) == 1 and first.removed == 0:
            remove_quietly(first.path)
            return
        with open(first.path, "ab") as f:
            for c in group[1:]:
                with open(c.path, "rb") as src:
                    while chunk := src.read(1 << 20):
                        f.write(chunk)
                remove_quietly(c.path)
            f.flush()
            os.fsync(f.fileno())
        swap_path = first.path.with_name(offset_file_name(first.segment.base_offset, LOG_SUFFIX) + SWAP_SUFFIX)
        os.replace(first.path, swap_path)
        fsync_dir(plog.directory)
        plog.replace_segments([c.segment for c in group], swap_path)
        fsync_dir(plog.directory)

    # -- startup
    @staticmethod
    def recover_swaps(data_dir: Path) -> int:
        """Finish swaps interrupted by a crash, before the logs are opened; returns how many."""
        done = 0
        if not Path(data_dir).is_dir():
            return 0
        for part_dir in Path(data_dir).iterdir():
            if not part_dir.is_dir() or parse_partition_dir(part_dir.name) is None:
                continue
            for leftover in part_dir.glob(f"*{LOG_SUFFIX}{CLEANED_SUFFIX}"):
                remove_quietly(leftover)
            for swap in sorted(part_dir.glob(f"*{LOG_SUFFIX}{SWAP_SUFFIX}")):
                _complete_swap(part_dir, swap)
                done += 1
        return done


def _complete_swap(part_dir: Path, swap: Path) -> None:
    base = int(swap.name.split(".", 1)[0])
    fd = os.open(swap, os.O_RDONLY)
    try:
        last = base
        for h in iter_headers(fd, 0, os.fstat(fd).st_size):
            last = h.last_offset
    finally:
        os.close(fd)
    for path in part_dir.glob(f"*{LOG_SUFFIX}"):
        stem = path.name.split(".", 1)[0]
        if stem.isdigit() and base <= int(stem) <= last:
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
                remove_quietly(part_dir / offset_file_name(int(stem), suffix))
            if int(stem) != base:       # the aborted transactions those segments held are cleaned away
                remove_quietly(part_dir / offset_file_name(int(stem), TXN_INDEX_SUFFIX))
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        remove_quietly(part_dir / offset_file_name(base, suffix))
    os.replace(swap, part_dir / offset_file_name(base, LOG_SUFFIX))
    fsync_dir(part_dir)
    log.warning("%s: completed an interrupted log cleaner swap at offset %d", part_dir.name, base)


def _is_aborted(h: BatchHeader, aborted: list[AbortedTxn]) -> bool:
    """Whether a transactional data batch belongs to one of the `aborted` transactions."""
    if not h.is_transactional or h.is_control:
        return False
    return any(a.producer_id == h.producer_id and a.first_offset <= h.base_offset <= a.last_offset for a in aborted)
