"""The remote log manager (KIP-405's RemoteLogManager): tiered partitions' segments into and out of an object store.

On a broker with `remote.log.storage.system.enable`, for every partition of a topic with
`remote.storage.enable`:
  - **Takes the partition on** as its leader (`adopt`; at start, and again whenever this broker becomes its
    leader): lists its folder in the store, reads the metadata objects, deletes orphans (objects of an upload that
    never wrote its metadata; in a cluster only those older than remote.log.orphan.grace.ms, as a deposed leader
    may still be uploading, and the younger ones once they are that old, while it leads) and uploads other segments
    already hold, and tells the log where the remote copy ends
    (`PartitionLog.remote_next_offset`), which lets local retention delete what is uploaded, and where the log
    starts. Only the leader uploads and deletes; a follower re-reads the folder every pass (`refresh`), so its
    own local retention deletes only what the leader recorded, and after a failover the new leader continues
    from the recorded metadata: its first upload may straddle the old leader's last one (replicas roll
    segments at different offsets), nothing is uploaded twice whole.
  - **Uploads** (`run_cycle`, every remote.log.manager.task.interval.ms): each closed segment whose offsets are
    all below the high watermark and the last stable offset, in offset order: its `.log`, indexes, aborted
    transactions, producer snapshot and leader epochs, then its metadata. The metadata object is the commit:
    a segment counts as uploaded only once it is written, and only then may local retention delete the local
    copy. A failed upload is retried next cycle; nothing local is deleted meanwhile.
  - **Remote retention**: retention.ms and retention.bytes over the whole log (remote and local) delete the
    oldest remote segments, metadata first, and move the log start offset. A deleted topic's objects go.
  - **Serves reads** of offsets below the local log start: `cached` answers from a bounded cache of whole-batch
    chunks (the bytes exactly as stored locally before) without I/O; `load` fetches a chunk on a worker thread
    (and the next one ahead of the reader); the aborted transactions of read_committed fetches come from the
    segments' `.txnindex` objects. `offset_for_timestamp` finds ListOffsets' answer in remote segments.
Every object-store call runs on a worker thread; the event loop only touches the logs.
"""
from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, TypeVar

from broker.log.transaction_index import AbortedTxn, collect_entries, parse_entries
from broker.tiered.object_store import ObjectStore
from kafka_protocol.remote_segments import (
    DATA_SUFFIXES,
    META_SUFFIX,
    RemotePartition,
    RemoteSegment,
    index_position,
    parse_object_name,
    partition_folder,
)
from kafka_protocol.errors import KafkaStorageError
from kafka_protocol.quiet_logging import quiet
from kafka_protocol.record_batch import HEADER_SIZE, iter_record_timestamps, parse_header

if TYPE_CHECKING:
    from broker.log.partition_log import PartitionLog
    from broker.log.segment import LogSegment

log = logging.getLogger(__name__)
warnings = quiet(logging.getLogger(__name__ + ".failures"))    # a store that stays down: once a minute

TP = tuple[str, int]
T = TypeVar("T")
CHUNK_BYTES = 4 * 1024 * 1024     # one ranged read of a remote .log
_TIME_ENTRY_SIZE = 12
# in a cluster, an object without metadata younger than this may be a deposed leader's upload still running
# (the default of remote.log.orphan.grace.ms)
ORPHAN_GRACE_S = 600.0


@dataclass(frozen=True)
class Chunk:
    """Whole batches of one remote segment: [first_offset, next_offset) read from byte `position`."""

    segment_id: str
    position: int
    first_offset: int
    next_offset: int
    data: bytes


