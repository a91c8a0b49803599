"""Sans-I/O protocol code, tested by feeding bytes: framing, request headers, response building, fetch encoding."""
from __future__ import annotations

import datetime
import io
import struct

import pytest
from hypothesis import given, strategies as st
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v11.response import FetchResponse as FetchResponseV11
from kio.schema.fetch.v12.response import FetchResponse as FetchResponseV12
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.response import ProduceResponse
from kio.serial import entity_reader, entity_writer

from kafka_protocol.api_keys import ApiKey
from kafka_protocol.builder import build, ms
from kafka_protocol.codec import (
    MalformedRequestError,
    decode_request,
    encode_response,
    peek_header,
    request_schema,
    response_header,
)
from kafka_protocol.fetch_response import PartitionData, encode_fetch_response
from kafka_protocol.framing import FrameError, FrameReceiver, RequestMemoryPool, encode_frame


def _request_frame(body, correlation_id=42, client_id="me") -> bytes:
    cid = client_id.encode()
    header = struct.pack(">hhih", body.__api_key__, body.__version__, correlation_id, len(cid)) + cid
    if body.__flexible__:
        header += b"\x00"
    buf = io.BytesIO()
    entity_writer(type(body))(buf, body)
    return header + buf.getvalue()


def _feed(r: FrameReceiver, data: bytes, chunk: int) -> list[tuple[bytes, bool]]:
    """Deliver `data` through the receiver's own buffers, at most `chunk` bytes per read, as the kernel would."""
    out: list[tuple[bytes, bool]] = []
    pos = 0
    while pos < len(data):
        into = r.buffer()
        n = min(chunk, len(into), len(data) - pos)
        into[:n] = data[pos:pos + n]
        pos += n
        out += [(bytes(f), owned) for f, owned in r.received(n)]
    return out


def test_frames_split_across_reads_are_reassembled():
    data = encode_frame(b"hello") + encode_frame(b"world!")
    r = FrameReceiver(max_bytes=100)
    assert _feed(r, data[:3], 3) == []
    assert _feed(r, data[3:12], 9) == [(b"hello", False)]
    assert _feed(r, data[12:], 100) == [(b"world!", False)] and r.buffered == 0


@given(st.lists(st.binary(max_size=300), max_size=40), st.integers(1, 700), st.integers(64, 4096))
def test_any_stream_of_frames_in_any_read_sizes_comes_out_whole_and_in_order(payloads, chunk, buffer_bytes):
    r = FrameReceiver(max_bytes=1000, buffer_bytes=buffer_bytes)
    got = _feed(r, b"".join(encode_frame(p) for p in payloads), chunk)
    assert [f for f, _ in got] == payloads
    assert all(owned == (len(f) + 4 > buffer_bytes) for f, owned in got), "only frames that cannot fit get their own"
    assert r.buffered == 0


def test_many_frames_in_one_read_and_a_frame_bigger_than_the_buffer():
    small = [encode_frame(b"x" * i) for i in range(50)]
    big = b"B" * 10_000
    r = FrameReceiver(max_bytes=20_000, buffer_bytes=4096)
    got = _feed(r, b"".join(small) + encode_frame(big) + encode_frame(b"after"), 100_000)
    assert [f for f, _ in got] == [b"x" * i for i in range(50)] + [big, b"after"]
    assert dict((f[:1], owned) for f, owned in got)[b"B"] is True, "the big frame got a buffer of its own"


def test_oversized_and_negative_frames_are_errors_before_any_allocation():
    r = FrameReceiver(max_bytes=100)
    with pytest.raises(FrameError, match="exceeds socket.request.max.bytes=100"):
        _feed(r, encode_frame(b"ok") + struct.pack(">i", 101), 1000)
    with pytest.raises(FrameError, match="negative"):
        _feed(FrameReceiver(max_bytes=100), struct.pack(">i", -1), 4)
    frames = []
    r = FrameReceiver(max_bytes=100)
    into = r.buffer()
    data = encode_frame(b"ok") + struct.pack(">i", 2**31 - 1)
    into[:len(data)] = data
    with pytest.raises(FrameError):
        for f, _ in r.received(len(data)):
            frames.append(bytes(f))
    assert frames == [b"ok"], "the frames before a bad prefix are delivered first"


