"""Loading a partition log: clean reopen trusts the files, recovery truncates torn or garbage tails."""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.batches import batch_of_size, encode_batch
from broker.config import TopicConfig
from broker.log import PartitionLog
from kafka_protocol.record_batch import parse_header

SEG0 = "00000000000000000000"


def open_log(d: Path, *, recover: bool, **cfg) -> PartitionLog:
    return PartitionLog(d / "t-0", "t", 0, TopicConfig.default(**cfg), recover=recover)


def all_offsets(plog: PartitionLog) -> list[int]:
    out, offset = [], plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20).read_bytes()
        pos = 0
        while pos < len(data):
            h = parse_header(data, pos)
            out.extend(range(h.base_offset, h.last_offset + 1))
            pos += h.size
        offset = out[-1] + 1
    return [o for o in out if o >= plog.log_start_offset]   # a read starts at the batch holding it


def filled(d: Path, batches: int = 20, **cfg) -> PartitionLog:
    plog = open_log(d, recover=False, **cfg)
    for i in range(batches):
        plog.append(encode_batch([b"r%d" % i] * 3, timestamps=[i * 10, i * 10 + 1, i * 10 + 2]))
    return plog


def test_clean_close_and_reopen_keeps_everything(tmp_path):
    plog = filled(tmp_path, segment_bytes=600, index_interval_bytes=100)
    plog.delete_records_before(4)
    before = (plog.log_start_offset, plog.log_end_offset, [s.base_offset for s in plog.segments],
              plog.max_timestamp(), plog.offset_for_timestamp(55), plog.size_in_bytes())
    plog.close()
    again = open_log(tmp_path, recover=False, segment_bytes=600, index_interval_bytes=100)
    after = (again.log_start_offset, again.log_end_offset, [s.base_offset for s in again.segments],
             again.max_timestamp(), again.offset_for_timestamp(55), again.size_in_bytes())
    assert after == before
    assert all_offsets(again) == list(range(4, 60))
    assert again.append(encode_batch()).base_offset == 60


def test_log_start_offset_survives_a_crash(tmp_path):
    plog = filled(tmp_path)
    plog.delete_records_before(7)
    again = open_log(tmp_path, recover=True)
    assert (again.log_start_offset, again.log_end_offset) == (7, 60)


def test_garbage_after_the_last_batch_is_truncated_and_never_read(tmp_path):
    filled(tmp_path, batches=5)          # no close: a crash
    log_file = tmp_path / "t-0" / f"{SEG0}.log"
    valid = log_file.stat().st_size
    with open(log_file, "ab") as f:
        f.write(b"\xde\xad\xbe\xef" * 1000)
    plog = open_log(tmp_path, recover=True)
    assert log_file.stat().st_size == valid
    assert plog.log_end_offset == 15
    assert all_offsets(plog) == list(range(15))
    assert plog.append(encode_batch()).base_offset == 15
    assert all_offsets(plog) == list(range(16))


