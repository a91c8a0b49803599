"""The hand-written Fetch response codec (kafka_protocol.fetch_response) and the client's side of the
wire (kafka_protocol.client_codec), tested by feeding bytes.

Round trips at every Fetch version the codec covers (v4-v12) with kio as an independent oracle both
ways: kio reads what `encode_fetch_response` writes, and `decode_fetch_response` reads what kio
writes, aborted transactions and v12 tagged fields included. Record sets must come back as views of
the received buffer, never copies. Hostile bodies (every truncation, random mutations, random bytes,
absurd lengths) give `FetchResponseError` and nothing else. Requests the client encodes decode with
the broker's own request decoder to the same header and fields.
"""
from __future__ import annotations

import dataclasses
import datetime
import io
import random
import struct
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

from kafka_protocol import fetch_request
from kafka_protocol.api_keys import ApiKey
from kafka_protocol.fetch_request import FetchPartition
from kafka_protocol.client_codec import (
    ResponseError,
    encode_request,
    list_offsets_request,
    log_dirs_request,
    metadata_request,
    response_body_start,
)
from kafka_protocol.codec import decode_request, request_schema
from kafka_protocol.fetch_response import (
    FetchResponseError,
    PartitionData,
    decode_fetch_response,
    encode_fetch_response,
)
from kafka_protocol.varint import write_uvarint

VERSIONS = range(4, 13)
RECORDS = bytes(range(256)) * 3


def _topics() -> list[tuple[str, list[PartitionData]]]:
    return [
        ("events", [
            PartitionData(0, 0, high_watermark=1000, last_stable_offset=990, log_start_offset=10, records=RECORDS),
            PartitionData(1, 0, high_watermark=0, last_stable_offset=0, log_start_offset=0, records=b""),
            PartitionData(2, ErrorCode.offset_out_of_range.value, high_watermark=5, last_stable_offset=5,
                          log_start_offset=3, records=None),
            PartitionData(7, ErrorCode.not_leader_or_follower.value),   # all defaults: -1 and no records
        ]),
        ("empty-topic", []),
        ("ünïcode-tøpic", [
            PartitionData(3, ErrorCode.none.value, high_watermark=2**63 - 1, last_stable_offset=2**40,
                          log_start_offset=2**33, records=b"x" * 70_000),   # multi-byte compact length at v12
            PartitionData(2**31 - 1, ErrorCode.unknown_server_error.value, records=b"\x00"),
        ]),
    ]


def _frame(version: int, correlation_id: int = 99, **kw) -> bytes:
    chunks = encode_fetch_response(version, correlation_id, _topics(), **kw)
    assert all(isinstance(c, bytes) for c in chunks)
    frame = b"".join(c for c in chunks if isinstance(c, bytes))
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    return frame


def _body(version: int, **kw) -> bytes:
    """The response body (after size prefix and response header) of the standard topics."""
    frame = memoryview(_frame(version, **kw))[4:]
    return bytes(frame[response_body_start(frame, ApiKey.FETCH, version, 99):])


def _expected(version: int) -> list[tuple]:
    out: list[tuple] = []
    for name, partitions in _topics():
        for p in partitions:
            out.append((name, p.index, p.error_code, p.high_watermark, p.last_stable_offset,
                        p.log_start_offset if version >= 5 else -1, [], p.records))
    return out


def _as_tuples(partitions) -> list[tuple]:
    return [(p.topic, p.index, p.error_code, p.high_watermark, p.last_stable_offset, p.log_start_offset,
             p.aborted_transactions, None if p.records is None else bytes(p.records)) for p in partitions]


# --- round trips ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", VERSIONS)
def test_every_field_survives_a_round_trip(version):
    frame = memoryview(_frame(version, correlation_id=-5, throttle_time_ms=250, error_code=0,
                              session_id=123456))[4:]
    start = response_body_start(frame, ApiKey.FETCH, version, -5)
    assert start == (5 if version >= 12 else 4)   # response header v1 (tagged fields) from v12
    got = decode_fetch_response(frame[start:], version)
    assert got.throttle_time_ms == 250
    assert (got.error_code, got.session_id) == ((0, 123456) if version >= 7 else (0, 0))
    assert _as_tuples(got.partitions) == _expected(version)
    empty = [p for p in got.partitions if p.index == 1][0]
    assert empty.records is not None and len(empty.records) == 0   # empty is not null
    assert [p for p in got.partitions if p.index == 2][0].records is None


