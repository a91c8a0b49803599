"""Record batch v2: header parsing, produce validation, offset assignment, timestamp decoding, scans."""
from __future__ import annotations

import os
import struct

import crc32c
import pytest

from tests.support.batches import CODECS, batch_of_size, encode_batch
from kafka_protocol.errors import (
    CorruptRecordError,
    InvalidRecordError,
    MessageTooLargeError,
    UnsupportedMessageFormatError,
)
from kafka_protocol.record_batch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    assign_offsets,
    iter_record_timestamps,
    parse_header,
    validate_batches,
)
from broker.log.batch_scan import iter_headers, scan_valid_prefix

MAX = 1_000_000


def test_header_layout_constants():
    assert HEADER_SIZE == 61
    assert LOG_OVERHEAD == 12


def test_parse_header_reads_every_field():
    b = encode_batch([b"a", b"b", b"c"], timestamps=[10, 30, 20], producer_id=7, producer_epoch=2,
                     base_sequence=5, codec="gzip", partition_leader_epoch=4)
    h = parse_header(b)
    assert (h.base_offset, h.size, h.magic, h.partition_leader_epoch) == (0, len(b), 2, 4)
    assert (h.last_offset_delta, h.last_offset, h.records_count) == (2, 2, 3)
    assert (h.base_timestamp, h.max_timestamp, h.timestamp_type) == (10, 30, 0)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.last_sequence) == (7, 2, 5, 7)
    assert h.compression == 1 and not h.is_transactional and not h.is_control
    assert h.position == 0


def test_parse_header_of_truncated_buffer_is_corrupt():
    with pytest.raises(CorruptRecordError):
        parse_header(encode_batch()[:60])


def test_last_sequence_wraps_at_int32_max():
    h = parse_header(encode_batch([b"a", b"b", b"c"], producer_id=1, producer_epoch=0, base_sequence=2**31 - 2))
    assert h.last_sequence == 0


def test_validate_returns_one_header_per_batch_with_positions():
    a, b = encode_batch([b"x"] * 3), encode_batch([b"y"] * 2, codec="zstd")
    headers = validate_batches(a + b, MAX)
    assert [h.position for h in headers] == [0, len(a)]
    assert [h.records_count for h in headers] == [3, 2]


def test_validate_rejects_empty_records():
    with pytest.raises(InvalidRecordError):
        validate_batches(b"", MAX)


