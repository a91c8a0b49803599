"""Exact error codes on the wire for what real clients rarely send: bad CRCs, old formats, big batches, replays."""
from __future__ import annotations

import datetime
import struct

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData

from tests.support.bad_batches import CORRUPT, INVALID
from tests.support.batches import encode_batch
from tests.support.clients import consume, create_topic
from tests.support.wire import WireClient


def _produce(w: WireClient, topic: str, records: bytes, acks: int = -1):
    req = ProduceRequest(transactional_id=None, acks=acks, timeout=datetime.timedelta(seconds=5), topic_data=(
        TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=records),)),))
    resp = w.request(req)
    return resp.responses[0].partition_responses[0] if resp is not None else None


@pytest.fixture
def wire(broker_factory):
    b = broker_factory(settings={"message.max.bytes": 10_000})
    create_topic(b.bootstrap, "w")
    with WireClient("127.0.0.1", b.port) as w:
        yield w


def test_a_batch_with_a_bad_crc_is_corrupt_message(wire):
    batch = bytearray(encode_batch([b"hello"]))
    batch[-1] ^= 0xFF
    r = _produce(wire, "w", bytes(batch))
    assert r.error_code == ErrorCode.corrupt_message
    assert _produce(wire, "w", encode_batch([b"ok"])).base_offset == 0, "nothing was appended by the bad request"


def test_message_format_v1_gets_a_clear_error(wire):
    r = _produce(wire, "w", encode_batch([b"old"], magic=1))
    assert r.error_code == ErrorCode.unsupported_for_message_format
    assert "v2" in (r.error_message or "")


def test_a_batch_over_message_max_bytes_is_message_too_large(wire):
    r = _produce(wire, "w", encode_batch([b"x" * 20_000]))
    assert r.error_code == ErrorCode.message_too_large
    assert "10000" in (r.error_message or "")


def test_truncated_records_are_invalid_record_as_in_kafka(wire):
    r = _produce(wire, "w", encode_batch([b"abc"])[:-5])
    assert r.error_code == ErrorCode.invalid_record


def test_unknown_topic_is_unknown_topic_or_partition(wire):
    r = _produce(wire, "no-such-topic", encode_batch([b"abc"]))
    assert r.error_code == ErrorCode.unknown_topic_or_partition


def test_invalid_acks_is_rejected(wire):
    r = _produce(wire, "w", encode_batch([b"abc"]), acks=2)
    assert r.error_code == ErrorCode.invalid_required_acks


def test_idempotent_replay_is_duplicate_and_a_gap_is_out_of_order(wire):
    init = wire.request(InitProducerIdRequest(transactional_id=None, transaction_timeout=datetime.timedelta(seconds=60),
                                              producer_id=-1, producer_epoch=-1))
    assert init.error_code == ErrorCode.none and init.producer_id >= 0
    pid, epoch = init.producer_id, init.producer_epoch

    def batch(seq: int, n: int = 3) -> bytes:
        return encode_batch([b"v"] * n, producer_id=pid, producer_epoch=epoch, base_sequence=seq)

    first = _produce(wire, "w", batch(0))
    assert (first.error_code, first.base_offset) == (ErrorCode.none, 0)
    second = _produce(wire, "w", batch(3))
    assert (second.error_code, second.base_offset) == (ErrorCode.none, 3)
    replay = _produce(wire, "w", batch(0))
    assert replay.error_code == ErrorCode.duplicate_sequence_number
    assert replay.base_offset == 0, "a duplicate reports where the original landed"
    gap = _produce(wire, "w", batch(10))
    assert gap.error_code == ErrorCode.out_of_order_sequence_number
    nxt = _produce(wire, "w", batch(6))
    assert (nxt.error_code, nxt.base_offset) == (ErrorCode.none, 6), "nothing was appended by the rejected requests"


def test_fetch_out_of_range_and_high_watermark(wire):
    _produce(wire, "w", encode_batch([b"a", b"b"]))

    def fetch(offset: int):
        req = FetchRequest(max_wait=datetime.timedelta(milliseconds=0), min_bytes=1, max_bytes=1 << 20,
                           isolation_level=0, session_id=0, session_epoch=-1, forgotten_topics_data=(), rack_id="",
                           topics=(FetchTopic(topic="w", partitions=(FetchPartition(
                               partition=0, fetch_offset=offset, partition_max_bytes=1 << 20, log_start_offset=-1),)),))
        return wire.request(req).responses[0].partitions[0]

    ok = fetch(0)
    assert ok.error_code == ErrorCode.none and ok.high_watermark == 2 and ok.log_start_offset == 0
    assert ok.records is not None and struct.unpack_from(">q", ok.records)[0] == 0
    at_end = fetch(2)
    assert at_end.error_code == ErrorCode.none and not at_end.records
    beyond = fetch(5)
    assert beyond.error_code == ErrorCode.offset_out_of_range


def test_every_kind_of_bad_batch_is_rejected_and_consumers_read_every_good_record(broker_factory):
    """Issue 15: 35 kinds of corrupt/invalid batch, each between good ones, on one partition; a real
    consumer (librdkafka) then reads exactly the good records, in order, with no error."""
    b = broker_factory()
    create_topic(b.bootstrap, "hostile")
    create_topic(b.bootstrap, "compacted", config={"cleanup.policy": "compact"})
    good: list[bytes] = []
    with WireClient("127.0.0.1", b.port) as w:
        for name, make in sorted({**CORRUPT, **INVALID}.items()):
            want = ErrorCode.corrupt_message if name in CORRUPT else ErrorCode.invalid_record
            r = _produce(w, "hostile", make())
            assert r.error_code == want, (name, r.error_code, r.error_message)
            assert r.error_message, name
            value = b"good after " + name.encode()
            assert _produce(w, "hostile", encode_batch([value], keys=[b"k"])).error_code == ErrorCode.none
            good.append(value)
        r = _produce(w, "compacted", encode_batch([b"a", b"b"], keys=[b"k", None]))
        assert r.error_code == ErrorCode.invalid_record
        assert [(e.batch_index, e.batch_index_error_message) for e in r.record_errors] == [
            (1, "Compacted topic cannot accept message without key")]
    msgs = consume(b.bootstrap, "hostile", [0], len(good))
    assert [m.value() for m in msgs] == good
    assert [m.offset() for m in msgs] == list(range(len(good)))
