"""PartitionLog: append, read (Fetch), rolling, indexes, timestamps, retention, DeleteRecords."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.batches import CODECS, batch_of_size, encode_batch
from broker.config import TopicConfig
from kafka_protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    UnsupportedMessageFormatError,
)
from broker.log import FetchSlice, PartitionLog
from kafka_protocol.record_batch import parse_header
from broker.log.batch_scan import iter_headers

NOW_MS = 1_700_000_000_000


class Clock:
    def __init__(self, ms: int = NOW_MS) -> None:
        self.ms = ms

    def __call__(self) -> float:
        return self.ms / 1000


def open_log(tmp_path: Path, *, recover: bool = False, clock: Clock | None = None, **cfg) -> PartitionLog:
    return PartitionLog(tmp_path / "t-0", "t", 0, TopicConfig.default(**cfg), recover=recover, clock=clock or Clock())


def offsets_in(s: FetchSlice) -> list[int]:
    data = s.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        h = parse_header(data, pos)
        out.extend(range(h.base_offset, h.last_offset + 1))
        pos += h.size
    assert pos == len(data), "a slice holds whole batches only"
    return out


# --- append -------------------------------------------------------------------------------------

def test_offsets_are_dense_from_zero_across_appends(tmp_path):
    plog = open_log(tmp_path)
    results = [plog.append(encode_batch([b"x"] * n)) for n in (3, 1, 5)]
    assert [(r.base_offset, r.last_offset, r.record_count) for r in results] == [(0, 2, 3), (3, 3, 1), (4, 8, 5)]
    assert plog.log_end_offset == 9
    assert offsets_in(plog.read(0, 10_000)) == list(range(9))


def test_a_request_with_several_batches_gets_consecutive_offsets(tmp_path):
    plog = open_log(tmp_path)
    r = plog.append(encode_batch([b"a"] * 2) + encode_batch([b"b"] * 3))
    assert (r.base_offset, r.last_offset, r.record_count) == (0, 4, 5)


def test_append_result_reports_log_append_time_only_for_log_append_time_topics(tmp_path):
    create = open_log(tmp_path / "c").append(encode_batch(), now_ms=42)
    logtime = open_log(tmp_path / "l", message_timestamp_type="LogAppendTime").append(encode_batch(), now_ms=42)
    assert (create.log_append_time_ms, logtime.log_append_time_ms) == (-1, 42)


def test_log_append_time_is_written_with_a_valid_crc(tmp_path):
    plog = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    plog.append(encode_batch([b"a", b"b"], timestamps=[1, 2]), now_ms=5000)
    h = parse_header(plog.read(0, 10_000).read_bytes())
    assert (h.timestamp_type, h.max_timestamp) == (1, 5000)
    assert plog.offset_for_timestamp(4000) == (0, 5000)


@pytest.mark.parametrize("bad, error", [
    (lambda b: b[:-1], InvalidRecordError),
    (lambda b: b[:16] + b"\x01" + b[17:], UnsupportedMessageFormatError),
    (lambda b: b[:-1] + bytes([b[-1] ^ 1]), CorruptRecordError),
])
def test_invalid_batches_are_rejected_and_nothing_is_written(tmp_path, bad, error):
    plog = open_log(tmp_path)
    plog.append(encode_batch())
    with pytest.raises(error):
        plog.append(bad(encode_batch([b"hello"])))
    assert plog.log_end_offset == 1
    assert plog.size_in_bytes() == len(encode_batch())


def test_a_batch_over_max_message_bytes_is_too_large(tmp_path):
    plog = open_log(tmp_path, max_message_bytes=200)
    with pytest.raises(MessageTooLargeError):
        plog.append(batch_of_size(201))


def test_records_bigger_than_a_segment_are_rejected(tmp_path):
    plog = open_log(tmp_path, segment_bytes=300)
    with pytest.raises(RecordListTooLargeError):
        plog.append(batch_of_size(200) + batch_of_size(200))


def test_appended_bytes_are_in_the_file_when_append_returns(tmp_path):
    plog = open_log(tmp_path)
    batch = encode_batch([b"durable"])
    plog.append(batch)
    on_disk = (tmp_path / "t-0" / "00000000000000000000.log").read_bytes()
    # base offset 0 and CreateTime: the producer's bytes, but for the leader epoch Kafka stamps (0)
    assert on_disk == batch[:12] + b"\x00\x00\x00\x00" + batch[16:]


def test_append_accepts_memoryview_and_bytearray(tmp_path):
    plog = open_log(tmp_path)
    plog.append(memoryview(encode_batch()))
    plog.append(bytearray(encode_batch()))
    assert plog.log_end_offset == 2


# --- read -----------------------------------------------------------------------------------------

def test_read_from_the_middle_of_a_batch_starts_at_that_batch(tmp_path):
    plog = open_log(tmp_path)
    plog.append(encode_batch([b"a"] * 5))
    plog.append(encode_batch([b"b"] * 5))
    assert offsets_in(plog.read(7, 10_000)) == list(range(5, 10))
    assert offsets_in(plog.read(2, 10_000)) == list(range(10))


def test_read_returns_whole_batches_up_to_max_bytes(tmp_path):
    plog = open_log(tmp_path, index_interval_bytes=250)
    for _ in range(10):
        plog.append(batch_of_size(100))
    for max_bytes in (100, 199, 200, 350, 999, 1000, 5000):
        s = plog.read(0, max_bytes)
        assert s.length == min(max_bytes // 100, 10) * 100


def test_read_returns_an_oversized_first_batch_whole_kip_74(tmp_path):
    plog = open_log(tmp_path)
    plog.append(batch_of_size(500))
    plog.append(batch_of_size(100))
    assert plog.read(0, 10).length == 500
    assert plog.read(0, 10, min_one_batch=False).length == 0


def test_read_at_log_end_is_empty_and_beyond_or_below_is_out_of_range(tmp_path):
    plog = open_log(tmp_path)
    plog.append(encode_batch([b"x"] * 3))
    end = plog.read(3, 1000)
    assert (end.length, end.position) == (0, plog.size_in_bytes())
    with pytest.raises(OffsetOutOfRangeError, match="log end offset 3"):
        plog.read(4, 1000)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(-1, 1000)


def test_read_of_an_empty_log_at_zero_is_empty(tmp_path):
    s = open_log(tmp_path).read(0, 100)
    assert s.length == 0 and s.read_bytes() == b""


def test_read_stays_within_one_segment_and_continues_in_the_next(tmp_path):
    plog = open_log(tmp_path, segment_bytes=1000)
    for _ in range(25):
        plog.append(batch_of_size(100))
    assert [s.base_offset for s in plog.segments] == [0, 10, 20]
    first = plog.read(3, 10_000)
    assert (first.segment_base_offset, offsets_in(first)) == (0, list(range(3, 10)))
    assert offsets_in(plog.read(10, 10_000)) == list(range(10, 20))
    assert offsets_in(plog.read(24, 10_000)) == [24]


def test_read_slice_fd_is_the_segment_fd_for_sendfile(tmp_path):
    plog = open_log(tmp_path)
    plog.append(encode_batch())
    s = plog.read(0, 1000)
    assert s.fd == plog.segments[0].fd
    assert os.pread(s.fd, s.length, s.position) == s.read_bytes()


# --- rolling and indexes ------------------------------------------------------------------------

def test_segments_roll_by_size(tmp_path):
    plog = open_log(tmp_path, segment_bytes=350)
    for _ in range(7):
        plog.append(batch_of_size(100))
    assert [(s.base_offset, s.size) for s in plog.segments] == [(0, 300), (3, 300), (6, 100)]
    assert sorted(p.name for p in (tmp_path / "t-0").glob("*.log")) == [
        "00000000000000000000.log", "00000000000000000003.log", "00000000000000000006.log"]


def test_segments_roll_by_age_since_first_append(tmp_path):
    clock = Clock()
    plog = open_log(tmp_path, segment_ms=1000, clock=clock)
    plog.append(encode_batch(), now_ms=clock.ms)
    plog.append(encode_batch(), now_ms=clock.ms + 1000)
    assert len(plog.segments) == 1
    plog.append(encode_batch(), now_ms=clock.ms + 1001)
    assert [s.base_offset for s in plog.segments] == [0, 2]


def test_an_empty_active_segment_never_rolls(tmp_path):
    plog = open_log(tmp_path, segment_bytes=100, segment_ms=1)
    plog.append(batch_of_size(100), now_ms=NOW_MS + 10_000)
    assert len(plog.segments) == 1


def test_a_full_index_rolls_the_segment(tmp_path):
    plog = open_log(tmp_path, index_interval_bytes=0, segment_index_bytes=24)   # 3 entries
    for _ in range(6):
        plog.append(encode_batch())
    assert [s.base_offset for s in plog.segments] == [0, 4]


def test_an_index_entry_is_added_every_index_interval_bytes(tmp_path):
    plog = open_log(tmp_path, index_interval_bytes=250)
    for _ in range(10):
        plog.append(batch_of_size(100))
    data = (tmp_path / "t-0" / "00000000000000000000.index").read_bytes()
    entries = [(int.from_bytes(data[i:i + 4], "big"), int.from_bytes(data[i + 4:i + 8], "big"))
               for i in range(0, len(data), 8)]
    assert entries == [(3, 300), (6, 600), (9, 900)]
    seg = plog.segments[0]
    assert seg.offset_index.lookup(5) == (3, 300)
    assert seg.offset_index.lookup(2) == (0, 0)
    assert seg.find_batch(7).position == 700


def test_time_index_records_new_maximum_timestamps_at_index_points(tmp_path):
    plog = open_log(tmp_path, index_interval_bytes=0)
    for ts in (100, 50, 300, 200, 400):
        plog.append(batch_of_size(100, timestamp=ts))
    ti = plog.segments[0].time_index
    assert [ti.lookup(t) for t in (50, 101, 300, 301, 1000)] == [0, 0, 0, 2, 4]
    assert ti.last_entry() == (400, 4)


# --- timestamps -----------------------------------------------------------------------------------

def test_offset_for_timestamp_finds_the_earliest_record_at_or_after_the_target(tmp_path):
    plog = open_log(tmp_path, segment_bytes=700, index_interval_bytes=100)
    for i in range(10):
        plog.append(encode_batch([b"a", b"b", b"c"], timestamps=[i * 100, i * 100 + 50, i * 100 + 20]))
    assert len(plog.segments) > 1
    assert plog.offset_for_timestamp(0) == (0, 0)
    assert plog.offset_for_timestamp(30) == (1, 50)
    assert plog.offset_for_timestamp(51) == (3, 100)
    assert plog.offset_for_timestamp(915) == (28, 950)   # 920 comes after 950 in offset order
    assert plog.offset_for_timestamp(950) == (28, 950)
    assert plog.offset_for_timestamp(951) is None


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_offset_for_timestamp_is_exact_per_record_in_compressed_batches(tmp_path, codec):
    plog = open_log(tmp_path)
    plog.append(encode_batch([b"x" * 100] * 4, timestamps=[10, 40, 20, 30], codec=codec))
    plog.append(encode_batch([b"y" * 100] * 3, timestamps=[35, 60, 50], codec=codec))
    expected = {5: (0, 10), 10: (0, 10), 11: (1, 40), 21: (1, 40), 41: (5, 60), 51: (5, 60), 60: (5, 60)}
    for target, want in expected.items():
        assert plog.offset_for_timestamp(target) == want, target
    assert plog.offset_for_timestamp(61) is None


def test_offset_for_timestamp_skips_records_below_the_log_start_offset(tmp_path):
    plog = open_log(tmp_path)
    plog.append(encode_batch([b"x"] * 4, timestamps=[10, 20, 30, 40]))
    plog.delete_records_before(2)
    assert plog.offset_for_timestamp(0) == (2, 30)


def test_max_timestamp_names_the_exact_record(tmp_path):
    plog = open_log(tmp_path, segment_bytes=300)
    assert plog.max_timestamp() == (-1, -1)
    plog.append(encode_batch([b"a", b"b", b"c"], timestamps=[5, 900, 7]))
    plog.append(encode_batch([b"a", b"b"], timestamps=[100, 200]))
    plog.append(encode_batch([b"a"], timestamps=[300]))
    assert plog.max_timestamp() == (900, 1)


# --- retention and DeleteRecords --------------------------------------------------------------------

def _five_segments(tmp_path, **cfg) -> PartitionLog:
    plog = open_log(tmp_path, segment_bytes=200, file_delete_delay_ms=0, **cfg)
    for i in range(10):
        plog.append(batch_of_size(100, timestamp=NOW_MS - (10 - i) * 60_000, keys=[b"k"]))
    assert [s.base_offset for s in plog.segments] == [0, 2, 4, 6, 8]
    return plog


def test_retention_by_time_deletes_old_segments_and_advances_log_start(tmp_path):
    plog = _five_segments(tmp_path, retention_ms=5 * 60_000 + 1)
    assert plog.apply_retention(NOW_MS) == 2    # segments whose newest record is > 5 minutes old
    assert [s.base_offset for s in plog.segments] == [4, 6, 8]
    assert plog.log_start_offset == 4
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(3, 1000)


def test_retention_never_deletes_the_active_segment(tmp_path):
    plog = _five_segments(tmp_path, retention_ms=0)
    assert plog.apply_retention(NOW_MS + 10**9) == 4
    assert [s.base_offset for s in plog.segments] == [8]
    assert plog.log_end_offset == 10 and plog.log_start_offset == 8


def test_retention_forever_keeps_everything(tmp_path):
    plog = _five_segments(tmp_path, retention_ms=-1)
    assert plog.apply_retention(NOW_MS + 10**12) == 0


def test_retention_by_bytes_deletes_oldest_segments_without_going_below_the_limit(tmp_path):
    plog = _five_segments(tmp_path, retention_ms=-1, retention_bytes=650)
    assert plog.apply_retention(NOW_MS) == 1      # deleting a second would leave 600 < 650
    assert plog.size_in_bytes() == 800 and plog.log_start_offset == 2
    plog.update_config(TopicConfig.default(retention_ms=-1, retention_bytes=600, segment_bytes=200))
    assert plog.apply_retention(NOW_MS) == 1
    assert plog.size_in_bytes() == 600 and plog.log_start_offset == 4


def test_compact_only_topics_are_not_subject_to_retention(tmp_path):
    plog = _five_segments(tmp_path, retention_ms=0, cleanup_policy="compact")
    assert plog.apply_retention(NOW_MS + 10**9) == 0


def test_deleted_segments_are_renamed_then_removed_after_the_delay(tmp_path):
    plog = open_log(tmp_path, segment_bytes=200, retention_ms=0, file_delete_delay_ms=60_000)
    for _ in range(3):
        plog.append(batch_of_size(100, timestamp=1))
    in_flight = plog.read(0, 1000)
    plog.apply_retention(NOW_MS)
    d = tmp_path / "t-0"
    assert (d / "00000000000000000000.log.deleted").exists()
    assert not (d / "00000000000000000000.log").exists()
    assert offsets_in(in_flight) == [0, 1]      # an in-flight read keeps working on the open fd
    plog.purge_deleted(NOW_MS + 59_999)
    assert (d / "00000000000000000000.log.deleted").exists()
    plog.purge_deleted(NOW_MS + 60_000)
    assert not list(d.glob("*.deleted"))


def test_delete_records_advances_log_start_and_deletes_whole_segments_below(tmp_path):
    plog = _five_segments(tmp_path)
    assert plog.delete_records_before(5) == 5
    assert [s.base_offset for s in plog.segments] == [4, 6, 8]
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(4, 1000)
    assert offsets_in(plog.read(5, 100)) == [5]
    assert plog.delete_records_before(3) == 5     # never moves backwards


def test_delete_records_minus_one_means_the_high_watermark(tmp_path):
    plog = _five_segments(tmp_path)
    assert plog.delete_records_before(-1) == 10
    assert [s.base_offset for s in plog.segments] == [8]
    assert plog.read(10, 100).length == 0
    assert plog.append(encode_batch()).base_offset == 10


def test_delete_records_past_the_log_end_is_out_of_range(tmp_path):
    plog = _five_segments(tmp_path)
    with pytest.raises(OffsetOutOfRangeError):
        plog.delete_records_before(11)


def test_flush_messages_policy_fsyncs_after_that_many_messages(tmp_path):
    plog = open_log(tmp_path, flush_messages=3)
    plog.append(encode_batch([b"x"] * 2))
    assert plog.active_segment.dirty
    plog.append(encode_batch([b"x"]))
    assert not plog.active_segment.dirty


def test_flush_ms_policy_fsyncs_when_due(tmp_path):
    clock = Clock()
    plog = open_log(tmp_path, flush_ms=1000, clock=clock)
    plog.append(encode_batch())
    plog.maybe_flush(clock.ms + 999)
    assert plog.active_segment.dirty
    plog.maybe_flush(clock.ms + 1000)
    assert not plog.active_segment.dirty


def test_delete_removes_the_partition_directory(tmp_path):
    plog = open_log(tmp_path)
    plog.append(encode_batch())
    plog.delete()
    assert not (tmp_path / "t-0").exists()


def test_headers_of_a_segment_file_are_all_batches(tmp_path):
    plog = open_log(tmp_path)
    for n in range(1, 6):
        plog.append(encode_batch([b"x"] * n))
    seg = plog.segments[0]
    assert [h.records_count for h in iter_headers(seg.fd, 0, seg.size)] == [1, 2, 3, 4, 5]


def test_idle_sealed_indexes_are_released_and_load_again_on_the_next_lookup(tmp_path):
    plog = open_log(tmp_path, segment_bytes=300)
    for i in range(12):
        plog.append(batch_of_size(100, timestamp=1_000 + i))
    sealed = [s for s in plog.segments if s is not plog.active_segment]
    assert len(sealed) >= 3
    before = [plog.read(o, 10_000).read_bytes() for o in range(12)]
    assert all(s._loaded for s in sealed)
    assert plog.release_idle_indexes(idle_s=3600) == 0, "recently used indexes stay"
    assert plog.release_idle_indexes(idle_s=0) == len(sealed)
    assert not any(s._loaded or len(s.offset_index) or len(s.time_index) for s in sealed)
    assert plog.active_segment._loaded, "the active segment keeps its indexes"
    assert [plog.read(o, 10_000).read_bytes() for o in range(12)] == before
    assert plog.offset_for_timestamp(1_005) == (5, 1_005)
    assert sealed[0]._loaded, "the next lookup loaded them again"
    plog.close()
