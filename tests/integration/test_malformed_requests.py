"""Malformed requests found by fuzzing (issue 15), as exact bytes: each gets an error response or a
clean close, never a traceback, and the broker goes on serving.

kio decodes a null (length -1) array or string even where Kafka's schema forbids it; the handlers
then failed on None, dropping the connection with a traceback, and a flood of them grew the log by
about 1 MB/s. The length guard now checks nullability for every API and version before decoding.
"""
from __future__ import annotations

from kafka_protocol.api_keys import ApiKey
import struct

import pytest
from kio.index import load_response_schema
from kio.serial import entity_reader

from tests.support.wire import WireClient

NULL32 = struct.pack(">i", -1)


def _header(api_key: int, version: int, flexible: bool = False) -> bytes:
    return struct.pack(">hhih", api_key, version, 77, 1) + b"t" + (b"\x00" if flexible else b"")


def _string(s: bytes) -> bytes:
    return struct.pack(">h", len(s)) + s


NULL_WHERE_FORBIDDEN = {
    "Fetch v4 topics": _header(1, 4) + struct.pack(">iiiib", -1, 100, 1, 1 << 20, 0) + NULL32,
    "JoinGroup v5 protocols": _header(11, 5) + _string(b"g") + struct.pack(">ii", 10_000, 10_000) + _string(b"")
    + b"\xff\xff" + _string(b"consumer") + NULL32,
    "OffsetCommit v2 topics": _header(8, 2) + _string(b"g") + struct.pack(">i", -1) + _string(b"m")
    + struct.pack(">q", -1) + NULL32,
    "CreateTopics v2 topics": _header(19, 2) + NULL32 + struct.pack(">ib", 1000, 0),
    "CreateTopics v4 assignment broker ids": _header(19, 4) + struct.pack(">i", 1) + _string(b"t")
    + struct.pack(">ihi", -1, -1, 1) + struct.pack(">i", 0) + NULL32 + struct.pack(">i", 0) + struct.pack(">ib", 1000, 0),
    "ListOffsets v1 topics": _header(2, 1) + struct.pack(">i", -1) + NULL32,
    "Metadata v9 topic name": _header(3, 9, True) + b"\x02" + b"\x00" + b"\x00" + b"\x01\x00\x00",
}


@pytest.mark.parametrize("name", sorted(NULL_WHERE_FORBIDDEN))
def test_a_null_where_the_schema_forbids_it_closes_cleanly(pylog_broker, name):
    frame = NULL_WHERE_FORBIDDEN[name]
    with WireClient("127.0.0.1", pylog_broker.port) as w:
        w.send_raw(struct.pack(">i", len(frame)) + frame)
        assert w.read_frame() is None, "a request that cannot be parsed closes its connection, as in Kafka"
    assert pylog_broker.alive()
    log = pylog_broker.log_text()
    assert "is null where the schema forbids it" in log
    assert "Traceback" not in log


@pytest.mark.parametrize("version", [10, 11])
@pytest.mark.parametrize("topic_id", [b"\x00" * 16, b"\x00" * 15 + b"\x01"], ids=["zero-id", "unknown-id"])
def test_a_null_topic_name_in_metadata_gets_invalid_request(pylog_broker, version, topic_id):
    # topics: one entry (topic_id, name null), allow_auto_topic_creation, (v10/11) two flags. Found by
    # fuzzing: with an unknown id the answer's name was null, which v10/v11 cannot encode.
    body = b"\x02" + topic_id + b"\x00" + b"\x00" + b"\x01" + b"\x00\x00" + b"\x00"
    frame = _header(3, version, True) + body
    with WireClient("127.0.0.1", pylog_broker.port) as w:
        w.send_raw(struct.pack(">i", len(frame)) + frame)
        resp = w.read_frame()
    assert resp is not None
    decoded, _ = entity_reader(load_response_schema(ApiKey.METADATA, version))(resp, 5)
    assert [t.error_code for t in decoded.topics] == [42]    # INVALID_REQUEST
    assert "Traceback" not in pylog_broker.log_text()


def test_a_flood_of_bad_requests_is_logged_once_per_condition(pylog_broker):
    frame = NULL_WHERE_FORBIDDEN["Fetch v4 topics"]
    before = len(pylog_broker.log_text())
    for _ in range(200):
        with WireClient("127.0.0.1", pylog_broker.port) as w:
            w.send_raw(struct.pack(">i", len(frame)) + frame)
            assert w.read_frame() is None
    grown = len(pylog_broker.log_text()) - before
    assert grown < 2_000, f"the log grew by {grown} bytes for 200 identical bad requests"
