"""PartitionLog's storage side of replication: leader epochs, follower appends, the high
watermark, truncation (Kafka's UnifiedLog semantics)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.batches import encode_batch, producer_batch
from broker.config import TopicConfig
from kafka_protocol.errors import (
    CorruptRecordError,
    DuplicateSequenceError,
    OffsetOutOfRangeError,
    UnexpectedAppendOffsetError,
)
from broker.log import FetchSlice, PartitionLog
from kafka_protocol.record_batch import check_headers, parse_header

NOW_MS = 1_700_000_000_000
PID = 4242


class Clock:
    def __init__(self, ms: int = NOW_MS) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


def open_log(path: Path, *, recover: bool = False, replicated: bool = False, **cfg) -> PartitionLog:
    return PartitionLog(path / "t-0", "t", 0, TopicConfig.default(**cfg), recover=recover, clock=Clock(),
                        replicated=replicated)


def batches_in(s: FetchSlice) -> list[tuple[int, int, int]]:
    """(base offset, last offset, leader epoch) of each batch of a slice, which holds whole batches only."""
    data = s.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        h = parse_header(data, pos)
        out.append((h.base_offset, h.last_offset, h.partition_leader_epoch))
        pos += h.size
    assert pos == len(data)
    return out


def offsets_in(s: FetchSlice) -> list[int]:
    return [o for base, last, _ in batches_in(s) for o in range(base, last + 1)]


def read_all(plog: PartitionLog, offset: int | None = None, **kw) -> list[int]:
    """Every offset from `offset` (the log start) to the end, reading slice after slice."""
    out: list[int] = []
    offset = plog.log_start_offset if offset is None else offset
    while True:
        got = offsets_in(plog.read(offset, 1_000_000, **kw))
        if not got:
            return out
        out += got
        offset = got[-1] + 1


def leader_batch(base: int, n: int, epoch: int, **kw) -> bytes:
    """A batch as a leader stored it: offsets from `base`, stamped with `epoch`."""
    return encode_batch([b"r%d" % (base + i) for i in range(n)], base_offset=base, partition_leader_epoch=epoch, **kw)


def fill(plog: PartitionLog, sizes: list[int], epoch: int | None = None) -> None:
    for n in sizes:
        plog.append(encode_batch([b"x%d" % i for i in range(n)]), leader_epoch=epoch)


# --- leader epochs on append --------------------------------------------------------------------

def test_append_with_a_leader_epoch_stamps_every_batch_and_records_the_epoch_start(tmp_path):
    plog = open_log(tmp_path, replicated=True)
    plog.append(encode_batch([b"a"] * 3) + encode_batch([b"b"] * 2), leader_epoch=3)
    plog.append(encode_batch([b"c"]), leader_epoch=3)
    plog.append(encode_batch([b"d"] * 2), leader_epoch=5)
    assert batches_in(plog.read(0, 100_000)) == [(0, 2, 3), (3, 4, 3), (5, 5, 3), (6, 7, 5)]
    assert plog.leader_epochs.entries == [(3, 0), (5, 6)]
    check_headers(plog.read(0, 100_000).read_bytes(), 1_000_000)     # CRCs still hold
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_bytes() == b"0\n2\n3 0\n5 6\n"


def test_append_without_a_leader_epoch_is_the_one_broker_default(tmp_path):
    plog = open_log(tmp_path)
    fill(plog, [2, 3])
    assert [e for _, _, e in batches_in(plog.read(0, 100_000))] == [0, 0]
    assert plog.leader_epochs.entries == []
    assert plog.high_watermark == plog.log_end_offset == 5
    plog.close()
    assert sorted(p.name for p in (tmp_path / "t-0").iterdir() if "checkpoint" in p.name) == []


def test_the_epoch_cache_survives_a_restart_and_recovery_cuts_it_to_the_log(tmp_path):
    plog = open_log(tmp_path, replicated=True)
    fill(plog, [3], epoch=1)
    fill(plog, [2], epoch=2)
    plog.close()
    assert open_log(tmp_path).leader_epochs.entries == [(1, 0), (2, 3)]
    log_file = tmp_path / "t-0" / "00000000000000000000.log"
    with open(log_file, "r+b") as f:          # a crash tore the last batch
        f.truncate(os.path.getsize(log_file) - 5)
    reopened = open_log(tmp_path, recover=True)
    assert reopened.log_end_offset == 3
    assert reopened.leader_epochs.entries == [(1, 0)]


def test_a_damaged_epoch_checkpoint_is_rebuilt_from_the_batches(tmp_path):
    plog = open_log(tmp_path, replicated=True)
    fill(plog, [3], epoch=1)
    fill(plog, [2], epoch=4)
    plog.close()
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_bytes(b"0\n7\ngarbage")
    assert open_log(tmp_path).leader_epochs.entries == [(1, 0), (4, 3)]


# --- follower appends -----------------------------------------------------------------------------

def test_a_follower_keeps_the_leaders_offsets_epochs_and_bytes(tmp_path):
    leader = open_log(tmp_path / "leader", replicated=True)
    fill(leader, [3, 1], epoch=2)
    fill(leader, [4], epoch=7)
    copied = leader.read(0, 100_000).read_bytes()
    follower = open_log(tmp_path / "follower", replicated=True)
    result = follower.append_as_follower(copied)
    assert (result.base_offset, result.last_offset, result.record_count) == (0, 7, 8)
    assert follower.log_end_offset == 8
    assert follower.read(0, 100_000).read_bytes() == copied
    assert follower.leader_epochs.entries == [(2, 0), (7, 4)]


def test_a_follower_append_below_its_log_end_is_refused_naming_the_offsets(tmp_path):
    follower = open_log(tmp_path, replicated=True)
    follower.append_as_follower(leader_batch(0, 5, 1))
    with pytest.raises(UnexpectedAppendOffsetError, match=r"t-0: batch at offset 3 .*log end offset 5") as e:
        follower.append_as_follower(leader_batch(3, 4, 1))
    assert (e.value.first_offset, e.value.log_end_offset) == (3, 5)
    assert follower.log_end_offset == 5


def test_overlapping_batches_in_one_follower_append_are_refused_and_nothing_is_written(tmp_path):
    follower = open_log(tmp_path, replicated=True)
    with pytest.raises(UnexpectedAppendOffsetError, match="batch at offset 2 .*previous batch's next offset 3"):
        follower.append_as_follower(leader_batch(0, 3, 1) + leader_batch(2, 2, 1))
    assert (follower.log_end_offset, follower.size_in_bytes(), follower.leader_epochs.entries) == (0, 0, [])


def test_a_follower_accepts_a_gap_compaction_left_on_the_leader(tmp_path):
    follower = open_log(tmp_path, replicated=True)
    follower.append_as_follower(leader_batch(0, 2, 1) + leader_batch(5, 2, 1))
    assert follower.log_end_offset == 7
    assert offsets_in(follower.read(0, 100_000)) == [0, 1, 5, 6]
    assert offsets_in(follower.read(3, 100_000)) == [5, 6]


def test_a_partial_trailing_batch_is_ignored(tmp_path):
    follower = open_log(tmp_path, replicated=True)
    whole = leader_batch(0, 2, 1)
    result = follower.append_as_follower(whole + leader_batch(2, 3, 1)[:40])
    assert (result.last_offset, result.record_count, follower.log_end_offset) == (1, 2, 2)
    nothing = follower.append_as_follower(leader_batch(2, 3, 1)[:70])
    assert (nothing.base_offset, nothing.record_count, follower.log_end_offset) == (2, 0, 2)
    assert follower.read(0, 100_000).read_bytes() == whole


def test_a_follower_append_with_a_bad_crc_is_refused(tmp_path):
    follower = open_log(tmp_path, replicated=True)
    bad = bytearray(leader_batch(0, 2, 1))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC32C"):
        follower.append_as_follower(bytes(bad))
    assert follower.log_end_offset == 0


def test_a_follower_carries_producer_state_so_a_new_leader_detects_duplicates(tmp_path):
    leader = open_log(tmp_path / "leader", replicated=True)
    leader.append(encode_batch([b"a"]), leader_epoch=1)
    first = leader.append(producer_batch(PID, 0, 0, n=3), leader_epoch=1)
    leader.append(producer_batch(PID, 0, 3, n=2), leader_epoch=1)
    follower = open_log(tmp_path / "follower", replicated=True)
    follower.append_as_follower(leader.read(0, 100_000).read_bytes())
    # the follower becomes the leader; the producer retries its first batch
    with pytest.raises(DuplicateSequenceError) as e:
        follower.append(producer_batch(PID, 0, 0, n=3), leader_epoch=2)
    assert e.value.base_offset == first.base_offset == 1
    assert follower.append(producer_batch(PID, 0, 5), leader_epoch=2).base_offset == 6


def test_a_follower_applies_producer_batches_without_sequence_checks(tmp_path):
    follower = open_log(tmp_path, replicated=True)
    follower.append_as_follower(producer_batch(PID, 0, 7, n=2, base_offset=0, partition_leader_epoch=1))
    follower.append_as_follower(producer_batch(PID, 0, 20, base_offset=2, partition_leader_epoch=1))
    assert follower.log_end_offset == 3
    assert follower.producers.producers[PID].last_seq == 20


def test_a_follower_append_rolls_segments_and_honours_the_flush_policy(tmp_path):
    follower = open_log(tmp_path, replicated=True, segment_bytes=250, flush_messages=1)
    data = b"".join(leader_batch(i * 2, 2, 1) for i in range(10))
    follower.append_as_follower(data)
    assert len(follower.segments) > 3
    assert all(seg.size <= 250 for seg in follower.segments)
    assert [seg.base_offset for seg in follower.segments] == sorted({seg.base_offset for seg in follower.segments})
    assert not any(seg.dirty for seg in follower.segments)
    assert read_all(follower) == list(range(20))
    follower.close()
    assert read_all(open_log(tmp_path, recover=True)) == list(range(20))


# --- high watermark --------------------------------------------------------------------------------

def test_without_replication_the_high_watermark_is_the_log_end(tmp_path):
    plog = open_log(tmp_path)
    fill(plog, [3])
    assert plog.update_high_watermark(1) == 3
    assert plog.high_watermark == 3


def test_with_replication_only_update_high_watermark_moves_it_forward_within_the_log(tmp_path):
    plog = open_log(tmp_path, replicated=True)
    fill(plog, [3, 2, 4], epoch=0)
    assert plog.high_watermark == 0
    assert plog.update_high_watermark(5) == 5
    assert plog.update_high_watermark(2) == 5, "never backwards"
    assert plog.update_high_watermark(100) == 9, "clamped to the log end"
    plog.delete_records_before(3)
    assert plog.update_high_watermark(0) == 9


def test_reads_bounded_by_the_high_watermark_return_whole_batches_below_it(tmp_path):
    plog = open_log(tmp_path, replicated=True)
    fill(plog, [3, 2, 4], epoch=0)                      # batches 0-2, 3-4, 5-8
    plog.update_high_watermark(5)
    hw = plog.high_watermark
    assert offsets_in(plog.read(0, 100_000, max_offset=hw)) == [0, 1, 2, 3, 4]
    assert offsets_in(plog.read(3, 100_000, max_offset=hw)) == [3, 4]
    assert offsets_in(plog.read(5, 100_000, max_offset=hw)) == [], "between HW and LEO: in range, empty"
    assert offsets_in(plog.read(9, 100_000, max_offset=hw)) == []
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(10, 100_000, max_offset=hw)
    assert offsets_in(plog.read(0, 100_000, max_offset=4)) == [0, 1, 2], "a batch reaching the HW waits"
    assert offsets_in(plog.read(0, 100_000)) == list(range(9)), "a replica's fetch reads to the end"


def test_high_watermark_bounds_reads_across_segments(tmp_path):
    plog = open_log(tmp_path, replicated=True, segment_bytes=200)
    for _ in range(8):
        fill(plog, [2], epoch=0)
    assert len(plog.segments) > 2
    plog.update_high_watermark(9)
    assert read_all(plog, max_offset=plog.high_watermark) == list(range(8))
    plog.update_high_watermark(10)
    assert read_all(plog, max_offset=plog.high_watermark) == list(range(10))


def test_the_high_watermark_survives_a_restart_and_is_clamped_to_the_log(tmp_path):
    plog = open_log(tmp_path, replicated=True)
    fill(plog, [3, 3], epoch=0)
    plog.update_high_watermark(3)
    plog.close()
    assert (tmp_path / "t-0" / "high-watermark.checkpoint").read_text() == "3\n"
    assert open_log(tmp_path, replicated=True).high_watermark == 3
    (tmp_path / "t-0" / "high-watermark.checkpoint").write_text("99\n")
    assert open_log(tmp_path, replicated=True).high_watermark == 6
    late = open_log(tmp_path)
    assert late.high_watermark == 6
    (tmp_path / "t-0" / "high-watermark.checkpoint").write_text("2\n")
    late.replicated = True                    # the broker learns the partition is replicated
    assert late.high_watermark == 2


def test_checkpoint_high_watermark_writes_only_changes(tmp_path):
    plog = open_log(tmp_path, replicated=True)
    fill(plog, [3], epoch=0)
    path = tmp_path / "t-0" / "high-watermark.checkpoint"
    plog.update_high_watermark(2)
    plog.checkpoint_high_watermark()
    assert path.read_text() == "2\n"
    path.unlink()
    plog.checkpoint_high_watermark()
    assert not path.exists()
    plog.update_high_watermark(3)
    plog.flush()
    assert path.read_text() == "3\n"


def test_delete_records_stops_at_the_high_watermark(tmp_path):
    plog = open_log(tmp_path, replicated=True)
    fill(plog, [3, 3], epoch=0)
    plog.update_high_watermark(3)
    with pytest.raises(OffsetOutOfRangeError, match="high watermark is 3"):
        plog.delete_records_before(4)
    assert plog.delete_records_before(-1) == 3


def test_retention_keeps_segments_above_the_high_watermark(tmp_path):
    plog = open_log(tmp_path, replicated=True, segment_bytes=200, retention_ms=0, file_delete_delay_ms=0)
    for _ in range(6):
        fill(plog, [2], epoch=0)
    plog.update_high_watermark(4)
    plog.apply_retention(NOW_MS + 10_000)
    assert plog.segments[0].base_offset <= 4 and plog.log_start_offset <= 4
    plog.update_high_watermark(12)
    plog.apply_retention(NOW_MS + 10_000)
    assert len(plog.segments) == 1


# --- truncate_to ------------------------------------------------------------------------------------

def test_truncate_at_a_batch_boundary(tmp_path):
    plog = open_log(tmp_path, replicated=True)
    fill(plog, [3, 2], epoch=1)
    fill(plog, [5], epoch=2)
    plog.update_high_watermark(10)
    assert plog.truncate_to(5) == 5
    assert (plog.log_end_offset, plog.high_watermark) == (5, 5)
    assert plog.leader_epochs.entries == [(1, 0)]
    assert offsets_in(plog.read(0, 100_000)) == [0, 1, 2, 3, 4]
    assert plog.append(encode_batch([b"n"] * 2), leader_epoch=3).base_offset == 5
    assert plog.leader_epochs.entries == [(1, 0), (3, 5)]
    assert batches_in(plog.read(0, 100_000))[-1] == (5, 6, 3)


def test_truncate_inside_a_batch_removes_the_whole_batch(tmp_path):
    plog = open_log(tmp_path, replicated=True)
    fill(plog, [3, 4, 2], epoch=1)                      # batches 0-2, 3-6, 7-8
    assert plog.truncate_to(5) == 3
    assert offsets_in(plog.read(0, 100_000)) == [0, 1, 2]
    assert plog.append(encode_batch([b"n"])).base_offset == 3


def test_truncate_at_or_past_the_end_changes_nothing(tmp_path):
    plog = open_log(tmp_path, replicated=True)
    fill(plog, [3], epoch=1)
    size = plog.size_in_bytes()
    assert plog.truncate_to(3) == 3 and plog.truncate_to(50) == 3
    assert plog.size_in_bytes() == size


def test_truncate_across_segments_deletes_later_ones_and_cuts_the_holder(tmp_path):
    plog = open_log(tmp_path, replicated=True, segment_bytes=300, index_interval_bytes=1)
    for epoch in range(1, 8):
        fill(plog, [3], epoch=epoch)                    # epoch e starts at 3(e-1)
    assert len(plog.segments) >= 3
    plog.update_high_watermark(21)
    holder = plog.segments.floor(13)
    assert holder.base_offset < 12 and plog.segments.active is not holder
    later = [seg for seg in plog.segments if seg.base_offset > 13]
    assert plog.truncate_to(13) == 12
    assert plog.segments.active is holder and all(seg.deleted for seg in later)
    assert not any((tmp_path / "t-0" / seg.log_path.name.removesuffix(".deleted")).exists() for seg in later)
    assert plog.leader_epochs.entries == [(e, 3 * (e - 1)) for e in range(1, 5)]
    assert plog.high_watermark == 12
    assert read_all(plog) == list(range(12))
    assert holder.find_batch(11).base_offset == 9 and holder.find_batch(12) is None, "the index was cut too"
    plog.append(encode_batch([b"a", b"b"]), leader_epoch=9)
    assert read_all(plog) == list(range(14))
    plog.close()
    for recover in (False, True):
        again = open_log(tmp_path, recover=recover, replicated=True)
        assert (again.log_end_offset, read_all(again)) == (14, list(range(14)))
        assert again.leader_epochs.entries == [(1, 0), (2, 3), (3, 6), (4, 9), (9, 12)]
        again.close()


def test_truncate_to_zero_keeps_one_empty_segment(tmp_path):
    plog = open_log(tmp_path, replicated=True, segment_bytes=200)
    for _ in range(5):
        fill(plog, [2], epoch=1)
    plog.update_high_watermark(6)
    assert plog.truncate_to(0) == 0
    assert [(seg.base_offset, seg.size) for seg in plog.segments] == [(0, 0)]
    assert (plog.log_start_offset, plog.high_watermark, plog.leader_epochs.entries) == (0, 0, [])
    assert offsets_in(plog.read(0, 100_000)) == []
    fill(plog, [3], epoch=2)
    assert read_all(plog) == [0, 1, 2]
    assert plog.leader_epochs.entries == [(2, 0)]


def test_truncate_below_the_first_segment_starts_the_log_there(tmp_path):
    plog = open_log(tmp_path, replicated=True)
    plog.truncate_fully_and_start_at(100)
    plog.append_as_follower(leader_batch(100, 5, 1))
    assert plog.truncate_to(50) == 50
    assert (plog.log_start_offset, plog.log_end_offset, len(plog.segments)) == (50, 50, 1)


def test_truncate_rebuilds_producer_state_for_the_new_end(tmp_path):
    plog = open_log(tmp_path, replicated=True, segment_bytes=200)
    for seq in range(6):
        plog.append(producer_batch(PID, 0, seq), leader_epoch=1)   # offset == seq
    snapshots = plog.producers.snapshot_offsets()
    assert snapshots and max(snapshots) > 3, "a roll took a snapshot above the truncation point"
    plog.truncate_to(3)
    assert all(s <= 3 for s in plog.producers.snapshot_offsets())
    assert plog.producers.producers[PID].last_seq == 2
    with pytest.raises(DuplicateSequenceError):
        plog.append(producer_batch(PID, 0, 2), leader_epoch=2)
    assert plog.append(producer_batch(PID, 0, 3), leader_epoch=2).base_offset == 3


def test_truncate_keeps_timestamp_lookups_right(tmp_path):
    plog = open_log(tmp_path, replicated=True, index_interval_bytes=1)
    for i in range(6):
        plog.append(encode_batch([b"x"], timestamps=[1000 * (i + 1)]), leader_epoch=1)
    plog.truncate_to(3)
    assert plog.offset_for_timestamp(2500) == (2, 3000)
    assert plog.offset_for_timestamp(3500) is None
    assert plog.max_timestamp() == (3000, 2)


# --- truncate_fully_and_start_at ------------------------------------------------------------------

def test_truncate_fully_and_start_at_empties_the_log_at_any_offset(tmp_path):
    plog = open_log(tmp_path, replicated=True, segment_bytes=200)
    for seq in range(5):
        plog.append(producer_batch(PID, 0, seq), leader_epoch=1)
    plog.update_high_watermark(3)
    plog.truncate_fully_and_start_at(1000)
    assert (plog.log_start_offset, plog.high_watermark, plog.log_end_offset) == (1000, 1000, 1000)
    assert [(seg.base_offset, seg.size) for seg in plog.segments] == [(1000, 0)]
    assert (plog.leader_epochs.entries, plog.producers.producers, plog.producers.snapshot_offsets()) == ([], {}, [])
    assert offsets_in(plog.read(1000, 100_000)) == []
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(0, 100_000)
    plog.append_as_follower(producer_batch(PID, 0, 17, base_offset=1000, partition_leader_epoch=4))
    plog.close()
    again = open_log(tmp_path, replicated=True)
    assert (again.log_start_offset, again.log_end_offset, again.high_watermark) == (1000, 1001, 1000)
    assert again.leader_epochs.entries == [(4, 1000)]
    assert offsets_in(again.read(1000, 100_000)) == [1000]


# --- log start offset and the epoch cache -----------------------------------------------------------

def test_a_higher_log_start_offset_moves_the_first_epoch_start(tmp_path):
    plog = open_log(tmp_path, replicated=True)
    fill(plog, [3], epoch=1)
    fill(plog, [3], epoch=2)
    fill(plog, [3], epoch=3)
    plog.update_high_watermark(9)
    plog.delete_records_before(4)
    assert plog.leader_epochs.entries == [(2, 4), (3, 6)]
    assert plog.leader_epochs.end_offset_for(1, 9) == (1, 4)


def test_truncating_below_the_log_start_offset_lowers_it_to_the_new_end(tmp_path):
    plog = open_log(tmp_path, replicated=True)
    fill(plog, [5, 5], epoch=1)
    plog.update_high_watermark(10)
    plog.delete_records_before(7)                       # inside the batch 5-9
    assert plog.truncate_to(8) == 5
    assert (plog.log_start_offset, plog.high_watermark, plog.log_end_offset) == (5, 5, 5)
    plog.close()
    assert open_log(tmp_path, replicated=True).log_start_offset == 5
