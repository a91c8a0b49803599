"""The hand-written Produce codec is byte-for-byte kio's, for every version the broker serves (v3-v9)."""
from __future__ import annotations

import datetime
import importlib
import io
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from kafka_protocol.api_keys import ApiKey
from kafka_protocol.builder import build
from kafka_protocol.codec import MalformedRequestError, decode_request, request_schema
from kafka_protocol.varint import VarintError
from kafka_protocol.produce_codec import (
    PartitionResult,
    ProduceDecodeError,
    decode_produce,
    encode_produce_request,
    encode_produce_response,
)

VERSIONS = range(3, 10)


def _schemas(version: int):
    req = importlib.import_module(f"kio.schema.produce.v{version}.request")
    resp = importlib.import_module(f"kio.schema.produce.v{version}.response")
    return req, resp


def _kio_request_body(version: int, transactional_id, acks, timeout_ms, topics) -> bytes:
    req, _ = _schemas(version)
    entity = req.ProduceRequest(
        transactional_id=transactional_id, acks=acks, timeout=datetime.timedelta(milliseconds=timeout_ms),
        topic_data=tuple(req.TopicProduceData(name=name, partition_data=tuple(
            req.PartitionProduceData(index=i, records=r) for i, r in parts)) for name, parts in topics))
    buf = io.BytesIO()
    entity_writer(req.ProduceRequest)(buf, entity)
    return buf.getvalue()


def _kio_response_frame(version: int, correlation_id: int, topics, throttle_ms: int) -> bytes:
    _, resp = _schemas(version)
    entity = build(resp.ProduceResponse, {"throttle_time": throttle_ms, "responses": [
        {"name": name, "partition_responses": [
            {"index": r.index, "error_code": r.error_code, "base_offset": r.base_offset,
             "log_append_time": r.log_append_time, "log_start_offset": r.log_start_offset,
             "error_message": r.error_message} for r in parts]} for name, parts in topics]})
    buf = io.BytesIO()
    entity_writer(resp.ProduceResponse)(buf, entity)
    header = struct.pack(">i", correlation_id) + (b"\x00" if version >= 9 else b"")
    payload = header + buf.getvalue()
    return struct.pack(">i", len(payload)) + payload


_names = st.text(min_size=0, max_size=12)
_records = st.one_of(st.none(), st.binary(max_size=200))
_topics = st.lists(st.tuples(_names, st.lists(st.tuples(st.integers(-2**31, 2**31 - 1), _records), max_size=4)),
                   max_size=4)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(txn=st.one_of(st.none(), _names), acks=st.integers(-2**15, 2**15 - 1),
       timeout_ms=st.integers(-2**31, 2**31 - 1), topics=_topics)
def test_requests_decode_like_kio(version, txn, acks, timeout_ms, topics):
    body = _kio_request_body(version, txn, acks, timeout_ms, topics)
    ours, end = decode_produce(b"pad" + body, 3, version)
    assert end == 3 + len(body)
    req, _ = _schemas(version)
    theirs, size = entity_reader(req.ProduceRequest)(body, 0)
    assert size == len(body)
    assert (ours.transactional_id, ours.acks, ours.timeout) == (theirs.transactional_id, theirs.acks, theirs.timeout)
    assert [(t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
            for t in ours.topic_data] == \
           [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in theirs.topic_data]


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(txn=st.one_of(st.none(), _names), acks=st.sampled_from([-1, 0, 1]), timeout_ms=st.integers(0, 2**31 - 1),
       topics=st.lists(st.tuples(_names, st.lists(st.tuples(st.integers(0, 2**31 - 1), st.binary(max_size=50)),
                                                   max_size=3)), max_size=3))
def test_the_clients_request_frames_are_kios(version, txn, acks, timeout_ms, topics):
    frame = b"".join(bytes(p) for p in encode_produce_request(version, 9, "sink", acks, timeout_ms, topics, txn))
    header = struct.pack(">hhih", 0, version, 9, 4) + b"sink" + (b"\x00" if version >= 9 else b"")
    assert frame == struct.pack(">i", len(frame) - 4) + header + _kio_request_body(version, txn, acks, timeout_ms, topics)


_results = st.builds(
    PartitionResult, index=st.integers(-2**31, 2**31 - 1), error_code=st.sampled_from([0, 2, 46, 87]),
    base_offset=st.integers(-1, 2**62), log_append_time=st.one_of(st.just(-1), st.integers(0, 2**42)),
    log_start_offset=st.integers(-1, 2**62), error_message=st.one_of(st.none(), st.text(max_size=30)))


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(correlation_id=st.integers(-2**31, 2**31 - 1), throttle_ms=st.integers(0, 2**31 - 1),
       topics=st.lists(st.tuples(_names, st.lists(_results, max_size=4)), max_size=4))
def test_responses_encode_like_kio(version, correlation_id, throttle_ms, topics):
    assert encode_produce_response(version, correlation_id, topics, throttle_ms) == \
        _kio_response_frame(version, correlation_id, topics, throttle_ms)


@pytest.mark.parametrize("version", VERSIONS)
def test_an_error_message_is_sent_from_v8(version):
    frame = encode_produce_response(version, 1, [("t", [PartitionResult(0, ErrorCode.corrupt_message,
                                                                        error_message="bad crc")])])
    assert (b"bad crc" in frame) == (version >= 8)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_truncated_or_garbled_requests_fail_cleanly_where_kio_fails(version, data):
    body = bytearray(_kio_request_body(version, "tx", 1, 100, [("topic", [(0, b"abc"), (1, None)])]))
    cut = data.draw(st.integers(0, len(body)))
    flips = data.draw(st.lists(st.tuples(st.integers(0, max(len(body) - 1, 0)), st.integers(0, 255)), max_size=3))
    for i, v in flips:
        if i < len(body):
            body[i] = v
    garbled = bytes(body[:cut])
    req, _ = _schemas(version)
    try:
        theirs = entity_reader(req.ProduceRequest)(garbled, 0)[0]
        kio_ok = theirs.topic_data is not None and all(t.partition_data is not None for t in theirs.topic_data)
    except Exception:  # noqa: BLE001 - any kio failure
        kio_ok = False
    try:
        decode_produce(garbled, 0, version)
        ours_ok = True
    except (ProduceDecodeError, VarintError):
        ours_ok = False
    if version < 9:   # v9: kio rejects unknown tagged fields, which Kafka (and we) skip
        assert ours_ok == kio_ok


def test_decode_request_uses_the_produce_codec_and_keeps_the_header():
    body = _kio_request_body(9, None, -1, 30_000, [("t", [(0, b"batch")])])
    frame = struct.pack(">hhih", 0, 9, 5, 2) + b"me" + b"\x00" + body
    req = decode_request(memoryview(frame), request_schema(ApiKey.PRODUCE, 9))
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (0, 9, 5, "me")
    assert bytes(req.body.topic_data[0].partition_data[0].records) == b"batch"
    with pytest.raises(MalformedRequestError) as e:
        decode_request(frame[:-3], request_schema(ApiKey.PRODUCE, 9))
    assert e.value.correlation_id == 5