@pytest.mark.parametrize("version", range(7, 13))
def test_a_top_level_error_and_session_round_trip_from_v7(version):
    body = _body(version, error_code=ErrorCode.fetch_session_id_not_found.value, session_id=-1)
    got = decode_fetch_response(memoryview(body), version)
    assert (got.error_code, got.session_id) == (ErrorCode.fetch_session_id_not_found.value, -1)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_response_without_topics_round_trips(version):
    chunks = encode_fetch_response(version, 1, [], throttle_time_ms=7)
    assert len(chunks) == 2   # size prefix, then everything
    frame = memoryview(b"".join(chunks))[4:]
    got = decode_fetch_response(frame[response_body_start(frame, ApiKey.FETCH, version, 1):], version)
    assert got.partitions == [] and got.throttle_time_ms == 7


@pytest.mark.parametrize("version", VERSIONS)
def test_kio_reads_what_the_encoder_writes(version):
    schema = load_response_schema(ApiKey.FETCH, version)
    body = _body(version, throttle_time_ms=31, error_code=0, session_id=77)
    resp, size = entity_reader(schema)(body, 0)
    assert size == len(body)
    assert resp.throttle_time == datetime.timedelta(milliseconds=31)
    if version >= 7:
        assert resp.error_code is ErrorCode.none and resp.session_id == 77
    kio_rows = []
    for t in resp.responses:
        for p in t.partitions:
            assert p.aborted_transactions is None, "null for read_uncommitted, as Kafka sends"
            if version >= 11:
                assert p.preferred_read_replica == -1
            kio_rows.append((t.topic, p.partition_index, p.error_code.value, p.high_watermark,
                             p.last_stable_offset, getattr(p, "log_start_offset", -1), [], p.records))
    assert kio_rows == _expected(version)
    assert [t.topic for t in resp.responses] == [name for name, _ in _topics()]
    ours = decode_fetch_response(memoryview(body), version)
    assert _as_tuples(ours.partitions) == kio_rows


def _kio_response(version: int, aborted: tuple | None, records: bytes | None, tagged: bool = False):
    """A kio FetchResponse entity of `version`: two topics, the first partition with `aborted` transactions."""
    cls = load_response_schema(ApiKey.FETCH, version)
    mod = sys.modules[cls.__module__]
    txns = None if aborted is None else tuple(make(mod.AbortedTransaction, producer_id=pid, first_offset=first)
                                              for pid, first in aborted)
    extra = {}
    if tagged and version >= 12:   # non-default tagged fields, which our decoder must skip
        extra = dict(diverging_epoch=mod.EpochEndOffset(epoch=4, end_offset=400),
                     current_leader=mod.LeaderIdAndEpoch(leader_id=2, leader_epoch=9),
                     snapshot_id=mod.SnapshotId(end_offset=12, epoch=1))
    partitions = (
        make(mod.PartitionData, partition_index=0, error_code=ErrorCode.none, high_watermark=500,
             last_stable_offset=450, log_start_offset=20, aborted_transactions=txns, preferred_read_replica=1,
             records=records, **extra),
        make(mod.PartitionData, partition_index=1, error_code=ErrorCode.offset_out_of_range, high_watermark=8,
             last_stable_offset=8, log_start_offset=2, aborted_transactions=(), preferred_read_replica=-1,
             records=None),
    )
    second = make(mod.PartitionData, partition_index=5, error_code=ErrorCode.none, high_watermark=1,
                  last_stable_offset=1, log_start_offset=0, aborted_transactions=((make(mod.AbortedTransaction,
                  producer_id=2**40, first_offset=0)),), preferred_read_replica=-1, records=b"abc")
    entity = make(cls, throttle_time=datetime.timedelta(milliseconds=9), error_code=ErrorCode.none,
                  session_id=3, responses=(make(mod.FetchableTopicResponse, topic="a", partitions=partitions),
                                           make(mod.FetchableTopicResponse, topic="b", partitions=(second,))))
    buf = io.BytesIO()
    entity_writer(cls)(buf, entity)
    return buf.getvalue()


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("aborted", [((7, 100), (9, 150), (-1, 2**62)), (), None], ids=["three", "empty", "null"])
def test_aborted_transactions_written_by_kio_are_read(version, aborted):
    body = _kio_response(version, aborted, RECORDS)
    got = decode_fetch_response(memoryview(body), version)
    assert got.throttle_time_ms == 9
    assert (got.error_code, got.session_id) == ((0, 3) if version >= 7 else (0, 0))
    assert _as_tuples(got.partitions) == [
        ("a", 0, 0, 500, 450, 20 if version >= 5 else -1, list(aborted or ()), RECORDS),
        ("a", 1, 1, 8, 8, 2 if version >= 5 else -1, [], None),
        ("b", 5, 0, 1, 1, 0 if version >= 5 else -1, [(2**40, 0)], b"abc"),
    ]