def test_a_torn_last_batch_is_truncated(tmp_path):
    plog = filled(tmp_path, batches=3)
    size_before = plog.size_in_bytes()
    last = encode_batch([b"torn" * 100] * 5)
    plog.append(last)
    log_file = tmp_path / "t-0" / f"{SEG0}.log"
    with open(log_file, "r+b") as f:
        f.truncate(size_before + len(last) // 2)
    again = open_log(tmp_path, recover=True)
    assert (again.log_end_offset, again.size_in_bytes()) == (9, size_before)


def test_a_batch_with_a_bad_crc_and_everything_after_it_is_dropped(tmp_path):
    filled(tmp_path, batches=5)
    log_file = tmp_path / "t-0" / f"{SEG0}.log"
    data = bytearray(log_file.read_bytes())
    size = parse_header(data).size
    data[2 * size + 65] ^= 0x40
    log_file.write_bytes(bytes(data))
    plog = open_log(tmp_path, recover=True)
    assert (plog.log_end_offset, plog.size_in_bytes()) == (6, 2 * size)


def test_only_the_active_segment_is_validated_on_recovery(tmp_path):
    plog = filled(tmp_path, segment_bytes=500)
    assert len(plog.segments) > 2
    plog.close()
    again = open_log(tmp_path, recover=True, segment_bytes=500)
    assert again.log_end_offset == 60 and all_offsets(again) == list(range(60))


def test_recovery_rebuilds_the_same_indexes_that_appends_wrote(tmp_path):
    plog = filled(tmp_path, batches=50, index_interval_bytes=200)
    d = tmp_path / "t-0"
    index, timeindex = (d / f"{SEG0}.index").read_bytes(), (d / f"{SEG0}.timeindex").read_bytes()
    assert len(index) > 8
    open_log(tmp_path, recover=True, index_interval_bytes=200)
    assert (d / f"{SEG0}.index").read_bytes() == index
    assert (d / f"{SEG0}.timeindex").read_bytes()[:len(timeindex)] == timeindex


def _corrupt_indexes_then_reopen(tmp_path, damage, *, recover: bool) -> PartitionLog:
    plog = filled(tmp_path, batches=30, segment_bytes=1000, index_interval_bytes=100)
    expected = [s.offset_index.lookup(s.base_offset + 5) for s in plog.segments]
    plog.close()
    for p in (tmp_path / "t-0").glob("*.index"):
        damage(p)
    again = open_log(tmp_path, recover=recover, segment_bytes=1000, index_interval_bytes=100)
    for seg in again.segments:
        seg.ensure_loaded()
    assert [s.offset_index.lookup(s.base_offset + 5) for s in again.segments] == expected
    assert all_offsets(again) == list(range(90))
    assert again.offset_for_timestamp(151) == (46, 151)
    return again


def test_a_missing_index_is_rebuilt(tmp_path):
    _corrupt_indexes_then_reopen(tmp_path, lambda p: p.unlink(), recover=False)
    assert all((tmp_path / "t-0" / f"{s}.index").exists() for s in [SEG0])


def test_an_index_of_partial_size_is_rebuilt(tmp_path):
    _corrupt_indexes_then_reopen(tmp_path, lambda p: p.write_bytes(p.read_bytes() + b"\x01\x02"),
                                 recover=False)


def test_an_index_with_entries_out_of_order_is_rebuilt(tmp_path):
    def scramble(p: Path) -> None:
        data = p.read_bytes()
        p.write_bytes(data[8:16] + data[:8] + data[16:])
    _corrupt_indexes_then_reopen(tmp_path, scramble, recover=True)


def test_an_index_zeroed_by_a_crash_is_rebuilt(tmp_path):
    _corrupt_indexes_then_reopen(tmp_path, lambda p: p.write_bytes(b"\x00" * len(p.read_bytes())),
                                 recover=True)


def test_leftover_deleted_and_tmp_files_are_removed_at_startup(tmp_path):
    filled(tmp_path).close()
    d = tmp_path / "t-0"
    for name in ("00000000000000000000.log.deleted", "00000000000000000000.index.deleted", "x.snapshot.tmp"):
        (d / name).write_bytes(b"junk")
    (d / "00000000000000000099.index").write_bytes(b"")     # an index without a log file
    open_log(tmp_path, recover=False)
    assert not list(d.glob("*.deleted")) and not list(d.glob("*.tmp"))
    assert not (d / "00000000000000000099.index").exists()


def test_recovery_of_an_empty_partition_directory_creates_the_first_segment(tmp_path):
    (tmp_path / "t-0").mkdir()
    plog = open_log(tmp_path, recover=True)
    assert [s.base_offset for s in plog.segments] == [0] and plog.log_end_offset == 0


def test_a_partition_emptied_by_delete_records_restarts_at_its_log_start(tmp_path):
    plog = filled(tmp_path, batches=4, segment_bytes=200)
    plog.delete_records_before(-1)
    plog.close()
    again = open_log(tmp_path, recover=True, segment_bytes=200)
    assert (again.log_start_offset, again.log_end_offset) == (12, 12)


def test_segment_age_after_restart_comes_from_the_first_batch_timestamp(tmp_path):
    plog = open_log(tmp_path, recover=False)
    plog.append(encode_batch(timestamps=[1_000]), now_ms=5_000)
    plog.close()
    again = PartitionLog(tmp_path / "t-0", "t", 0, TopicConfig.default(segment_ms=10_000), recover=False,
                         clock=lambda: 20.0)
    again.append(encode_batch(), now_ms=11_000)
    assert len(again.segments) == 1
    again.append(encode_batch(), now_ms=11_001)
    assert len(again.segments) == 2


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sizes=st.lists(st.integers(min_value=70, max_value=400), min_size=0, max_size=6),
       garbage=st.binary(min_size=1, max_size=600))
def test_random_garbage_after_valid_batches_is_always_truncated_to_the_valid_prefix(sizes, garbage):
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        plog = open_log(d, recover=False)
        for size in sizes:
            plog.append(batch_of_size(size))
        valid = plog.size_in_bytes()
        end_offset = plog.log_end_offset
        with open(d / "t-0" / f"{SEG0}.log", "ab") as f:
            f.write(garbage)
        again = open_log(d, recover=True)
        assert again.size_in_bytes() == valid
        assert again.log_end_offset == end_offset
        assert (d / "t-0" / f"{SEG0}.log").stat().st_size == valid
        assert again.read(0, 1 << 20).length == valid
