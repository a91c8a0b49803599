"""Valid requests for every API version pylog advertises, and a structure-aware mutator over them.

A *payload* here is a request frame without its 4-byte size prefix: request header v1 (v2 for
flexible versions), then the body. `build_payload(api_key, version)` makes a valid one from kio's
schema (plausible values: topic "fuzz", group "fuzz-group", partition 0, short timeouts, a valid record
batch). `mutate(payload, rng)` is the structure-aware mutator shared by `fuzz_requests.py` (as
atheris's custom mutator) and `live_broker.py` (black box): it decodes the payload with kio (after the
broker's own length guard, so the mutator cannot trip kio's unchecked allocations), changes fields
by their types (boundary integers, odd or internal names, nulls, empty/duplicated/dropped array
elements, other record batches), moves the body to another advertised version of the same API, or
falls back to byte-level edits (bit flips, boundary length prefixes, truncation, insertion).

Names in `PROTECTED` (the live run's healthy topic) are never produced by the mutator.
"""
from __future__ import annotations

import dataclasses
import datetime
import io
import random
import struct
import types
import typing
import uuid
from functools import lru_cache
from typing import Any, Callable

from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field

from broker.apis.registry import API_TABLE
from kafka_protocol.codec import request_schema
from kafka_protocol.length_guard import check_lengths
from kafka_protocol.varint import skip_tagged_fields
from tests.support.bad_batches import CORRUPT, INVALID
from tests.support.batches import encode_batch

ADVERTISED: list[tuple[int, int]] = [(a.key, v) for a in API_TABLE.values()
                                     for v in range(a.min_version, a.max_version + 1)]
VERSIONS: dict[int, list[int]] = {a.key: list(range(a.min_version, a.max_version + 1)) for a in API_TABLE.values()}
PROTECTED: set[str] = set()

_HEAD = struct.Struct(">hhi")
_INT_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
NAMES = ("fuzz", "fuzz-a", "fuzz.b", "fuzz_c", "fuzz-group", "", "a" * 249, "a" * 250, "t" * 300, ".", "..",
         "bad/name", "bad name", "é-topic", "__consumer_offsets", "\x00", "fuzz-new", "range", "consumer",
         "retention.ms", "cleanup.policy", "max.message.bytes", "segment.bytes", "compact", "-1", "99999999999")


# --- valid record batches -------------------------------------------------------------------------

@lru_cache(maxsize=None)
def batch_pool() -> tuple[bytes, ...]:
    """Valid batches of every codec and a few shapes, then every catalogued bad one."""
    good = [encode_batch([b"fuzz-value"], keys=[b"k"])]
    for codec in ("gzip", "snappy", "snappy-xerial", "lz4", "zstd"):
        good.append(encode_batch([b"v%d" % i for i in range(5)], keys=[b"k%d" % i for i in range(5)], codec=codec))
    good.append(encode_batch([b"h"], record_headers=[(b"hk", b"hv"), (b"n", None)]))
    good.append(encode_batch([None, b""], keys=[b"a", None]))
    good.append(encode_batch([b"x" * 3000], codec="zstd"))
    good.append(encode_batch([b"p0", b"p1"], producer_id=1, producer_epoch=0, base_sequence=0))
    good.append(encode_batch([b"a"]) + encode_batch([b"b"], codec="gzip"))
    good.append(encode_batch([b"lat"], log_append_time=True))
    bad = [make() for make in list(CORRUPT.values()) + list(INVALID.values())]
    return tuple(good + bad)


# --- building entities ----------------------------------------------------------------------------

@lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _nullable(cls: type, f: dataclasses.Field) -> bool:  # type: ignore[type-arg]
    ann = _hints(cls)[f.name]
    return typing.get_origin(ann) in (typing.Union, types.UnionType) and type(None) in typing.get_args(ann)


def _ms(n: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=n)


_STRINGS = {"group_id": "fuzz-group", "member_id": "", "protocol_type": "consumer", "key": "retention.ms",
            "value": "3600000", "resource_name": "fuzz", "topic": "fuzz", "committed_metadata": "",
            "client_software_name": "pylog-fuzz", "client_software_version": "1.0", "rack_id": ""}
_INTS = {"acks": -1, "count": 2, "num_partitions": 1, "replication_factor": 1, "min_bytes": 1,
         "partition_max_bytes": 1 << 20, "resource_type": 2, "timestamp": -1, "generation_id": -1,
         "max_bytes": 1 << 20, "session_epoch": 0}
