"""Produce-side validation of every record (Kafka's LogValidator rules), fed crafted batches.

Each case is one kind of corrupt or invalid batch a buggy or hostile producer can send, found by
hand and by fuzzing the broker (issue 15): before validation, most were written to the log and
acknowledged with error 0, then stalled or crashed consumers. Each must now be rejected with the
Kafka error Kafka itself would answer (CORRUPT_MESSAGE for bytes that cannot be read, INVALID_RECORD
for a batch that contradicts itself), and nothing must be written.
"""
from __future__ import annotations

import pytest

from broker.config import TopicConfig
from kafka_protocol.errors import CorruptRecordError, InvalidRecordError, RecordValidationError
from broker.log.partition_log import PartitionLog
from kafka_protocol.record_batch import parse_header, uncompressed_limit, validate_batches
from tests.support.bad_batches import CORRUPT, INVALID, raw_batch, rec
from tests.support.batches import CODECS, compress, encode_batch, encode_record

MAX = 1 << 20


@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_unreadable_batches_are_corrupt_message(name: str) -> None:
    with pytest.raises(CorruptRecordError):
        validate_batches(CORRUPT[name](), MAX)


@pytest.mark.parametrize("name", sorted(INVALID))
def test_self_contradicting_batches_are_invalid_record(name: str) -> None:
    with pytest.raises(InvalidRecordError):
        validate_batches(INVALID[name](), MAX)


@pytest.mark.parametrize("codec", sorted(CODECS))
def test_valid_batches_of_every_codec_pass(codec: str) -> None:
    b = encode_batch([b"value-%d" % i for i in range(50)] + [None], keys=[b"k"] * 51, codec=codec,
                     record_headers=[(b"h", b"v"), (b"n", None)])
    assert [h.records_count for h in validate_batches(b, MAX)] == [51]


def test_a_compressed_batch_may_not_expand_without_bound() -> None:
    bomb = raw_batch(compress("zstd", b"\x00" * (uncompressed_limit(MAX) + 1)), 1, attributes=4)
    assert len(bomb) < MAX
    with pytest.raises(CorruptRecordError, match="expands beyond"):
        validate_batches(bomb, MAX)


def test_keyless_records_on_a_compacted_topic_are_rejected_one_by_one() -> None:
    b = encode_batch([b"a", b"b", b"c"], keys=[b"k", None, None])
    with pytest.raises(RecordValidationError) as e:
        validate_batches(b, MAX, compacted=True)
    assert e.value.code == 87 and e.value.record_errors == [
        (1, "Compacted topic cannot accept message without key"), (2, "Compacted topic cannot accept message without key")]
    assert validate_batches(b, MAX, compacted=False)


def test_a_client_may_not_claim_log_append_time_on_a_create_time_topic() -> None:
    b = encode_batch([b"a"], log_append_time=True)
    with pytest.raises(RecordValidationError) as e:
        validate_batches(b, MAX, create_time=True)
    assert e.value.code == 32 and [i for i, _ in e.value.record_errors] == [0]
    assert validate_batches(b, MAX, create_time=False)


def test_a_wrong_max_timestamp_is_replaced_by_the_records_own(tmp_path) -> None:
    plog = PartitionLog(tmp_path / "t-0", "t", 0, TopicConfig.default(), recover=False)
    lying = raw_batch(rec(0) + encode_record(1, 40, b"k", b"v"), 2, base_ts=1_000, max_ts=9_999_999_999_999)
    plog.append(lying, now_ms=2_000)
    stored = plog.read(0, 10_000).read_bytes()
    h = parse_header(stored)
    assert h.max_timestamp == 1_040
    assert validate_batches(stored, MAX)[0].max_timestamp == 1_040   # and the rewritten CRC holds
    plog.close()


@pytest.mark.parametrize("name", sorted(INVALID)[:3] + sorted(CORRUPT)[:3])
def test_nothing_of_a_rejected_request_is_written(tmp_path, name: str) -> None:
    plog = PartitionLog(tmp_path / "t-0", "t", 0, TopicConfig.default(), recover=False)
    plog.append(encode_batch([b"before"]))
    bad = {**CORRUPT, **INVALID}[name]()
    with pytest.raises((CorruptRecordError, InvalidRecordError)):
        plog.append(bad)
    plog.append(encode_batch([b"after"]))
    assert plog.log_end_offset == 2
    plog.close()


@pytest.mark.parametrize("target", ["uncompressed", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("sent", sorted(CODECS))
def test_a_topic_codec_other_than_producer_recompresses_on_append(tmp_path, sent: str, target: str) -> None:
    from kafka_protocol.record_builder import decode_records
    plog = PartitionLog(tmp_path / "t-0", "t", 0, TopicConfig.default(compression_type=target), recover=False)
    values = [b"value-%d" % i * 20 for i in range(30)]
    plog.append(encode_batch(values, keys=[b"k%d" % i for i in range(30)], codec=sent,
                             producer_id=3, producer_epoch=0, base_sequence=0, record_headers=[(b"h", b"v")]))
    stored = plog.read(0, 1 << 20).read_bytes()
    h = parse_header(stored)
    assert h.compression == {"uncompressed": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}[target]
    assert (h.producer_id, h.base_sequence, h.records_count) == (3, 0, 30)
    assert [r.value for r in decode_records(stored)] == values
    assert validate_batches(stored, MAX)   # CRC, counts and records all hold
    plog.close()


def test_timestamps_outside_the_topics_bounds_are_rejected_one_by_one(tmp_path) -> None:
    """message.timestamp.before.max.ms / after.max.ms: Kafka's INVALID_TIMESTAMP per record."""
    config = TopicConfig.default(message_timestamp_before_max_ms=1_000, message_timestamp_after_max_ms=500)
    plog = PartitionLog(tmp_path / "t-0", "t", 0, config, recover=False)
    now = 10_000_000
    plog.append(encode_batch([b"ok", b"ok"], timestamps=[now - 900, now + 400]), now_ms=now)
    with pytest.raises(RecordValidationError) as e:
        plog.append(encode_batch([b"old", b"fine", b"new"], timestamps=[now - 1_001, now, now + 501]), now_ms=now)
    assert e.value.code == 32 and [i for i, _ in e.value.record_errors] == [0, 2]
    assert "out of range" in e.value.record_errors[0][1]
    assert plog.log_end_offset == 2
    plog.close()
