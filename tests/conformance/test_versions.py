"""The version matrix: every (API, version) pylog advertises is one Kafka defines and pylog answers.

For each advertised pair, a minimal request (every field at its zero value, built from Kafka's own
message schemas as kio generates them) goes to pylog and to Apache Kafka; pylog must answer with a
response that Kafka's schema for that version decodes, echoing the correlation id, whenever Kafka
answers at all. ApiVersions must advertise exactly the handlers that exist, each range inside Kafka's.
"""
from __future__ import annotations

import dataclasses
import datetime
import io
import struct
import typing
import uuid
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.serial import entity_reader, entity_writer

from broker.apis.registry import API_TABLE
from tests.support.wire import WireClient

ADVERTISED = [(key, v) for key, api in sorted(API_TABLE.items()) for v in range(api.min_version, api.max_version + 1)]
# Zero values that would make a broker keep the request without answering, replaced per field name.
_OVERRIDES: dict[str, Any] = {"acks": -1, "timeout": datetime.timedelta(seconds=1),
                              "max_wait": datetime.timedelta(milliseconds=0), "session_epoch": -1}


def _zero(annotation: Any, name: str) -> Any:
    if name in _OVERRIDES:
        return _OVERRIDES[name]
    if typing.get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType")):
        return None                                        # nullable: null
    if typing.get_origin(annotation) is tuple:
        return ()
    if dataclasses.is_dataclass(annotation):
        return minimal(annotation)
    base = getattr(annotation, "__supertype__", annotation)
    for kind, value in ((bool, False), (int, 0), (str, ""), (bytes, b""), (float, 0.0),
                        (uuid.UUID, uuid.UUID(int=0)), (datetime.timedelta, datetime.timedelta(0))):
        if isinstance(base, type) and issubclass(base, kind):
            return kind(value) if kind not in (uuid.UUID, datetime.timedelta) else value
    return 0


def minimal(schema: type) -> Any:
    """An instance of a kio request (or nested entity) with every field at its zero value."""
    hints = typing.get_type_hints(schema)
    return schema(**{f.name: _zero(hints[f.name], f.name) for f in dataclasses.fields(schema) if f.init})


def _frame(key: int, version: int, correlation_id: int) -> bytes:
    schema = load_request_schema(key, version)
    buf = io.BytesIO()
    entity_writer(schema)(buf, minimal(schema))
    header = struct.pack(">hhih", key, version, correlation_id, 4) + b"conf"
    if schema.__flexible__:
        header += b"\x00"
    payload = header + buf.getvalue()
    return struct.pack(">i", len(payload)) + payload


def _answer(port: int, key: int, version: int, timeout: float = 30.0) -> bytes | None:
    """The response frame, or None when the broker closed the connection or (Kafka) never answered."""
    with WireClient("127.0.0.1", port, timeout=timeout) as w:
        w.send_raw(_frame(key, version, 4242))
        try:
            return w.read_frame()
        except TimeoutError:
            return None


@pytest.fixture(scope="module")
def kafka_ranges(brokers) -> dict[int, tuple[int, int]]:
    with WireClient("127.0.0.1", brokers[1].port) as w:
        resp = w.request(ApiVersionsRequest(client_software_name="conformance", client_software_version="1"))
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def test_api_versions_advertises_exactly_the_handlers_each_within_kafkas_range(brokers, kafka_ranges):
    with WireClient("127.0.0.1", brokers[0].port) as w:
        resp = w.request(ApiVersionsRequest(client_software_name="conformance", client_software_version="1"))
    advertised = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert advertised == {key: (api.min_version, api.max_version) for key, api in API_TABLE.items()}
    for key, (low, high) in advertised.items():
        assert key in kafka_ranges, f"API {key} is not one Kafka 3.9 has"
        k_low, k_high = kafka_ranges[key]
        assert k_low <= low and high <= k_high, f"API {key}: pylog {low}-{high} outside Kafka's {k_low}-{k_high}"


@pytest.mark.parametrize("key, version", ADVERTISED, ids=[f"{API_TABLE[k].name}-v{v}" for k, v in ADVERTISED])
def test_each_advertised_version_answers_a_minimal_request(brokers, kafka_ranges, key, version):
    kafka = _answer(brokers[1].port, key, version, timeout=5)   # Kafka 3.9 never answers OffsetFetch v8 with no groups
    ours = _answer(brokers[0].port, key, version)
    if kafka is not None:
        assert ours is not None, "Kafka answers this request; pylog closed the connection"
    if ours is None:
        return      # both refuse it (a required field left empty): a clean close
    assert struct.unpack_from(">i", ours)[0] == 4242
    schema = load_response_schema(key, version)
    flexible_header = schema.__flexible__ and key != 18
    decoded, size = entity_reader(schema)(ours, 4 + (1 if flexible_header else 0))
    assert decoded is not None and 4 + size + (1 if flexible_header else 0) == len(ours), \
        "the whole response is one body of Kafka's schema for this version"