_TIMES = {"max_wait": 10, "timeout": 1000, "session_timeout": 10_000, "transaction_timeout": 60_000}
_ARRAYS: dict[str, tuple[Any, ...]] = {"partitions": (0,), "partition_indexes": (0,), "topic_names": ("fuzz",),
                                       "groups": ("fuzz-group",), "coordinator_keys": ("fuzz-group",),
                                       "groups_names": ("fuzz-group",), "configuration_keys": ("retention.ms",)}
_EMPTY = {"assignments", "forgotten_topics_data"}    # arrays a plausible request leaves empty


def _primitive(owner: type, name: str, kafka_type: str) -> Any:
    if kafka_type == "string":
        if name == "name":
            return "range" if "Protocol" in owner.__name__ else "retention.ms" if "Config" in owner.__name__ else "fuzz"
        return _STRINGS.get(name, "x")
    if kafka_type == "records":
        return encode_batch([b"fuzz-value"], keys=[b"k"])
    if kafka_type == "bytes":
        return b""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return uuid.UUID(int=0)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return _ms(_TIMES.get(name, 1000))
    if kafka_type == "float64":
        return 0.0
    return _INTS.get(name, 0)


def _field_default(cls: type, f: dataclasses.Field) -> Any:  # type: ignore[type-arg]
    kind = classify_field(f)
    if f.name in _TIMES:
        return _primitive(cls, f.name, f.metadata["kafka_type"])
    if isinstance(kind, EntityTupleField):
        return () if f.name in _EMPTY else (build_entity(kind.type_),)
    if isinstance(kind, EntityField):
        return build_entity(kind.type_)
    if isinstance(kind, PrimitiveTupleField):
        if f.name in _ARRAYS:
            return _ARRAYS[f.name]
        return (_primitive(cls, f.name, f.metadata.get("kafka_type", "")),) if f.name != "broker_ids" else ()
    if f.default is not dataclasses.MISSING and f.name not in _INTS and f.name not in _STRINGS:
        return f.default
    return _primitive(cls, f.name, f.metadata.get("kafka_type", ""))


def build_entity(cls: type) -> Any:
    """A valid, plausible entity of the kio class `cls` (request bodies and their nested structs)."""
    return cls(**{f.name: _field_default(cls, f) for f in dataclasses.fields(cls)})


def convert(value: Any, cls: type) -> Any:
    """`value` (an entity of another version of the same message) as an entity of `cls`: fields with
    the same name are kept, the others built."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        if not hasattr(value, f.name):
            kwargs[f.name] = _field_default(cls, f)
            continue
        v = getattr(value, f.name)
        kind = classify_field(f)
        if v is None and not _nullable(cls, f):
            v = _field_default(cls, f)
        elif isinstance(kind, EntityField) and v is not None:
            v = convert(v, kind.type_)
        elif isinstance(kind, EntityTupleField) and v is not None:
            v = tuple(convert(x, kind.type_) for x in v)
        kwargs[f.name] = v
    return cls(**kwargs)


# --- payloads -------------------------------------------------------------------------------------

def encode_payload(entity: Any, correlation_id: int = 1, client_id: str | None = "pylog-fuzz",
                   version: int | None = None) -> bytes:
    """Request header (v2 when the body is flexible) + body; no size prefix."""
    cid = None if client_id is None else client_id.encode()
    head = _HEAD.pack(entity.__api_key__, entity.__version__ if version is None else version, correlation_id)
    head += struct.pack(">h", -1) if cid is None else struct.pack(">h", len(cid)) + cid
    if entity.__flexible__:
        head += b"\x00"
    buf = io.BytesIO()
    entity_writer(type(entity))(buf, entity)
    return head + buf.getvalue()


def build_payload(api_key: int, version: int, correlation_id: int = 1) -> bytes:
    schema = request_schema(api_key, version)
    assert schema is not None, (api_key, version)
    return encode_payload(build_entity(schema), correlation_id)


@dataclasses.dataclass
class Parsed:
    api_key: int
    version: int
    correlation_id: int
    client_id: str | None
    entity: Any
    trailing: bytes


def decode_payload(payload: bytes) -> Parsed | None:
    """The kio entity of a payload of an advertised version, or None. The broker's length guard runs
    first: kio's reader must never see an absurd length (it would abort this process)."""
    try:
        api_key, version, corr = _HEAD.unpack_from(payload, 0)
        if version not in VERSIONS.get(api_key, ()):
            return None
        schema = request_schema(api_key, version)
        (n,) = struct.unpack_from(">h", payload, 8)
        pos = 10 + max(n, 0)
        if pos > len(payload):
            return None
        client_id = None if n < 0 else payload[10:pos].decode("utf-8", "replace")
        if schema.__flexible__:
            pos = skip_tagged_fields(payload, pos)
        check_lengths(schema, payload, pos)
        entity, size = entity_reader(schema)(payload, pos)
        return Parsed(api_key, version, corr, client_id, entity, payload[pos + size:])
    except Exception:  # noqa: BLE001 - anything undecodable is simply not mutated structurally
        return None


