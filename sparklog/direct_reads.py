"""Executor side: offsets of a tiered partition read straight from the object store (issue 30, KIP-405 direct reads).

With the source option `remoteStorage` (the brokers' `remote.log.storage.url`), a task whose next offset lies in a
remote segment reads that segment's bytes from the bucket itself (one ranged GET of up to CHUNK_BYTES, from the
batch the segment's `.index` object points at) and hands them to the same decoder, validation and read_committed
filtering as a Fetch answer; a reprocess of old offsets then scales with the executors and the store, not with the
brokers. The layout is kafka_protocol.remote_segments (the broker writes it).

The broker stays the authority on what exists: a segment is used only once its metadata object is listed (the
broker writes it after the segment's data, and deletes it first), and only for the topic id the broker names
(a deleted topic's folder is never read). Anything else goes through the broker's Fetch as before: offsets above
the remote segments, a gap between them, a batch larger than a chunk, a store that fails, and, under
read_committed, a chunk whose aborted transactions the remote `.txnindex` objects cannot settle (Kafka's rule: the
search ends at an entry whose last stable offset reaches the chunk's end; a transaction whose abort marker is
still only on the brokers' disks would otherwise leak).

Per executor process: one store client per URL, each partition folder's listing for LISTING_TTL_S, and the small
`.index` and `.txnindex` objects by segment id (segments are immutable).
"""
from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

from kafka_protocol.remote_segments import (
    META_SUFFIX,
    RemotePartition,
    RemoteSegment,
    index_position,
    open_transaction_starts,
    parse_object_name,
    partition_folder,
)
from kafka_protocol.s3_settings import s3_filesystem_args
from kafka_protocol.record_batch import HEADER_SIZE, parse_header, whole_batches_length
from kafka_protocol.txn_index_format import AbortedTxn, collect_entries, parse_entries

if TYPE_CHECKING:
    from pyarrow.fs import FileSystem

log = logging.getLogger(__name__)

CHUNK_BYTES = 8 * 1024 * 1024     # one ranged read of a remote .log
LISTING_TTL_S = 5.0
_INDEX_CACHE_ENTRIES = 512


@dataclass(frozen=True)
class DirectChunk:
    """Whole batches read from the bucket, from the batch holding the asked offset; `next_offset` is one past them."""

    records: memoryview
    next_offset: int
    aborted_transactions: list[tuple[int, int]]     # (producer id, first offset), for read_committed


def open_store(url: str, env: Mapping[str, str]) -> tuple[FileSystem, str]:
    """pyarrow's file system and root for `url`: s3://bucket/prefix with the standard AWS variables in `env` (the
    driver's, as the broker reads its own), or a local directory."""
    from pyarrow import fs

    if not url.startswith("s3://"):
        if "://" in url and not url.startswith("file://"):
            raise ValueError(f"remoteStorage must be s3://bucket/prefix or a directory, got {url!r}")
        return fs.LocalFileSystem(), os.path.abspath(url.removeprefix("file://"))
    kwargs, root = s3_filesystem_args(url, env)
    return fs.S3FileSystem(**kwargs), root


def _next_offset(data: bytes, length: int) -> int:
    """One past the last offset of the whole batches in data[:length]."""
    pos, last = 0, 0
    while pos < length:
        h = parse_header(data, pos)
        last, pos = h.last_offset, pos + h.size
    return last + 1


