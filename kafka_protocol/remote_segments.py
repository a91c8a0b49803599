"""The segments of one partition in remote storage (KIP-405) as pylog lays them out in the bucket, without I/O.

Shared by the broker, which writes and serves them (broker/tiered), and the Spark source, whose executors read
them straight from the bucket (sparklog/direct_reads.py): one definition of the layout, like the wire protocol.

A segment in remote storage is a set of objects under its partition's folder
`<topic>-<partition>-<topic id>/`: `<base offset, 20 digits>-<segment id>.log` (the local file's bytes),
`.index`, `.timeindex`, `.txnindex` when it has aborted transactions, `.snapshot` (the producer state at
its end) and `.leader-epoch-checkpoint`, and last its metadata, `<...>.meta.json`: a segment is in remote
storage once its metadata object is there (Kafka records the same in `__remote_log_metadata`; here the
metadata lives beside the data, so whichever broker leads later finds it). Objects without metadata are
an upload that did not finish: orphans, deleted, never served.

`RemotePartition` is the ordered list of one partition's remote segments with the lookups the fetch path,
ListOffsets and retention need. Each segment ends beyond the one before it (compaction may leave gaps between
them). Segments may overlap: in a cluster, replicas roll their segments
at different offsets, and a new leader uploads its own segment that straddles the previous leader's last
upload (as Kafka's RemoteLogManager does); an offset both hold is the same record in each. `index_position` finds a batch's byte position in a
downloaded `.index` object, as the local OffsetIndex does in its file. A `.txnindex` object is read with
kafka_protocol.txn_index_format; `open_transaction_starts` reads a `.snapshot` object (the producer state at the
segment's end, in the broker's snapshot JSON: broker/log/producer_state.py).
"""
from __future__ import annotations

import bisect
import json
import re
import struct
from dataclasses import asdict, dataclass, field

META_SUFFIX = ".meta.json"
DATA_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot", ".leader-epoch-checkpoint")
_OBJECT = re.compile(r"^(\d{20})-([0-9a-f]{32})(\.[a-z.-]+)$")
_INDEX_ENTRY = struct.Struct(">ii")


def partition_folder(topic: str, partition: int, topic_id: str) -> str:
    return f"{topic}-{partition}-{topic_id}"


def parse_object_name(name: str) -> tuple[int, str, str] | None:
    """(base offset, segment id, suffix) of a segment's object name, or None for any other name."""
    m = _OBJECT.match(name)
    return (int(m.group(1)), m.group(2), m.group(3)) if m else None


@dataclass(frozen=True)
class RemoteSegment:
    topic: str
    partition: int
    topic_id: str
    segment_id: str            # a new uuid per upload: a second upload of the same offsets is another segment
    base_offset: int
    next_offset: int           # one past its last offset
    size: int                  # bytes of its .log object
    max_timestamp: int         # -1 when no record carries one
    uploaded_ms: int
    leader_epoch: int = -1     # the epoch of its last batch
    files: tuple[str, ...] = field(default=DATA_SUFFIXES)   # the suffixes uploaded (no .txnindex when empty)

    def name(self, suffix: str) -> str:
        return f"{self.base_offset:020d}-{self.segment_id}{suffix}"

    @property
    def folder(self) -> str:
        return partition_folder(self.topic, self.partition, self.topic_id)

    def key(self, suffix: str) -> str:
        """The object's key below the store's prefix."""
        return f"{self.folder}/{self.name(suffix)}"

    def to_json(self) -> bytes:
        return json.dumps({**asdict(self), "files": list(self.files)}, sort_keys=True).encode()

    @staticmethod
    def from_json(data: bytes) -> RemoteSegment:
        d = json.loads(data)
        return RemoteSegment(str(d["topic"]), int(d["partition"]), str(d["topic_id"]), str(d["segment_id"]),
                             int(d["base_offset"]), int(d["next_offset"]), int(d["size"]), int(d["max_timestamp"]),
                             int(d["uploaded_ms"]), int(d.get("leader_epoch", -1)), tuple(d["files"]))


class RemotePartition:
    """The remote segments of one partition, ordered by base offset, each ending beyond the one before."""

    def __init__(self, segments: list[RemoteSegment] | None = None) -> None:
        self.segments: list[RemoteSegment] = []
        for seg in sorted(segments or [], key=lambda s: (s.base_offset, s.uploaded_ms)):
            self.add(seg)

    @staticmethod
    def from_listing(segments: list[RemoteSegment]) -> tuple[RemotePartition, list[RemoteSegment]]:
        """The partition from every metadata object found, and the segments to delete: one whose offsets other
        segments already hold (an upload repeated after a crash between the metadata write and the broker noting
        it, or two brokers that both believed they led)."""
        kept: list[RemoteSegment] = []
        dropped: list[RemoteSegment] = []
        for seg in sorted(segments, key=lambda s: (s.base_offset, -s.next_offset, s.uploaded_ms, s.segment_id)):
            if kept and seg.next_offset <= kept[-1].next_offset:
                dropped.append(seg)
            else:
                kept.append(seg)
        return RemotePartition(kept), dropped

    def add(self, seg: RemoteSegment) -> None:
        last = self.segments[-1] if self.segments else None
        if last is not None and not (seg.base_offset >= last.base_offset and seg.next_offset > last.next_offset):
            raise ValueError(f"remote segment {seg.base_offset}..{seg.next_offset} does not extend the last one "
                             f"({self.segments[-1].base_offset}..{self.segments[-1].next_offset})")
        self.segments.append(seg)

    def remove_first(self) -> RemoteSegment:
        return self.segments.pop(0)

    def __len__(self) -> int:
        return len(self.segments)

    @property
    def start_offset(self) -> int | None:
        """The first offset in remote storage (None: nothing there)."""
        return self.segments[0].base_offset if self.segments else None

    @property
    def next_offset(self) -> int | None:
        """One past the last offset in remote storage: where the next upload starts (None: nothing there)."""
        return self.segments[-1].next_offset if self.segments else None

    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def find(self, offset: int) -> RemoteSegment | None:
        """The segment holding `offset`, or the first one after it (compaction leaves gaps); None past the end."""
        i = bisect.bisect_right([s.next_offset for s in self.segments], offset)
        return self.segments[i] if i < len(self.segments) else None

    def first_with_timestamp(self, timestamp_ms: int) -> RemoteSegment | None:
        """The first segment holding a record with a timestamp at or after `timestamp_ms`."""
        return next((s for s in self.segments if s.max_timestamp >= timestamp_ms), None)


def index_position(index: bytes, base_offset: int, offset: int) -> int:
    """The byte position in a segment's .log to read from for `offset`: that of the last index entry at or below
    it (0 before the first entry), as OffsetIndex.lookup. Entries are (offset - base, position), 8 bytes each."""
    target = offset - base_offset
    lo, hi = 0, len(index) // _INDEX_ENTRY.size
    position = 0
    while lo < hi:
        mid = (lo + hi) // 2
        rel, pos = _INDEX_ENTRY.unpack_from(index, mid * _INDEX_ENTRY.size)
        if rel <= target:
            position = pos
            lo = mid + 1
        else:
            hi = mid
    return position



def open_transaction_starts(snapshot: bytes) -> list[int]:
    """The first offsets of the transactions still open at a producer snapshot's offset."""
    doc = json.loads(snapshot)
    return [int(p["txn_first_offset"]) for p in doc.get("producers", []) if p.get("txn_first_offset") is not None]