# --- structure-aware mutation ---------------------------------------------------------------------

Path = tuple[tuple[str, int | None], ...]


def _slots(entity: Any, path: Path = ()) -> list[tuple[Path, type, dataclasses.Field]]:  # type: ignore[type-arg]
    out = []
    cls = type(entity)
    for f in dataclasses.fields(cls):
        here = path + ((f.name, None),)
        out.append((here, cls, f))
        kind = classify_field(f)
        v = getattr(entity, f.name)
        if isinstance(kind, EntityField) and v is not None:
            out += _slots(v, here)
        elif isinstance(kind, EntityTupleField) and v:
            for i, item in enumerate(v):
                out += _slots(item, path + ((f.name, i),))
    return out


def _replace_at(entity: Any, path: Path, value: Any) -> Any:
    name, index = path[0]
    if len(path) == 1:
        return dataclasses.replace(entity, **{name: value})
    child = getattr(entity, name)
    if index is None:
        return dataclasses.replace(entity, **{name: _replace_at(child, path[1:], value)})
    items = list(child)
    items[index] = _replace_at(items[index], path[1:], value)
    return dataclasses.replace(entity, **{name: tuple(items)})


def _get_at(entity: Any, path: Path) -> Any:
    for name, index in path:
        entity = getattr(entity, name)
        if index is not None:
            entity = entity[index]
    return entity


def _int_value(rng: random.Random, kafka_type: str, current: int) -> int:
    bits = _INT_RANGES.get(kafka_type, 31)
    lo, hi = -(1 << bits), (1 << bits) - 1
    choice = rng.randrange(8)
    if choice == 0:
        return rng.choice([0, 1, -1, 2, lo, hi, lo + 1, hi - 1])
    if choice == 1:
        return rng.randint(lo, hi)
    if choice == 2:
        return max(lo, min(hi, current + rng.randint(-3, 3)))
    if choice == 3 and bits > 8:
        return rng.choice([0x7F, 0x80, 0xFF, 0x100, 0x7FFF, 0x8000, 0xFFFF, 1 << 20, 1 << 24])
    return rng.randint(-2, 64)


def _string_value(rng: random.Random) -> str:
    r = rng.randrange(4)
    if r == 0:
        return "".join(chr(rng.choice([rng.randint(32, 126), rng.randint(0, 0x10FFF)])) for _ in range(rng.randint(0, 20)))
    s = rng.choice(NAMES)
    return s if s not in PROTECTED else "fuzz"


def _bytes_value(rng: random.Random, kafka_type: str) -> bytes:
    if kafka_type == "records" and rng.random() < 0.8:
        pool = batch_pool()
        b = rng.choice(pool)
        if rng.random() < 0.3:
            b = b + rng.choice(pool)
        if rng.random() < 0.3:
            b = byte_mutate(b, rng)
        return b
    return rng.randbytes(rng.choice([0, 1, 4, 16, 100]))


def _new_value(rng: random.Random, owner: type, f: dataclasses.Field, current: Any) -> Any:  # type: ignore[type-arg]
    kind = classify_field(f)
    nullable = _nullable(owner, f)
    kafka_type = f.metadata.get("kafka_type", "")
    if nullable and rng.random() < 0.1:
        return None
    if isinstance(kind, EntityField):
        return build_entity(kind.type_)
    if isinstance(kind, (EntityTupleField, PrimitiveTupleField)):
        items = list(current or ())
        r = rng.randrange(6)
        if r == 0:
            return ()
        if r == 1 and items:
            return tuple(items + [rng.choice(items)] * rng.choice([1, 1, 2, 20]))
        if r == 2 and items:
            del items[rng.randrange(len(items))]
            return tuple(items)
        if r == 3 and items:
            rng.shuffle(items)
            return tuple(items)
        if isinstance(kind, EntityTupleField):
            return tuple(items + [build_entity(kind.type_)])
        one = _primitive(owner, f.name, kafka_type) if not items else items[0]
        return tuple(items + [_scalar(rng, kafka_type, one)])
    return _scalar(rng, kafka_type, current)


