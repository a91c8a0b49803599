"""Offset index and time index files: Kafka's entry layout, floor lookups, sanity checks, fullness."""
from __future__ import annotations

import struct

from broker.log.offset_index import OffsetIndex
from broker.log.time_index import TimeIndex


def test_offset_index_entries_are_relative_offset_and_position_big_endian(tmp_path):
    idx = OffsetIndex(tmp_path / "00000000000000000100.index", 100, 1024)
    idx.append(105, 4096)
    idx.append(112, 8200)
    idx.write_pending()
    assert (tmp_path / "00000000000000000100.index").read_bytes() == struct.pack(">iiii", 5, 4096, 12, 8200)


def test_offset_index_lookup_is_the_floor_entry(tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 100, 1024)
    for off, pos in ((110, 1000), (120, 2000), (130, 3000)):
        idx.append(off, pos)
    assert [idx.lookup(o) for o in (100, 109, 110, 125, 999)] == [
        (100, 0), (100, 0), (110, 1000), (120, 2000), (130, 3000)]
    assert idx.lookup_position(2500) == (120, 2000)
    assert idx.last_entry() == (130, 3000)


def test_offset_index_ignores_entries_that_do_not_increase(tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 0, 1024)
    idx.append(10, 100)
    idx.append(10, 200)
    idx.append(5, 300)
    assert len(idx) == 1


def test_offset_index_is_full_at_segment_index_bytes(tmp_path):
    idx = OffsetIndex(tmp_path / "a.index", 0, 20)     # room for 2 entries of 8 bytes
    for i in range(1, 5):
        idx.append(i, i * 10)
    assert idx.is_full and len(idx) == 2


def test_offset_index_round_trips_through_its_file(tmp_path):
    path = tmp_path / "a.index"
    idx = OffsetIndex(path, 50, 1024)
    for i in range(1, 100):
        idx.append(50 + i * 3, i * 70)
    idx.close()
    again = OffsetIndex(path, 50, 1024)
    assert again.load(log_size=10_000)
    assert len(again) == 99 and again.lookup(199) == (197, 49 * 70)


def test_offset_index_load_rejects_corrupt_files(tmp_path):
    path = tmp_path / "a.index"
    idx = OffsetIndex(path, 0, 1024)
    path.write_bytes(b"\x00" * 9)
    assert not idx.load(log_size=100)
    path.write_bytes(struct.pack(">iiii", 5, 10, 3, 20))      # offsets go backwards
    assert not idx.load(log_size=100)
    path.write_bytes(struct.pack(">ii", 5, 500))              # position past the log end
    assert not idx.load(log_size=100)
    path.write_bytes(struct.pack(">ii", 5, 50))
    assert idx.load(log_size=100)
    assert not OffsetIndex(tmp_path / "missing.index", 0, 1024).file_looks_valid()


def test_time_index_keeps_only_new_maximum_timestamps(tmp_path):
    ti = TimeIndex(tmp_path / "a.timeindex", 100, 1200)
    for ts, off in ((1000, 100), (900, 101), (1000, 102), (1500, 103)):
        ti.maybe_append(ts, off)
    ti.write_pending()
    assert (tmp_path / "a.timeindex").read_bytes() == struct.pack(">qiqi", 1000, 0, 1500, 3)
    assert ti.last_entry() == (1500, 103)
    assert ti.read_last_entry() == (1500, 103)


def test_time_index_lookup_starts_after_entries_older_than_the_target(tmp_path):
    ti = TimeIndex(tmp_path / "a.timeindex", 100, 1200)
    for ts, off in ((1000, 110), (2000, 120), (3000, 130)):
        ti.maybe_append(ts, off)
    assert [ti.lookup(t) for t in (5, 1000, 1001, 2500, 3001)] == [100, 100, 110, 120, 130]


def test_time_index_full_check_can_be_skipped_for_the_final_entry(tmp_path):
    ti = TimeIndex(tmp_path / "a.timeindex", 0, 12)
    ti.maybe_append(1, 0)
    ti.maybe_append(2, 1)
    assert len(ti) == 1 and ti.is_full
    ti.maybe_append(2, 1, skip_full_check=True)
    assert ti.last_entry() == (2, 1)


def test_time_index_load_rejects_timestamps_that_do_not_increase(tmp_path):
    path = tmp_path / "a.timeindex"
    path.write_bytes(struct.pack(">qiqi", 50, 0, 40, 1))
    assert not TimeIndex(path, 0, 1200).load()
    path.write_bytes(struct.pack(">qiqi", 40, 0, 50, 1))
    assert TimeIndex(path, 0, 1200).load()
