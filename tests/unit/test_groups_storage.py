"""Specifications of the storage under consumer groups: __consumer_offsets record formats, the
record batch encoder, and the log cleaner (compaction) on a real PartitionLog."""
from __future__ import annotations

import pytest

from pathlib import Path

from broker.config import TopicConfig
from broker.groups.records import (
    GroupKey,
    GroupValue,
    MemberRecord,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
    group_key,
    group_value,
    java_string_hash,
    offset_key,
    offset_value,
    partition_for,
    subscribed_topics,
)
from broker.log.cleaner import LogCleaner
from broker.log.log_manager import LogManager
from broker.log.partition_log import PartitionLog
from kafka_protocol.errors import InvalidRecordError, RecordValidationError
from kafka_protocol.record_batch import validate_batches
from kafka_protocol.record_builder import Record, decode_records, encode_batch, iter_batches


def test_group_partition_matches_kafkas_java_hash() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2147483648   # Integer.MIN_VALUE -> abs is 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("my-group", 50) == abs(java_string_hash("my-group")) % 50


def test_offset_records_round_trip_kafka_formats() -> None:
    key = offset_key("g", "topic", 7)
    assert key[:2] == b"\x00\x01"
    assert decode_key(key) == OffsetKey("g", "topic", 7)
    value = OffsetValue(42, 5, "meta ✓", 1_700_000_000_000)
    assert decode_offset_value(offset_value(value)) == value
    assert decode_key(group_key("g")) == GroupKey("g")


def test_group_metadata_round_trips_with_members() -> None:
    v = GroupValue("consumer", 3, "range", "m1", 123,
                   [MemberRecord("m1", "inst", "client", "/127.0.0.1", 300000, 10000, b"\x00\x01sub", b"asg")])
    assert decode_group_value(group_value(v)) == v


def test_subscribed_topics_parses_consumer_protocol() -> None:
    sub = b"\x00\x01" + b"\x00\x00\x00\x02" + b"\x00\x01a" + b"\x00\x02bb" + b"\xff\xff\xff\xff"
    assert subscribed_topics(sub) == {"a", "bb"}
    assert subscribed_topics(b"\x00") is None


def test_encoded_batches_pass_broker_validation_and_decode_back() -> None:
    records = [Record(10, 1000, b"k1", b"v1"), Record(12, 1005, b"k2", None, (("h", b"x"),))]
    batch = encode_batch(records)
    gapless = encode_batch([records[0], Record(11, 1005, b"k2", None, (("h", b"x"),))])
    headers = validate_batches(gapless, 1 << 20)
    assert headers[0].base_offset == 10 and headers[0].last_offset == 11 and headers[0].records_count == 2
    with pytest.raises(InvalidRecordError, match="inconsistent batch offset range"):
        validate_batches(batch, 1 << 20)   # an offset gap is the cleaner's output, never a producer's
    decoded = decode_records(batch)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in decoded] == [(10, 1000, b"k1", b"v1"), (12, 1005, b"k2", None)]
    assert decoded[1].headers == (("h", b"x"),)
    assert list(iter_batches(batch + batch[:20])) == [(0, len(batch))]


def _compacted_log(tmp_path: Path) -> PartitionLog:
    config = TopicConfig.default(cleanup_policy="compact", segment_bytes=600, min_cleanable_dirty_ratio=0.1,
                         file_delete_delay_ms=0)
    return PartitionLog(tmp_path / "t-0", "t", 0, config, recover=False)


def _all_records(plog: PartitionLog) -> list[Record]:
    out, offset = [], plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, 1 << 20).read_bytes()
        if not data:
            break
        batch_records = [r for pos, size in iter_batches(data) for r in decode_records(data[pos:pos + size])]
        out += [r for r in batch_records if r.offset >= offset]
        offset = batch_records[-1].offset + 1
    return out


def test_cleaner_keeps_only_the_latest_value_per_key(tmp_path: Path) -> None:
    plog = _compacted_log(tmp_path)
    for i in range(200):
        plog.append(encode_batch([Record(0, 1000 + i, b"key-%d" % (i % 5), b"value-%d" % i)]))
    with pytest.raises(RecordValidationError, match="without key") as rejected:
        plog.append(encode_batch([Record(0, 5000, None, b"no key")]))   # Kafka rejects keyless records here
    assert rejected.value.record_errors == [(0, "Compacted topic cannot accept message without key")]
    before = (len(plog.segments), plog.size_in_bytes())
    manager = LogManager(tmp_path)
    manager._logs[("t", 0)] = plog   # a manager over this one log
    result = LogCleaner(manager, backoff_ms=0).maybe_clean(now_ms=10_000)
    assert result is not None and result.records_removed > 150
    assert len(plog.segments) < before[0] and plog.size_in_bytes() < before[1] / 5
    records = _all_records(plog)
    latest = {}
    for r in records:
        latest[r.key] = r.value
    assert latest[b"key-4"] == b"value-199" and latest[b"key-0"] == b"value-195"
    offsets = [r.offset for r in records]
    assert offsets == sorted(offsets) and plog.log_end_offset == 200
    # appends continue after compaction, and a reopened log reads the same
    plog.append(encode_batch([Record(0, 6000, b"key-0", b"after")]))
    plog.close()
    reopened = PartitionLog(tmp_path / "t-0", "t", 0, plog.config, recover=True)
    assert _all_records(reopened)[-1].value == b"after"
    assert reopened.log_end_offset == 201


def test_interrupted_swap_is_completed_at_startup(tmp_path: Path) -> None:
    plog = _compacted_log(tmp_path)
    for i in range(60):
        plog.append(encode_batch([Record(0, 1000 + i, b"k%d" % (i % 3), b"v%d" % i)]))
    sealed = plog.segments[:-1]
    end_of_sealed = plog.segments[-1].base_offset
    cleaned = [Record(end_of_sealed - 1, 2000, b"k0", b"survivor")]
    swap = tmp_path / "t-0" / f"{sealed[0].base_offset:020d}.log.swap"
    swap.write_bytes(encode_batch(cleaned))
    plog.close()
    assert LogCleaner.recover_swaps(tmp_path) == 1
    reopened = PartitionLog(tmp_path / "t-0", "t", 0, plog.config, recover=True)
    values = [r.value for r in _all_records(reopened)]
    assert values[0] == b"survivor" and len(reopened.segments) == 2