def test_validate_rejects_a_bad_crc():
    b = bytearray(encode_batch([b"hello"]))
    b[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        validate_batches(b, MAX)


def test_validate_rejects_magic_1_as_unsupported_format():
    b = bytearray(encode_batch())
    b[16] = 1
    with pytest.raises(UnsupportedMessageFormatError, match="v0/v1 is not supported"):
        validate_batches(b, MAX)


def test_validate_rejects_unknown_magic_as_corrupt():
    with pytest.raises(CorruptRecordError, match="magic"):
        validate_batches(encode_batch(magic=3), MAX)


@pytest.mark.parametrize("cut", [1, 11, 12, 40, 60])
def test_validate_rejects_truncated_batches(cut):
    good = encode_batch([b"x" * 20])
    with pytest.raises(InvalidRecordError):     # Kafka: InvalidRecordException for a batch cut short
        validate_batches(good + good[:cut], MAX)


def test_validate_rejects_a_length_below_the_header_size():
    b = bytearray(encode_batch())
    struct.pack_into(">i", b, 8, 48)
    with pytest.raises(CorruptRecordError, match="length"):
        validate_batches(b, MAX)


def test_validate_rejects_a_batch_larger_than_max_message_bytes_naming_both_sizes():
    b = batch_of_size(500)
    assert len(validate_batches(b, 500)) == 1
    with pytest.raises(MessageTooLargeError, match=r"500 bytes.*499"):
        validate_batches(b, 499)


def test_validate_rejects_negative_counts():
    b = bytearray(encode_batch())
    struct.pack_into(">i", b, 57, -1)
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    with pytest.raises(InvalidRecordError):
        validate_batches(b, MAX)


def test_validate_rejects_control_batches_from_clients():
    with pytest.raises(InvalidRecordError, match="control"):
        validate_batches(encode_batch(control=True), MAX)


def test_assign_offsets_makes_offsets_consecutive_across_batches():
    a, b = encode_batch([b"x"] * 3), encode_batch([b"y"] * 2)
    buf = bytearray(a + b)
    headers = validate_batches(buf, MAX)
    assign_offsets(buf, headers, 100, None, 0)
    assert [h.base_offset for h in headers] == [100, 103]
    assert [parse_header(buf, h.position).base_offset for h in headers] == [100, 103]
    validate_batches(buf, MAX)   # CRC does not cover the base offset


def test_log_append_time_rewrites_type_and_max_timestamp_and_keeps_the_crc_valid():
    buf = bytearray(encode_batch([b"x", b"y"], timestamps=[5, 6], codec="lz4"))
    headers = validate_batches(buf, MAX)
    assign_offsets(buf, headers, 7, 123456, 0)
    h = validate_batches(buf, MAX, create_time=False)[0]   # stored as a LogAppendTime topic keeps it
    assert (h.timestamp_type, h.max_timestamp, h.base_timestamp) == (1, 123456, 5)
    assert list(iter_record_timestamps(buf)) == [(7, 123456), (8, 123456)]


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_record_timestamps_are_decoded_per_record_for_each_codec(codec):
    ts = [50, 10, 90, 30, 70]
    b = encode_batch([b"value-%d" % i * 50 for i in range(5)], timestamps=ts, keys=[b"k"] * 5,
                     codec=codec, record_headers=[(b"h", b"v"), (b"n", None)])
    buf = bytearray(b)
    assign_offsets(buf, validate_batches(buf, MAX), 40, None, 0)
    assert list(iter_record_timestamps(buf)) == [(40 + i, t) for i, t in enumerate(ts)]


def test_record_decoding_reports_garbage_as_corrupt():
    b = bytearray(encode_batch([b"x"], codec="zstd"))
    b[HEADER_SIZE:] = b"\x00" * (len(b) - HEADER_SIZE)
    with pytest.raises(CorruptRecordError):
        list(iter_record_timestamps(b))


def _file_with(tmp_path, data: bytes) -> int:
    path = tmp_path / "seg.log"
    path.write_bytes(data)
    return os.open(path, os.O_RDONLY)


def _log_bytes(n: int, values_per_batch: int = 2) -> bytes:
    buf = bytearray(b"".join(encode_batch([b"v" * 30] * values_per_batch) for _ in range(n)))
    assign_offsets(buf, validate_batches(buf, MAX), 0, None, 0)
    return bytes(buf)


def test_scan_valid_prefix_accepts_a_clean_file(tmp_path):
    data = _log_bytes(10)
    fd = _file_with(tmp_path, data)
    seen = []
    result = scan_valid_prefix(fd, 0, len(data), min_offset=0, on_batch=seen.append, chunk_size=100)
    assert (result.valid_end, result.batches, result.next_offset, result.stop_reason) == (len(data), 10, 20, None)
    assert [h.base_offset for h in seen] == list(range(0, 20, 2))
    os.close(fd)


def test_scan_valid_prefix_stops_at_a_bad_crc(tmp_path):
    data = bytearray(_log_bytes(5))
    size = parse_header(data).size
    data[3 * size + 70] ^= 1
    fd = _file_with(tmp_path, bytes(data))
    result = scan_valid_prefix(fd, 0, len(data), min_offset=0)
    assert (result.valid_end, result.batches, result.next_offset) == (3 * size, 3, 6)
    assert "CRC" in result.stop_reason
    os.close(fd)


def test_scan_valid_prefix_stops_when_offsets_go_backwards(tmp_path):
    one = _log_bytes(1)
    data = _log_bytes(3) + one          # the appended batch restarts at offset 0
    fd = _file_with(tmp_path, data)
    result = scan_valid_prefix(fd, 0, len(data), min_offset=0)
    assert result.valid_end == len(data) - len(one)
    os.close(fd)


def test_iter_headers_walks_batches_in_windows(tmp_path):
    data = _log_bytes(50)
    fd = _file_with(tmp_path, data)
    headers = list(iter_headers(fd, 0, len(data), window=200))
    assert [h.base_offset for h in headers] == list(range(0, 100, 2))
    assert headers[-1].position + headers[-1].size == len(data)
    os.close(fd)