@pytest.mark.parametrize("records", [b"", None, RECORDS * 100], ids=["empty", "null", "large"])
def test_v12_tagged_fields_written_by_kio_are_skipped(records):
    plain = _kio_response(12, ((7, 100),), records)
    tagged = _kio_response(12, ((7, 100),), records, tagged=True)
    assert len(tagged) > len(plain)   # kio did write the tagged fields
    a, b = (decode_fetch_response(memoryview(x), 12) for x in (plain, tagged))
    assert _as_tuples(a.partitions) == _as_tuples(b.partitions)
    first = b.partitions[0]
    assert first.aborted_transactions == [(7, 100)]
    assert (None if first.records is None else bytes(first.records)) == records


@pytest.mark.parametrize("version", VERSIONS)
def test_records_are_views_of_the_received_buffer_not_copies(version):
    frame = bytearray(_frame(version))
    view = memoryview(frame)[4:]
    got = decode_fetch_response(view[response_body_start(view, ApiKey.FETCH, version, 99):], version)
    records = got.partitions[0].records
    assert records is not None and bytes(records) == RECORDS
    assert records.obj is frame
    at = bytes(frame).find(RECORDS)
    frame[at] ^= 0xFF
    assert records[0] == RECORDS[0] ^ 0xFF   # the view sees the buffer's change
    for p in got.partitions:
        assert p.records is None or p.records.obj is frame


# --- hostile input -------------------------------------------------------------------------------------


def _decode_or_error(body: bytes, version: int) -> None:
    buf = memoryview(bytearray(body))
    try:
        got = decode_fetch_response(buf, version)
    except FetchResponseError:
        return
    for p in got.partitions:
        assert p.records is None or (p.records.obj is buf.obj and len(p.records) <= len(body))


@pytest.mark.parametrize("version", VERSIONS)
def test_every_truncation_is_a_fetch_response_error(version):
    body = _kio_response(version, ((7, 100), (8, 120)), b"r" * 40, tagged=True)
    decode_fetch_response(memoryview(body), version)   # whole: fine
    started = time.monotonic()
    for n in range(len(body)):
        with pytest.raises(FetchResponseError):
            decode_fetch_response(memoryview(body[:n]), version)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("version", VERSIONS)
