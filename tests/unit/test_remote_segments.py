"""The remote segments of a partition (broker/tiered/remote_segment.py) and the cutting of whole batches from a
remote chunk (broker/tiered/remote_log_manager.whole_batches): pure, fed values and bytes."""
from __future__ import annotations

import struct

import pytest

from broker.tiered.remote_log_manager import ChunkCache, whole_batches
from kafka_protocol.remote_segments import RemotePartition, RemoteSegment, index_position, parse_object_name
from kafka_protocol.record_builder import Record, encode_batch


def _seg(base: int, end: int, uploaded: int = 0, sid: str = "") -> RemoteSegment:
    return RemoteSegment("t", 0, "id", sid or f"{base:032x}", base, end, 100, 1000 + base, uploaded)


def test_metadata_round_trips_and_names_its_objects():
    seg = _seg(308, 616)
    assert RemoteSegment.from_json(seg.to_json()) == seg
    assert seg.key(".log") == f"t-0-id/{308:020d}-{seg.segment_id}.log"
    assert parse_object_name(seg.name(".meta.json")) == (308, seg.segment_id, ".meta.json")
    assert parse_object_name("notes.txt") is None


def test_a_repeated_upload_of_the_same_offsets_is_dropped_keeping_the_first():
    first, again, next_ = _seg(0, 100, uploaded=1, sid="a" * 32), _seg(0, 100, uploaded=2, sid="b" * 32), _seg(100, 200)
    remote, dropped = RemotePartition.from_listing([next_, again, first])
    assert [s.segment_id for s in remote.segments] == ["a" * 32, next_.segment_id] and dropped == [again]
    assert (remote.start_offset, remote.next_offset, remote.size_in_bytes()) == (0, 200, 200)
    with pytest.raises(ValueError, match="does not extend"):
        remote.add(_seg(150, 180))                                # inside what is there: nothing new


def test_a_new_leaders_straddling_upload_extends_the_partition_and_covered_uploads_are_dropped():
    """Replicas roll at different offsets: a new leader's first upload starts inside the last segment the old
    leader uploaded. It is kept (it brings offsets 200..259); an upload entirely inside others is dropped."""
    old_a, old_b, new = _seg(0, 100), _seg(100, 200), _seg(150, 260)
    inside = _seg(120, 190, sid="c" * 32)
    remote, dropped = RemotePartition.from_listing([new, inside, old_b, old_a])
    assert [(s.base_offset, s.next_offset) for s in remote.segments] == [(0, 100), (100, 200), (150, 260)]
    assert dropped == [inside]
    assert remote.find(170).base_offset == 100 and remote.find(230).base_offset == 150
    remote.add(_seg(260, 300))
    assert remote.next_offset == 300
    remote.remove_first()
    remote.remove_first()
    assert remote.start_offset == 150, "the straddling segment still holds 150..199"


def test_lookups_by_offset_and_timestamp():
    remote = RemotePartition([_seg(0, 100), _seg(120, 200)])      # a gap compaction could leave
    assert remote.find(0).base_offset == 0 and remote.find(99).base_offset == 0
    assert remote.find(100).base_offset == 120, "an offset in a gap reads from the next segment"
    assert remote.find(200) is None
    assert remote.first_with_timestamp(1050).base_offset == 120 and remote.first_with_timestamp(5000) is None


def test_index_position_is_the_last_entry_at_or_below_the_offset():
    index = b"".join(struct.pack(">ii", rel, pos) for rel, pos in ((10, 4096), (20, 8192), (30, 12288)))
    assert [index_position(index, 1000, o) for o in (1000, 1009, 1010, 1025, 1100)] == [0, 0, 4096, 8192, 12288]
    assert index_position(b"", 0, 5) == 0


def _batches(*counts: int, start: int = 0) -> tuple[bytes, list[tuple[int, int]]]:
    out, spans, offset = b"", [], start
    for n in counts:
        b = encode_batch([Record(offset + i, 1000, None, b"v" * 50) for i in range(n)])
        spans.append((len(out), len(out) + len(b)))
        out += b
        offset += n
    return out, spans


def test_whole_batches_start_at_the_batch_holding_the_offset_and_never_cut_one():
    data, spans = _batches(5, 5, 5)
    assert whole_batches(data, 7, 10_000, True) == (spans[1][0], spans[2][1])
    assert whole_batches(data, 0, spans[1][1] + 3, True) == (0, spans[1][1]), "no partial batch at the end"
    assert whole_batches(data, 0, 1, True) == (0, spans[0][1]), "at least one whole batch (KIP-74)"
    assert whole_batches(data, 0, 1, False) == (0, 0)
    assert whole_batches(data, 15, 10_000, True) == (0, 0), "past the chunk"


def test_the_cache_keeps_at_most_its_capacity_least_recent_out_first():
    cache = ChunkCache(10)
    cache.put(("a",), b"12345")
    cache.put(("b",), b"12345")
    assert cache.get(("a",)) == b"12345"          # a is now the most recent
    cache.put(("c",), b"123")
    assert cache.get(("b",)) is None and cache.get(("a",)) is not None and cache.size <= 10