@given(st.binary(max_size=2000), st.integers(1, 300))
def test_garbage_gives_frames_or_a_frame_error_never_anything_else(data, chunk):
    r = FrameReceiver(max_bytes=500, buffer_bytes=256)
    try:
        for f, _ in _feed(r, data, chunk):
            assert len(f) <= 500
    except FrameError:
        pass


def test_a_flexible_request_decodes_with_header_v2():
    body = MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name="t"),), allow_auto_topic_creation=True,
                           include_topic_authorized_operations=False)
    frame = _request_frame(body)
    assert peek_header(frame) == (3, 12, 42)
    req = decode_request(frame, request_schema(ApiKey.METADATA, 12))
    assert req.client_id == "me" and req.correlation_id == 42
    assert req.body.topics[0].name == "t"


def test_null_client_id_is_accepted():
    body = MetadataRequest(topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    frame = bytearray(_request_frame(body, client_id=""))
    frame[8:10] = struct.pack(">h", -1)
    assert decode_request(bytes(frame), request_schema(ApiKey.METADATA, 12)).client_id is None


def test_garbage_bodies_are_malformed_with_the_correlation_id():
    frame = struct.pack(">hhih", 3, 12, 77, 0) + b"\x00\xff\xff\xff\xff\xff"
    with pytest.raises(MalformedRequestError) as e:
        decode_request(frame, request_schema(ApiKey.METADATA, 12))
    assert e.value.correlation_id == 77


def test_short_header_is_malformed():
    with pytest.raises(MalformedRequestError):
        peek_header(b"\x00\x03")


def test_unknown_api_has_no_schema():
    assert request_schema(999, 0) is None


def test_response_header_version_follows_flexibility_except_api_versions():
    assert response_header(3, 5, flexible=True) == struct.pack(">i", 5) + b"\x00"
    assert response_header(3, 5, flexible=False) == struct.pack(">i", 5)
    assert response_header(18, 5, flexible=True) == struct.pack(">i", 5)


def test_build_fits_a_dict_to_the_version_and_converts_types():
    resp = build(ProduceResponse, {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 7, "log_append_time": 1000, "not_a_field": 1}]}], "throttle_time": 5})
    p = resp.responses[0].partition_responses[0]
    assert p.error_code is ErrorCode.none and p.base_offset == 7
    assert ms(p.log_append_time) == 1000 and resp.throttle_time == datetime.timedelta(milliseconds=5)
    assert p.error_message is None and p.record_errors == ()
    frame = encode_response(0, 9, resp)
    assert struct.unpack_from(">ii", frame) == (len(frame) - 4, 9)


def test_build_names_a_missing_required_field():
    with pytest.raises(TypeError, match="base_offset"):
        build(ProduceResponse, {"responses": [{"name": "t", "partition_responses": [{"index": 0}]}]})


class _Region:
    def __init__(self, data: bytes) -> None:
        self.data, self.fd, self.position, self.length = data, -1, 0, len(data)


def _assemble(chunks) -> bytes:
    return b"".join(c if isinstance(c, bytes) else c.data for c in chunks)


@pytest.mark.parametrize("version,schema", [(11, FetchResponseV11), (12, FetchResponseV12)])
def test_fetch_response_with_file_regions_decodes_as_kafka_does(version, schema):
    records = b"R" * 100
    chunks = encode_fetch_response(version, 3, [
        ("a", [PartitionData(0, 0, 10, 10, 0, _Region(records)), PartitionData(1, 1, -1, -1, -1, None)]),
        ("b", [PartitionData(0, 0, 5, 5, 2, b"")]),
    ])
    frame = _assemble(chunks)
    assert struct.unpack_from(">i", frame)[0] == len(frame) - 4
    assert struct.unpack_from(">i", frame, 4)[0] == 3
    body_at = 8 + (1 if version >= 12 else 0)
    resp, size = entity_reader(schema)(frame, body_at)
    assert body_at + size == len(frame)
    a0, a1 = resp.responses[0].partitions
    assert (a0.high_watermark, a0.records) == (10, records)
    assert a1.error_code == ErrorCode.offset_out_of_range and a1.records is None
    assert resp.responses[1].partitions[0].log_start_offset == 2