def _scalar(rng: random.Random, kafka_type: str, current: Any) -> Any:
    if kafka_type == "bool":
        return not current
    if kafka_type in _INT_RANGES:
        return _int_value(rng, kafka_type, current if isinstance(current, int) else 0)
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return _ms(rng.choice([0, 1, -1, 10, 100, 1000, 30_000, (1 << 31) - 1, -(1 << 31), rng.randint(-5, 5000)]))
    if kafka_type == "string":
        return _string_value(rng)
    if kafka_type in ("bytes", "records"):
        return _bytes_value(rng, kafka_type)
    if kafka_type == "uuid":
        return rng.choice([uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128)), uuid.UUID(int=1)])
    if kafka_type == "float64":
        return rng.choice([0.0, -1.0, 1e308, 0.5])
    return current


def mutate_entity(entity: Any, rng: random.Random, edits: int = 0) -> Any:
    """`entity` with 1-3 fields changed by type (may hold values its writer cannot encode)."""
    for _ in range(edits or rng.choice([1, 1, 1, 2, 3])):
        slots = _slots(entity)
        if not slots:
            return entity
        path, owner, f = rng.choice(slots)
        entity = _replace_at(entity, path, _new_value(rng, owner, f, _get_at(entity, path)))
    return entity


_BOUNDARY_INTS = [b"\xff\xff\xff\xff", b"\x7f\xff\xff\xff", b"\x80\x00\x00\x00", b"\x00\x00\x00\x00",
                  b"\x00\x00\x00\x01", b"\xff\xff", b"\x7f\xff", b"\x80\x00", b"\x00\x00", b"\x00\x01", b"\xff",
                  b"\x80", b"\x7f", b"\x00", b"\x01", b"\x02", b"\xff\xff\xff\xff\x0f", b"\x80\x80\x80\x80\x80"]


def byte_mutate(data: bytes, rng: random.Random) -> bytes:
    """One byte-level edit: flip, set, boundary integer at a random place, insert, delete, duplicate."""
    b = bytearray(data)
    r = rng.randrange(7)
    if not b or r == 0:
        at = rng.randint(0, len(b))
        b[at:at] = rng.randbytes(rng.randint(1, 8))
    elif r == 1:
        i = rng.randrange(len(b))
        b[i] ^= 1 << rng.randrange(8)
    elif r == 2:
        b[rng.randrange(len(b))] = rng.randrange(256)
    elif r == 3:
        v = rng.choice(_BOUNDARY_INTS)
        at = rng.randrange(len(b))
        b[at:at + len(v)] = v
    elif r == 4:
        at = rng.randrange(len(b))
        del b[at:at + rng.randint(1, 16)]
    elif r == 5:
        at = rng.randrange(len(b))
        n = rng.randint(1, 32)
        b[at:at] = b[at:at + n]
    else:
        del b[rng.randint(0, len(b)):]
    return bytes(b)


def mutate(payload: bytes, rng: random.Random, max_size: int = 1 << 20,
           byte_mutator: Callable[[bytes], bytes] | None = None) -> bytes:
    """A mutated payload: structure-aware when `payload` decodes, byte-level otherwise (or by chance).

    `byte_mutator` replaces the built-in byte edits (atheris passes libFuzzer's `Mutate`)."""
    bytes_edit: Callable[[bytes], bytes] = byte_mutator or (lambda d: byte_mutate(d, rng))
    parsed = decode_payload(payload) if rng.random() < 0.75 else None
    out: bytes | None = None
    if parsed is not None:
        r = rng.randrange(10)
        try:
            if r < 6:
                out = encode_payload(mutate_entity(parsed.entity, rng), parsed.correlation_id, parsed.client_id)
            elif r == 6:
                other = rng.choice(VERSIONS[parsed.api_key])
                schema = request_schema(parsed.api_key, other)
                out = encode_payload(convert(parsed.entity, schema), parsed.correlation_id, parsed.client_id)
            elif r == 7:
                # the body as it is, under another version of the same API: a version mix-up
                out = payload[:2] + struct.pack(">h", rng.choice(VERSIONS[parsed.api_key])) + payload[4:]
            elif r == 8:
                client = rng.choice([None, "", "c" * 1000, "é", _string_value(rng)])
                out = encode_payload(parsed.entity, rng.randint(-(1 << 31), (1 << 31) - 1), client)
            else:
                out = encode_payload(mutate_entity(parsed.entity, rng), parsed.correlation_id, parsed.client_id)
                out = bytes_edit(out)
        except Exception:  # noqa: BLE001 - the new value does not encode: edit bytes instead
            out = None
    if out is None:
        out = payload
        for _ in range(rng.choice([1, 1, 2, 4])):
            out = bytes_edit(out)
    return out[:max_size]


def seed_payloads() -> list[bytes]:
    """One valid payload per advertised API at its lowest and its highest version."""
    out = []
    for api in API_TABLE.values():
        for v in sorted({api.min_version, api.max_version}):
            out.append(build_payload(api.key, v))
    return out