class ChunkCache:
    """Chunks and small index objects by key, least recently used out first, at most `capacity` bytes."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.size = 0
        self._items: OrderedDict[tuple[str, ...], bytes | Chunk] = OrderedDict()

    def get(self, key: tuple[str, ...]) -> bytes | Chunk | None:
        item = self._items.get(key)
        if item is not None:
            self._items.move_to_end(key)
        return item

    def put(self, key: tuple[str, ...], item: bytes | Chunk) -> None:
        if key in self._items:
            return
        self._items[key] = item
        self.size += _size(item)
        while self.size > self.capacity and len(self._items) > 1:
            _, old = self._items.popitem(last=False)
            self.size -= _size(old)

    def chunks(self, segment_id: str) -> Iterator[Chunk]:
        return (c for k, c in self._items.items() if k[0] == segment_id and isinstance(c, Chunk))


def _size(item: bytes | Chunk) -> int:
    return len(item.data) if isinstance(item, Chunk) else len(item)


def whole_batches(data: bytes, from_offset: int, max_bytes: int, min_one: bool) -> tuple[int, int]:
    """(start, end) in `data` (whole batches) of the batches from the one holding `from_offset`, at most
    `max_bytes` (one whole batch when `min_one` even if larger); (0, 0) when none there."""
    pos, start, end = 0, -1, 0
    while pos + HEADER_SIZE <= len(data):
        h = parse_header(data, pos)
        if pos + h.size > len(data):
            break
        if start < 0 and h.last_offset >= from_offset:
            start = pos
        if start >= 0:
            if pos + h.size - start > max_bytes and (pos > start or not min_one):
                break
            end = pos + h.size
        pos += h.size
    return (start, end) if start >= 0 and end > start else (0, 0)


class RemoteLogManager:
    def __init__(self, url: str, *, cache_bytes: int, fetch_wait_s: float,
                 topic_id: Callable[[str], str | None], logs: Callable[[], list[PartitionLog]],
                 leads: Callable[[PartitionLog], bool] | None = None, clock: Callable[[], float] = time.time,
                 orphan_grace_s: float = ORPHAN_GRACE_S) -> None:
        self.store = ObjectStore(url)
        self.cache = ChunkCache(cache_bytes)
        self.fetch_wait_s = fetch_wait_s
        self._topic_id = topic_id
        self._logs = logs
        self.cluster = leads is not None
        self._leads = leads or (lambda _plog: True)
        self._leading: set[TP] = set()     # partitions taken on as their leader (adopt) and still led
        self.orphan_grace_s = orphan_grace_s
        self._orphans_due: dict[TP, float] = {}   # led partitions with orphans in their grace: when to look again
        self._clock = clock
        self.partitions: dict[TP, RemotePartition] = {}
        self._aborted: dict[str, list[AbortedTxn]] = {}    # each remote segment's aborted transactions (small)
        self._folders: dict[TP, str] = {}
        self._executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="remote-log")
        self._loading: dict[tuple[str, int], asyncio.Future[None]] = {}
        self.uploads = 0           # segments uploaded since start (metrics, tests)
        self.upload_failures = 0
        self.fetch_bytes = 0       # record bytes served to Fetch requests from remote segments

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)

    async def _io(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    # --- taking partitions on ---------------------------------------------------------------------

    def _wanted(self) -> list[PartitionLog]:
        return [p for p in self._logs() if p.config.remote_storage_enable and self._topic_id(p.topic)]

    async def _read_remote(self, plog: PartitionLog) -> tuple[RemotePartition, list[RemoteSegment], dict[str, float | None]]:
        """The partition's remote segments as its folder lists them now, the duplicates among them, and the listing
        (metadata already known is not read again)."""
        tp = (plog.topic, plog.partition)
        topic_id = self._topic_id(plog.topic)
        assert topic_id is not None
        folder = self._folders[tp] = partition_folder(plog.topic, plog.partition, topic_id)
        listing = await self._io(self.store.listing, folder)
        assert isinstance(listing, dict)
        known = {s.segment_id: s for s in (self.partitions[tp].segments if tp in self.partitions else [])}
        segments = []
        for name in listing:
            parsed = parse_object_name(name)
            if parsed is None or parsed[2] != META_SUFFIX:
                continue
            seg = known.get(parsed[1])
            if seg is None:
                data = await self._io(self.store.get_bytes, f"{folder}/{name}")
                assert isinstance(data, bytes)
                seg = RemoteSegment.from_json(data)
            segments.append(seg)
        remote, duplicates = RemotePartition.from_listing(segments)
        for seg in remote.segments:
            if ".txnindex" in seg.files and seg.segment_id not in self._aborted:
                self._aborted[seg.segment_id] = parse_entries(await self._io(self.store.get_bytes,
                                                                             seg.key(".txnindex")))
        return remote, duplicates, listing

    async def adopt(self, plog: PartitionLog) -> None:
        """As the partition's leader: read its remote segments, delete orphans and duplicates, and tell the log what
        is uploaded."""
        remote = await self._tidy(plog)
        self._leading.add((plog.topic, plog.partition))
        log.info("%s: tiered, %d remote segments (offsets %s..%s), local from %d", plog.name, len(remote),
                 remote.start_offset, remote.next_offset, plog.segments[0].base_offset)

    async def _tidy(self, plog: PartitionLog) -> RemotePartition:
        """As the leader: the folder read, duplicates and orphans deleted, the log told what is uploaded."""
        remote, duplicates, listing = await self._read_remote(plog)
        for seg in duplicates:
            await self._delete_segment(seg)
        await self._delete_orphans(plog, remote, duplicates, listing)
        self.partitions[(plog.topic, plog.partition)] = remote
        self._tell_log(plog, remote)
        return remote

    async def _delete_orphans(self, plog: PartitionLog, remote: RemotePartition, duplicates: list[RemoteSegment],
                              listing: dict[str, float | None]) -> None:
        """Delete the objects of uploads that never wrote their metadata (never data). In a cluster only those older
        than the grace; for younger ones, note when to look again (`_sweep_orphans`)."""
        tp = (plog.topic, plog.partition)
        folder = self._folders[tp]
        committed = {s.segment_id for s in remote.segments} | {d.segment_id for d in duplicates}
        now = self._clock()
        self._orphans_due.pop(tp, None)
        for name, modified in listing.items():
            parsed = parse_object_name(name)
            if parsed is None or parsed[1] in committed:
                continue
            if self.cluster and (modified is None or now - modified < self.orphan_grace_s):
                # perhaps the upload of a leader that has not yet learned it was replaced
                due = (now if modified is None else modified) + self.orphan_grace_s
                self._orphans_due[tp] = min(self._orphans_due.get(tp, due), due)
                continue
            await self._io(self.store.delete, f"{folder}/{name}")
            log.info("%s: deleted %s, left by an upload that did not finish", plog.name, name)

    async def _sweep_orphans(self, plog: PartitionLog) -> None:
        """As the leader, once an orphan seen in its grace is old enough: the folder listed again, and the objects
        still without metadata deleted (an upload that finished meanwhile is data, or a duplicate)."""
        tp = (plog.topic, plog.partition)
        due = self._orphans_due.get(tp)
        if due is not None and self._clock() >= due:
            await self._tidy(plog)

    async def refresh(self, plog: PartitionLog) -> None:
        """As a follower: learn what the leader uploaded (local retention deletes only that), deleting nothing."""
        remote, _, _ = await self._read_remote(plog)
        self.partitions[(plog.topic, plog.partition)] = remote
        self._tell_log(plog, remote)

    async def restore_follower_state(self, plog: PartitionLog, offset: int) -> None:
        """A follower that starts empty at its leader's earliest local offset `offset`: the producer state and leader
        epochs recorded with the remote segment that ends there (none: nothing to restore, as after a failover the
        leader's segments may end elsewhere; duplicate detection then starts afresh for producers seen before)."""
        await self.refresh(plog)
        remote = self.partitions[(plog.topic, plog.partition)]
        seg = next((s for s in reversed(remote.segments) if s.next_offset == offset), None)
        if seg is None:
            log.info("%s: no remote segment ends at %d; producer state starts afresh there", plog.name, offset)
            return
        snapshot = await self._io(self.store.get_bytes, seg.key(".snapshot")) if ".snapshot" in seg.files else None
        epochs = (await self._io(self.store.get_bytes, seg.key(".leader-epoch-checkpoint"))
                  if ".leader-epoch-checkpoint" in seg.files else None)
        plog.restore_tiered_state(snapshot, epochs)

    @staticmethod
    def _tell_log(plog: PartitionLog, remote: RemotePartition) -> None:
        start = remote.start_offset
        local_start = plog.segments[0].base_offset
        if start is None or start > plog.log_start_offset:
            # the log start offset may only lie below the local segments where remote storage holds it
            plog.log_start_offset = max(plog.log_start_offset, min(start if start is not None else local_start,
                                                                   local_start))
        plog.remote_next_offset = remote.next_offset if remote.next_offset is not None else local_start

    # --- the periodic work ------------------------------------------------------------------------

    async def run_cycle(self) -> None:
        """Take on new tiered partitions, upload what is eligible, apply remote retention, forget deleted topics.
        Only a partition's leader uploads and deletes; a follower reads what the leader recorded."""
        live = set()
        for plog in self._wanted():
            tp = (plog.topic, plog.partition)
            live.add(tp)
            try:
                if not self._leads(plog):
                    self._leading.discard(tp)
                    self._orphans_due.pop(tp, None)
                    await self.refresh(plog)
                    continue
                if tp not in self._leading:
                    await self.adopt(plog)      # again after leading elsewhere: another leader may have uploaded
                await self._sweep_orphans(plog)
                if not plog.config.remote_log_copy_disable:
                    await self._upload_eligible(plog)
                await self._apply_retention(plog)
            except OSError as e:
                self.upload_failures += 1
                # once a minute per partition and condition: not the object's key, which is new on every pass
                warnings.warning("%s: remote storage: %s (retrying; no local data is deleted before its upload "
                                 "is recorded)", plog.name, getattr(e, "condition", e))
        for tp in [tp for tp in self.partitions if tp not in live]:
            await self._forget(tp)

    async def _upload_eligible(self, plog: PartitionLog) -> None:
        remote = self.partitions[(plog.topic, plog.partition)]
        limit = min(plog.high_watermark, plog.last_stable_offset)
        done = remote.next_offset if remote.next_offset is not None else -1
        segments = list(plog.segments)
        for seg, after in zip(segments, segments[1:]):
            # a segment that straddles the remote end (a new leader's, rolled elsewhere than the old leader's) goes
            # whole: remote segments may overlap
            if after.base_offset <= done or after.base_offset > limit or seg.size == 0:
                continue
            await self._upload(plog, remote, seg, after.base_offset)

    async def _upload(self, plog: PartitionLog, remote: RemotePartition, seg: LogSegment, next_offset: int) -> None:
        seg.flush()                        # the index entries on disk, as the files are read from there
        topic_id = self._topic_id(plog.topic) or ""
        files: dict[str, bytes | str] = {".log": str(seg.log_path), ".index": str(seg.offset_index.path),
                                         ".timeindex": str(seg.time_index.path)}
        if seg.txn_index.entries():
            files[".txnindex"] = seg.txn_index.path.read_bytes()
        snapshot = plog.directory / f"{next_offset:020d}.snapshot"
        if snapshot.exists():
            files[".snapshot"] = snapshot.read_bytes()
        epochs = plog.directory / "leader-epoch-checkpoint"
        if epochs.exists():
            files[".leader-epoch-checkpoint"] = epochs.read_bytes()
        epoch = plog.leader_epochs.latest_epoch
        meta = RemoteSegment(plog.topic, plog.partition, topic_id, uuid.uuid4().hex, seg.base_offset, next_offset,
                             seg.size, seg.largest_timestamp, int(self._clock() * 1000), -1 if epoch is None else epoch,
                             tuple(s for s in DATA_SUFFIXES if s in files))
        # the files by descriptors of their own, opened here: a segment renamed or deleted meanwhile stays readable
        fd = os.dup(seg.fd)
        try:
            await self._io(self._put_segment, meta, fd, files)
        finally:
            os.close(fd)
        remote.add(meta)
        if seg.txn_index.entries():
            self._aborted[meta.segment_id] = list(seg.txn_index.entries())
        plog.remote_next_offset = meta.next_offset
        self.uploads += 1
        log.info("%s: uploaded segment %d..%d (%d bytes) to %s", plog.name, meta.base_offset, meta.next_offset - 1,
                 meta.size, self.store.url)

    def _put_segment(self, meta: RemoteSegment, fd: int, files: dict[str, bytes | str]) -> None:
        """On a worker thread: every object of the segment, then its metadata (the commit)."""
        for suffix, what in files.items():
            key = meta.key(suffix)
            if suffix == ".log":
                self.store.put_fd(key, fd, meta.size)
            elif isinstance(what, bytes):
                self.store.put_bytes(key, what)
            else:
                self.store.put_file(key, Path(what))
        self.store.put_bytes(meta.key(META_SUFFIX), meta.to_json())     # now it is uploaded

    async def _apply_retention(self, plog: PartitionLog) -> None:
        """retention.ms / retention.bytes over the whole log: the oldest remote segments go, metadata first."""
        remote = self.partitions[(plog.topic, plog.partition)]
        cfg = plog.config
        if "delete" not in cfg.cleanup_policy:
            return
        now_ms = int(self._clock() * 1000)
        local_beyond = sum(s.size for s in plog.segments if s.base_offset >= (remote.next_offset or 0))
        total = remote.size_in_bytes() + local_beyond
        moved = False
        while len(remote):
            first = remote.segments[0]
            by_time = cfg.retention_ms >= 0 and first.max_timestamp >= 0 and now_ms - first.max_timestamp > cfg.retention_ms
            by_size = cfg.retention_bytes >= 0 and total - first.size >= cfg.retention_bytes
            below_start = first.next_offset <= plog.log_start_offset       # DeleteRecords moved past it
            if not (by_time or by_size or below_start):
                break
            await self._delete_segment(first)
            remote.remove_first()
            total -= first.size
            moved = True
            log.info("%s: deleted remote segment %d..%d (%s)", plog.name, first.base_offset, first.next_offset - 1,
                     "retention.ms" if by_time else "retention.bytes" if by_size else "log start offset")
        if moved:
            plog.advance_log_start(remote.start_offset if remote.start_offset is not None
                                   else plog.segments[0].base_offset)

    async def _delete_segment(self, seg: RemoteSegment) -> None:
        self._aborted.pop(seg.segment_id, None)
        await self._io(self.store.delete, seg.key(META_SUFFIX))          # first: it stops being data
        for suffix in seg.files:
            await self._io(self.store.delete, seg.key(suffix))

    async def _forget(self, tp: TP) -> None:
        """A partition no longer here as a tiered one (its topic deleted, or tiering switched off): when its topic
        is gone its objects are deleted."""
        remote = self.partitions.pop(tp)
        folder = self._folders.pop(tp)
        led = tp in self._leading
        self._leading.discard(tp)
        self._orphans_due.pop(tp, None)
        if led and (self._topic_id(tp[0]) is None or not folder.endswith(f"-{self._topic_id(tp[0])}")):
            for seg in list(remote.segments):
                await self._delete_segment(seg)
            for name in await self._io(self.store.names, folder):
                await self._io(self.store.delete, f"{folder}/{name}")
            log.info("deleted the remote segments of %s-%d (%s), whose topic is gone", tp[0], tp[1], folder)

    # --- reads ----------------------------------------------------------------------------------

    def remote_of(self, plog: PartitionLog) -> RemotePartition | None:
        return self.partitions.get((plog.topic, plog.partition))

    def cached(self, plog: PartitionLog, offset: int, max_bytes: int, min_one: bool) -> bytes | None:
        """Whole batches from the one holding `offset` out of the cache, or None when they must be loaded."""
        remote = self.remote_of(plog)
        seg = remote.find(offset) if remote is not None else None
        if seg is None:
            raise KafkaStorageError(f"offset {offset} of {plog.name} is below the local log and not in remote storage")
        target = max(offset, seg.base_offset)
        for chunk in self.cache.chunks(seg.segment_id):
            if chunk.first_offset <= target < chunk.next_offset:
                start, end = whole_batches(chunk.data, target, max_bytes, min_one)
                if end > start:
                    if chunk.next_offset < seg.next_offset:
                        self._read_ahead(plog, seg, chunk)
                    self.fetch_bytes += end - start
                    return chunk.data[start:end]
        return None

    def _read_ahead(self, plog: PartitionLog, seg: RemoteSegment, chunk: Chunk) -> None:
        key = (seg.segment_id, chunk.next_offset)
        if key in self._loading or any(c.first_offset == chunk.next_offset for c in self.cache.chunks(seg.segment_id)):
            return
        fut = asyncio.ensure_future(self._load_chunk(seg, chunk.next_offset, CHUNK_BYTES, position=chunk.position
                                                     + len(chunk.data)))
        self._loading[key] = fut
        fut.add_done_callback(lambda f: (self._loading.pop(key, None), f.exception()))

    async def load(self, plog: PartitionLog, offset: int, max_bytes: int) -> None:
        """Fetch the chunk holding `offset` into the cache (raises KafkaStorageError when the store fails or is
        slower than remote.fetch.max.wait.ms)."""
        remote = self.remote_of(plog)
        seg = remote.find(offset) if remote is not None else None
        if seg is None:
            return
        target = max(offset, seg.base_offset)
        key = (seg.segment_id, target)
        fut = self._loading.get(key)
        if fut is None:
            fut = asyncio.ensure_future(self._load_chunk(seg, target, max(max_bytes, CHUNK_BYTES)))
            self._loading[key] = fut
            fut.add_done_callback(lambda f: (self._loading.pop(key, None), f.exception()))
        try:
            await asyncio.wait_for(asyncio.shield(fut), self.fetch_wait_s)
        except asyncio.TimeoutError:
            raise KafkaStorageError(f"remote storage did not answer for {plog.name} offset {offset} within "
                                    f"{self.fetch_wait_s * 1000:.0f} ms") from None
        except OSError as e:
            raise KafkaStorageError(f"remote storage failed for {plog.name} offset {offset}: {e}") from None

    def prefetch(self, wanted: list[tuple[PartitionLog, int, int]]) -> None:
        """Load chunks in the background (a fetch answered without them will find them next time)."""
        for plog, offset, nbytes in wanted:
            fut = asyncio.ensure_future(self.load(plog, offset, nbytes))
            fut.add_done_callback(lambda f: f.exception())

    async def _index(self, seg: RemoteSegment, suffix: str) -> bytes:
        key = (seg.segment_id, suffix)
        found = self.cache.get(key)
        if isinstance(found, bytes):
            return found
        data = await self._io(self.store.get_bytes, seg.key(suffix)) if suffix in seg.files else b""
        assert isinstance(data, bytes)
        self.cache.put(key, data)
        return data

    async def _load_chunk(self, seg: RemoteSegment, offset: int, length: int, position: int | None = None) -> None:
        if position is None:
            position = index_position(await self._index(seg, ".index"), seg.base_offset, offset)
        data = await self._read_batches(seg, position, length)
        if not data:
            return
        first = parse_header(data, 0).base_offset
        pos, last_next = 0, first
        while pos < len(data):
            h = parse_header(data, pos)
            last_next = h.last_offset + 1
            pos += h.size
        self.cache.put((seg.segment_id, str(position)), Chunk(seg.segment_id, position, first,
                                                              seg.next_offset if position + len(data) >= seg.size
                                                              else last_next, data))

    async def _read_batches(self, seg: RemoteSegment, position: int, length: int) -> bytes:
        """Whole batches of the segment's .log from `position`, about `length` bytes (at least one batch)."""
        length = min(length, seg.size - position)
        if length <= 0:
            return b""
        data = await self._io(self.store.get_range, seg.key(".log"), position, length)
        assert isinstance(data, bytes)
        end = 0
        while end + HEADER_SIZE <= len(data):
            size = parse_header(data, end).size
            if end + size > len(data):
                break
            end += size
        if end == 0 and len(data) >= HEADER_SIZE:       # one batch larger than `length`: read it whole
            size = parse_header(data, 0).size
            return await self._io(self.store.get_range, seg.key(".log"), position, size)
        return data[:end]

    def aborted_transactions(self, plog: PartitionLog, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [fetch_offset, upper_bound) from the remote segments' `.txnindex`
        (kept in memory since upload or adoption) and the local log's when the search reaches it."""
        remote = self.remote_of(plog)
        out: list[AbortedTxn] = []
        for seg in remote.segments if remote is not None else []:
            if seg.next_offset <= fetch_offset:
                continue
            found, complete = collect_entries(self._aborted.get(seg.segment_id, []), fetch_offset, upper_bound)
            out.extend(found)
            if complete or seg.base_offset >= upper_bound:
                return out
        return out + plog.aborted_transactions(max(fetch_offset, plog.local_log_start_offset), upper_bound)

    async def offset_for_timestamp(self, plog: PartitionLog, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first remote record at or after `timestamp_ms` (None: not in remote storage)."""
        remote = self.remote_of(plog)
        if remote is None:
            return None
        for seg in remote.segments:
            if seg.next_offset <= plog.log_start_offset or seg.max_timestamp < timestamp_ms:
                continue
            times = await self._index(seg, ".timeindex")
            start = seg.base_offset
            for at in range(0, len(times) - len(times) % _TIME_ENTRY_SIZE, _TIME_ENTRY_SIZE):
                ts = int.from_bytes(times[at:at + 8], "big", signed=True)
                if ts >= timestamp_ms:
                    break
                start = seg.base_offset + int.from_bytes(times[at + 8:at + 12], "big", signed=True)
            position = index_position(await self._index(seg, ".index"), seg.base_offset, start)
            while position < seg.size:
                data = await self._read_batches(seg, position, CHUNK_BYTES)
                if not data:
                    break
                pos = 0
                while pos < len(data):
                    h = parse_header(data, pos)
                    if h.last_offset >= plog.log_start_offset and h.max_timestamp >= timestamp_ms and not h.is_control:
                        for off, ts in iter_record_timestamps(data[pos:pos + h.size]):
                            if off >= plog.log_start_offset and ts >= timestamp_ms:
                                return off, ts
                    pos += h.size
                position += len(data)
        return None