class DirectReads:
    """The remote segments of one store, as one executor process reads them."""

    def __init__(self, url: str, env: Mapping[str, str]) -> None:
        self.url = url
        self.fs, self.root = open_store(url, env)
        self._listings: dict[str, tuple[float, RemotePartition]] = {}
        self._small: dict[tuple[str, str], bytes] = {}       # (segment id, suffix) -> .index / .txnindex bytes
        self._txns: dict[str, list[AbortedTxn]] = {}
        self._lock = threading.Lock()
        self.chunks = 0             # chunks served from the bucket (tests, logs)

    def _get(self, key: str) -> bytes:
        with self.fs.open_input_stream(f"{self.root}/{key}") as f:
            return bytes(f.read())

    def _range(self, key: str, start: int, length: int) -> bytes:
        with self.fs.open_input_file(f"{self.root}/{key}") as f:
            return bytes(f.read_at(length, start))

    def segments(self, topic: str, partition: int, topic_id: str) -> RemotePartition:
        """The partition's committed remote segments (listed again after LISTING_TTL_S)."""
        from pyarrow import fs

        folder = partition_folder(topic, partition, topic_id)
        now = time.monotonic()
        with self._lock:
            cached = self._listings.get(folder)
        if cached is not None and now - cached[0] < LISTING_TTL_S:
            return cached[1]
        known = {s.segment_id: s for s in cached[1].segments} if cached else {}
        infos = self.fs.get_file_info(fs.FileSelector(f"{self.root}/{folder}", allow_not_found=True))
        found = []
        for info in infos:
            parsed = parse_object_name(info.base_name)
            if parsed is None or parsed[2] != META_SUFFIX:
                continue
            seg = known.get(parsed[1]) or RemoteSegment.from_json(self._get(f"{folder}/{info.base_name}"))
            found.append(seg)
        remote, _ = RemotePartition.from_listing(found)
        with self._lock:
            self._listings[folder] = (now, remote)
        return remote

    def _index(self, seg: RemoteSegment) -> bytes:
        key = (seg.segment_id, ".index")
        data = self._small.get(key)
        if data is None:
            data = self._get(seg.key(".index"))
            with self._lock:
                if len(self._small) >= _INDEX_CACHE_ENTRIES:
                    self._small.clear()
                self._small[key] = data
        return data

    def _aborted_in(self, seg: RemoteSegment) -> list[AbortedTxn]:
        if ".txnindex" not in seg.files:
            return []
        found = self._txns.get(seg.segment_id)
        if found is None:
            found = self._txns[seg.segment_id] = parse_entries(self._get(seg.key(".txnindex")))
        return found

    def _aborted(self, remote: RemotePartition, seg: RemoteSegment, offset: int,
                 upper_bound: int) -> list[tuple[int, int]] | None:
        """The aborted transactions overlapping [offset, upper_bound), searched from `seg` on; None when the remote
        segments cannot settle it. Settled: an entry's last stable offset reaches `upper_bound` (Kafka's rule), or
        no transaction begun below `upper_bound` is still open where the remote segments end (the last one's
        producer snapshot), so every abort that concerns the range has its entry in them."""
        out: list[tuple[int, int]] = []
        for later in remote.segments[remote.segments.index(seg):]:
            found, complete = collect_entries(self._aborted_in(later), offset, upper_bound)
            out.extend((e.producer_id, e.first_offset) for e in found)
            if complete:
                return out
        last = remote.segments[-1]
        if ".snapshot" not in last.files:
            return None
        if any(first < upper_bound for first in open_transaction_starts(self._snapshot(last))):
            return None
        return out

    def _snapshot(self, seg: RemoteSegment) -> bytes:
        key = (seg.segment_id, ".snapshot")
        data = self._small.get(key)
        if data is None:
            data = self._small[key] = self._get(seg.key(".snapshot"))
        return data

    def read(self, topic: str, partition: int, topic_id: str, offset: int, read_committed: bool) -> DirectChunk | None:
        """Whole batches from the one holding `offset`, or None when the broker must answer for it."""
        remote = self.segments(topic, partition, topic_id)
        seg = remote.find(offset)
        if seg is None or seg.base_offset > offset:       # above the remote segments, or in a gap
            return None
        position = index_position(self._index(seg), seg.base_offset, offset)
        data = self._range(seg.key(".log"), position, min(CHUNK_BYTES, seg.size - position))
        length = whole_batches_length(data)
        if length < HEADER_SIZE:                          # one batch larger than a chunk
            return None
        next_offset = _next_offset(data, length)
        aborted: list[tuple[int, int]] = []
        if read_committed:
            found = self._aborted(remote, seg, offset, next_offset)
            if found is None:
                return None
            aborted = found
        self.chunks += 1
        return DirectChunk(memoryview(data)[:length], next_offset, aborted)


_STORES: dict[tuple[str, tuple[tuple[str, str], ...]], DirectReads] = {}
_STORES_LOCK = threading.Lock()


def direct_reads(url: str, env: tuple[tuple[str, str], ...]) -> DirectReads:
    """This process's reader of the store at `url` with the AWS variables `env` (tasks of one executor share its
    caches)."""
    with _STORES_LOCK:
        found = _STORES.get((url, env))
        if found is None:
            found = _STORES[(url, env)] = DirectReads(url, dict(env))
        return found