def test_random_mutations_decode_or_raise_fetch_response_error(version):
    rng = random.Random(version * 7919)
    bodies = [_kio_response(version, ((7, 100),), b"r" * 30, tagged=True),
              _body(version).replace(RECORDS, RECORDS[:20]).replace(b"x" * 70_000, b"x" * 5)]
    started = time.monotonic()
    for i in range(300):
        body = bytearray(bodies[i % 2])
        for _ in range(rng.randint(1, 4)):
            at = rng.randrange(len(body))
            kind = rng.random()
            if kind < 0.6:
                body[at] ^= rng.randint(1, 255)
            elif kind < 0.8:
                body[at] = rng.choice((0x00, 0x7F, 0x80, 0xFF))
            elif kind < 0.9:
                del body[at:at + rng.randint(1, 8)]
            else:
                body[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        _decode_or_error(bytes(body), version)
    assert time.monotonic() - started < 5


@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(version=st.sampled_from(list(VERSIONS)), blob=st.binary(max_size=200))
def test_random_bytes_decode_or_raise_fetch_response_error(version, blob):
    _decode_or_error(blob, version)


def _head(version: int) -> bytes:
    return struct.pack(">i", 0) + (struct.pack(">hi", 0, 0) if version >= 7 else b"")


def _len(n: int, version: int) -> bytes:
    return write_uvarint(n + 1) if version >= 12 else struct.pack(">i", n)


@pytest.mark.parametrize("version", VERSIONS)
def test_absurd_array_lengths_are_refused_at_once(version):
    flexible = version >= 12
    huge = 2**31 - 1
    name = (write_uvarint(2) if flexible else struct.pack(">h", 1)) + b"t"
    partition = struct.pack(">ihqq", 0, 0, 0, 0) + (struct.pack(">q", 0) if version >= 5 else b"")
    cases = {
        "topics": _head(version) + _len(huge, version) + b"\x00" * 32,
        "partitions": _head(version) + _len(1, version) + name + _len(huge, version) + b"\x00" * 32,
        "aborted transactions": _head(version) + _len(1, version) + name + _len(1, version) + partition
        + _len(huge, version) + b"\x00" * 40,
        "topic name": _head(version) + _len(1, version)
        + (write_uvarint(2**31) if flexible else struct.pack(">h", 32767)) + b"t" * 40,
        "records": _head(version) + _len(1, version) + name + _len(1, version) + partition + _len(0, version)
        + (struct.pack(">i", -1) if version >= 11 else b"") + _len(huge, version) + b"\x00" * 40,
    }
    for what, body in cases.items():
        started = time.monotonic()
        with pytest.raises(FetchResponseError):
            decode_fetch_response(memoryview(body), version)
        assert time.monotonic() - started < 0.5, what


def test_a_5_byte_varint_and_an_over_long_one_in_v12():
    body = _head(12) + b"\xff\xff\xff\xff\x0f" + b"\x00" * 10   # 2**32 - 1 compact: far beyond the body
    with pytest.raises(FetchResponseError, match="cannot fit"):
        decode_fetch_response(memoryview(body), 12)
    body = _head(12) + b"\xff" * 6 + b"\x00" * 10
    with pytest.raises(FetchResponseError, match="varint"):
        decode_fetch_response(memoryview(body), 12)


def test_a_null_topic_name_and_invalid_utf8_are_errors():
    body = _head(11) + struct.pack(">ih", 1, -1) + b"\x00" * 40
    with pytest.raises(FetchResponseError, match="null topic name"):
        decode_fetch_response(memoryview(body), 11)
    body = _head(12) + write_uvarint(2) + b"\x00" + b"\x00" * 40   # null compact string
    with pytest.raises(FetchResponseError, match="null topic name"):
        decode_fetch_response(memoryview(body), 12)
    body = _head(11) + struct.pack(">ih", 1, 2) + b"\xff\xfe" + b"\x00" * 40
    with pytest.raises(FetchResponseError, match="malformed"):
        decode_fetch_response(memoryview(body), 11)


@pytest.mark.parametrize("version", [0, 3, 13, 17])
def test_versions_outside_4_to_12_are_refused(version):
    with pytest.raises(FetchResponseError, match="not supported"):
        decode_fetch_response(memoryview(_body(12 if version > 12 else 4)), version)


# --- response headers ----------------------------------------------------------------------------------


def test_response_body_start_checks_the_correlation_id_and_the_header():
    frame = memoryview(_frame(11, correlation_id=41))[4:]
    with pytest.raises(ResponseError, match="correlation id 41 .* waiting for 42"):
        response_body_start(frame, ApiKey.FETCH, 11, 42)
    assert response_body_start(frame, ApiKey.FETCH, 11, 41) == 4
    with pytest.raises(ResponseError, match="no header"):
        response_body_start(frame[:3], ApiKey.FETCH, 11, 41)
    frame12 = memoryview(_frame(12, correlation_id=41))[4:]
    with pytest.raises(ResponseError):
        response_body_start(frame12, ApiKey.FETCH, 12, 40)
    # a v1 header with one tagged field (tag 0, 2 bytes) is skipped; a truncated one is an error
    tagged = struct.pack(">i", 41) + b"\x01\x00\x02ab" + b"body"
    assert response_body_start(memoryview(tagged), ApiKey.FETCH, 12, 41) == 9
    with pytest.raises(ResponseError, match="malformed response header"):
        response_body_start(memoryview(tagged[:7]), ApiKey.FETCH, 12, 41)
    # ApiVersions keeps response header v0 even at flexible versions
    assert response_body_start(memoryview(struct.pack(">i", 41) + b"\x00\x00"), 18, 3, 41) == 4


# --- requests the client encodes, read by the broker's decoder -----------------------------------------


def make(cls: type, **values):
    """A kio entity of `cls` from the values its version has (building oracle responses)."""
    names = {f.name for f in dataclasses.fields(cls)}
    return cls(**{k: v for k, v in values.items() if k in names})


def _decode_frame(frame: bytes, api_key: int, version: int):
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    schema = request_schema(api_key, version)
    assert schema is not None
    return decode_request(frame[4:], schema)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_fetch_request_reaches_the_broker_intact(version):
    body = fetch_request.for_consumer(version, [FetchPartition("events", 3, 2**40 + 5, 1_048_576)], max_wait_ms=500,
                                      max_bytes=52_428_800, read_committed=True)
    req = _decode_frame(encode_request(ApiKey.FETCH, version, 12345, "spark-ü", body), ApiKey.FETCH, version)
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (ApiKey.FETCH, version, 12345, "spark-ü")
    (topic,) = req.body.topics
    (part,) = topic.partitions
    assert topic.topic == "events"
    assert (part.partition, part.fetch_offset, part.partition_max_bytes) == (3, 2**40 + 5, 1_048_576)
    assert req.body.isolation_level == 1 and req.body.max_bytes == 52_428_800
    assert req.body.max_wait == datetime.timedelta(milliseconds=500)


@pytest.mark.parametrize("version", range(4, 13))
def test_a_metadata_request_reaches_the_broker_intact(version):
    body = metadata_request(version, "events")
    req = _decode_frame(encode_request(3, version, 7, "pylog", body), 3, version)
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (3, version, 7, "pylog")
    assert [t.name for t in req.body.topics] == ["events"]
    assert req.body.allow_auto_topic_creation is False


@pytest.mark.parametrize("version", range(1, 8))
def test_a_list_offsets_request_reaches_the_broker_intact(version):
    body = list_offsets_request(version, "events", 4, -2, read_committed=True)
    req = _decode_frame(encode_request(2, version, 2**31 - 1, "", body), 2, version)
    assert (req.api_key, req.api_version, req.correlation_id, req.client_id) == (2, version, 2**31 - 1, "")
    (topic,) = req.body.topics
    (part,) = topic.partitions
    assert topic.name == "events" and (part.partition_index, part.timestamp) == (4, -2)
    assert getattr(req.body, "isolation_level", 1) == 1


@pytest.mark.parametrize("version", range(1, 5))
def test_a_describe_log_dirs_request_reaches_the_broker_intact(version):
    body = log_dirs_request(version, "events", [0, 2])
    req = _decode_frame(encode_request(35, version, 9, "pylog", body), 35, version)
    (topic,) = req.body.topics
    assert (topic.topic, list(topic.partitions)) == ("events", [0, 2])


def test_a_replica_fetch_carries_its_broker_id_session_epochs_and_forgotten_partitions():
    parts = [FetchPartition("events", 0, 500, 1_048_576, current_leader_epoch=7, log_start_offset=100),
             FetchPartition("events", 2, 40, 1_048_576, current_leader_epoch=7, log_start_offset=0)]
    body = fetch_request.for_replica(12, 3, parts, max_wait_ms=500, max_bytes=10_485_760, session_id=77,
                                     session_epoch=4, forgotten=[("old", 1)])
    req = _decode_frame(encode_request(ApiKey.FETCH, 12, 9, "broker-3", body), ApiKey.FETCH, 12)
    assert (req.body.replica_id, req.body.session_id, req.body.session_epoch, req.body.isolation_level) == (3, 77, 4, 0)
    (topic,) = req.body.topics
    assert [(p.partition, p.fetch_offset, p.current_leader_epoch, p.log_start_offset) for p in topic.partitions] == \
        [(0, 500, 7, 100), (2, 40, 7, 0)]
    assert [(t.topic, list(t.partitions)) for t in req.body.forgotten_topics_data] == [("old", [1])]