def test_an_absurd_array_length_is_malformed_not_a_crash():
    # Metadata v12 (flexible): topics is a compact array; claim 2**31 topics in a 10-byte body
    frame = struct.pack(">hhih", 3, 12, 5, 0) + b"\x00" + b"\xff\xff\xff\xff\x07" + b"\x00" * 5
    with pytest.raises(MalformedRequestError, match="cannot fit"):
        decode_request(frame, request_schema(ApiKey.METADATA, 12))
    # a non-flexible int32 array length (ListOffsets v1 topics)
    frame = struct.pack(">hhih", 2, 1, 6, 0) + struct.pack(">ii", -1, 2**31 - 1)
    with pytest.raises(MalformedRequestError):
        decode_request(frame, request_schema(ApiKey.LIST_OFFSETS, 1))


@pytest.mark.parametrize("api_key,version", [(3, v) for v in range(0, 13)] + [(1, v) for v in range(4, 13)]
                         + [(19, 7), (32, 4), (44, 1), (11, 9), (8, 8), (9, 8), (12, 4), (14, 5)])
def test_the_length_guard_accepts_every_valid_request_kio_writes(api_key, version):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from kafka_protocol.length_guard import check_lengths

    schema = request_schema(api_key, version)

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.from_type(schema))
    def check(entity):
        buf = io.BytesIO()
        entity_writer(schema)(buf, entity)
        check_lengths(schema, buf.getvalue(), 0)  # must not raise on a valid body

    check()


def test_an_announced_frame_costs_memory_only_as_its_bytes_arrive():
    pool = RequestMemoryPool(1 << 30)
    r = FrameReceiver(max_bytes=100 << 20, pool=pool)
    _feed(r, struct.pack(">i", 100 << 20) + b"x" * 1000, 1 << 20)
    assert pool.reserved == 100 << 20, "the announced size is reserved up front (accounting only)"
    assert r.allocated < 2 << 20, "but only about what arrived is allocated"
    payload = bytes(range(256)) * 8192          # 2 MiB
    r2 = FrameReceiver(max_bytes=4 << 20, pool=pool)
    got = _feed(r2, encode_frame(payload), 64 * 1024)
    assert got == [(payload, True)]
    r.close()
    pool.release(len(payload))                 # the consumer gives an owned frame's reservation back
    assert pool.reserved == 0


def test_a_frame_waits_for_memory_and_goes_on_when_another_releases_it():
    pool = RequestMemoryPool(3 << 20)
    first = FrameReceiver(max_bytes=10 << 20, pool=pool)
    second = FrameReceiver(max_bytes=10 << 20, pool=pool)
    assert _feed(first, struct.pack(">i", 2 << 20) + b"a" * 10, 100) == []
    payload = b"b" * (2 << 20)
    data = encode_frame(payload)
    into = second.buffer()
    into[:1000] = data[:1000]
    assert list(second.received(1000)) == [] and second.waiting_for_memory, "3 MiB pool, 2 MiB taken"
    woken: list[bool] = []
    pool.wait(lambda: woken.append(True))
    first.close()                               # e.g. the slow connection was closed
    assert woken == [True] and pool.reserved == 0
    assert list(second.retry()) == [] and not second.waiting_for_memory and pool.reserved == 2 << 20
    assert _feed(second, data[1000:], 1 << 16) == [(payload, True)]


def test_a_frame_larger_than_the_pool_still_passes_alone():
    pool = RequestMemoryPool(1 << 20)
    r = FrameReceiver(max_bytes=10 << 20, pool=pool)
    payload = b"z" * (3 << 20)
    assert _feed(r, encode_frame(payload), 1 << 20) == [(payload, True)]
