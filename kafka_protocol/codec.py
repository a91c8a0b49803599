"""Request and response codecs: Kafka request headers v1/v2 and API bodies through kio. Sans I/O.

Owns: turning a request frame into a `Request` (header fields + the kio body entity) and a
response entity into frame bytes with the right response header version. Knows nothing about
sockets or broker state. Body schemas come from kio, which is generated from Kafka's own JSON
message definitions; the ZooKeeper-mode controller's APIs, which kio lacks, from `controller_schemas`.
"""
from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import DecodeError

from kafka_protocol.api_keys import ApiKey
from kafka_protocol.controller_schemas import SCHEMAS as CONTROLLER_SCHEMAS
from kafka_protocol.schema_fixes import RESPONSES as FIXED_RESPONSES
from kafka_protocol.length_guard import LengthError, check_lengths
from kafka_protocol.produce_codec import ProduceDecodeError, decode_produce
from kafka_protocol.varint import skip_tagged_fields

HEADER_FIXED = struct.Struct(">hhi")
INT16 = struct.Struct(">h")
INT32 = struct.Struct(">i")


class MalformedRequestError(Exception):
    """The frame cannot be decoded. `correlation_id` is set when the header itself was readable."""

    def __init__(self, message: str, correlation_id: int | None = None) -> None:
        super().__init__(message)
        self.correlation_id = correlation_id


@dataclass(slots=True)   # not frozen: a frozen dataclass's __init__ costs ~1.5 us more per request
class Request:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any
    size: int


@lru_cache(maxsize=None)
def request_schema(api_key: int, api_version: int) -> type | None:
    if (api_key, api_version) in CONTROLLER_SCHEMAS:
        return CONTROLLER_SCHEMAS[api_key, api_version][0]
    try:
        return load_request_schema(api_key, api_version)
    except (KioIndexError, ImportError, AttributeError, ValueError):
        return None


@lru_cache(maxsize=None)
def response_schema(api_key: int, api_version: int) -> type:
    if (api_key, api_version) in CONTROLLER_SCHEMAS:
        return CONTROLLER_SCHEMAS[api_key, api_version][1]
    if (api_key, api_version) in FIXED_RESPONSES:
        return FIXED_RESPONSES[api_key, api_version]
    return load_response_schema(api_key, api_version)


@lru_cache(maxsize=None)
def entity_decoder(cls: type) -> Any:
    return entity_reader(cls)


@lru_cache(maxsize=None)
def entity_encoder(cls: type) -> Any:
    return entity_writer(cls)


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) from the fixed start of any request header."""
    if len(frame) < HEADER_FIXED.size:
        raise MalformedRequestError(f"request of {len(frame)} bytes is shorter than a request header")
    return HEADER_FIXED.unpack_from(frame, 0)


def decode_request(frame: bytes | memoryview, schema: type) -> Request:
    """Decode a whole request frame whose header names `schema` (look it up with `request_schema`).

    Produce bodies go through the hand-written `produce_codec` (their record sets are views of
    `frame`); every other API through kio. A memoryview frame must stay unchanged while the
    request is in use.
    """
    api_key, api_version, correlation_id = peek_header(frame)
    pos = HEADER_FIXED.size
    try:
        (n,) = INT16.unpack_from(frame, pos)
        pos += 2
        client_id = None
        if n >= 0:
            client_id = str(frame[pos : pos + n], "utf-8", "replace")
            pos += n
            if pos > len(frame):
                raise MalformedRequestError("client id runs past the end of the request", correlation_id)
        if getattr(schema, "__flexible__"):
            pos = skip_tagged_fields(frame, pos)
        if api_key == ApiKey.PRODUCE:
            body, end = decode_produce(frame, pos, api_version)
            size = end - pos
        else:
            check_lengths(schema, frame, pos)  # kio aborts the process on absurd array lengths
            body, size = entity_decoder(schema)(frame, pos)
    except MalformedRequestError as e:
        e.correlation_id = correlation_id
        raise
    except (DecodeError, ProduceDecodeError, LengthError, struct.error, ValueError, TypeError, IndexError, OverflowError, UnicodeDecodeError) as e:
        raise MalformedRequestError(f"cannot decode {schema.__name__} v{api_version}: {e}", correlation_id) from None
    except Exception as e:  # kio's native reader may raise other errors on garbage
        raise MalformedRequestError(f"cannot decode {schema.__name__} v{api_version}: {e!r}", correlation_id) from None
    if pos + size > len(frame):
        raise MalformedRequestError(f"{schema.__name__} v{api_version} runs past the end of its frame", correlation_id)
    # Trailing bytes are ignored, as Kafka's generated parsers do (some clients send them).
    return Request(api_key, api_version, correlation_id, client_id, body, len(frame))


def response_header(api_key: int, correlation_id: int, flexible: bool) -> bytes:
    """Response header v0, or v1 (with empty tagged fields) for flexible versions except ApiVersions."""
    if flexible and api_key != ApiKey.API_VERSIONS:
        return INT32.pack(correlation_id) + b"\x00"
    return INT32.pack(correlation_id)


def encode_body(entity: Any) -> bytes:
    buf = io.BytesIO()
    schema: Any = type(entity)
    entity_encoder(schema)(buf, entity)
    return buf.getvalue()


def encode_response(api_key: int, correlation_id: int, entity: Any) -> bytes:
    """A complete response frame (size prefix included) for a kio response entity."""
    payload = response_header(api_key, correlation_id, entity.__flexible__) + encode_body(entity)
    return INT32.pack(len(payload)) + payload
