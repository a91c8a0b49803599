"""Build version-specific kio entities from plain dicts. Sans I/O.

Handlers describe a response once, as nested dicts with Kafka's field names, and `build` fits it to
the negotiated version's kio class: fields that version lacks are dropped, missing ones take the
schema default, ints become timedeltas/datetimes/error codes where the schema says so.
"""
from __future__ import annotations

import dataclasses
import datetime
import typing
import uuid
from functools import lru_cache
from typing import Any, Mapping, cast

from kio.schema.errors import ErrorCode

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)


@dataclasses.dataclass(frozen=True, slots=True)
class _FieldSpec:
    name: str
    kafka_type: str | None
    nested: type | None  # entity class for tuple-of-entities or single nested entity
    is_tuple: bool
    has_default: bool
    optional: bool


@lru_cache(maxsize=None)
def _fields(cls: type) -> tuple[_FieldSpec, ...]:
    hints = typing.get_type_hints(cls)
    specs = []
    for f in dataclasses.fields(cls):
        hint = hints.get(f.name)
        nested = None
        is_tuple = False
        origin = typing.get_origin(hint)
        tuple_hint = hint if origin is tuple else next(   # `tuple[X, ...] | None`: a nullable array
            (a for a in typing.get_args(hint) if typing.get_origin(a) is tuple), None)
        if tuple_hint is not None:
            is_tuple = True
            arg = typing.get_args(tuple_hint)[0]
            if isinstance(arg, type) and dataclasses.is_dataclass(arg):
                nested = cast(type, arg)
        else:
            for cand in (hint, *typing.get_args(hint)):
                if isinstance(cand, type) and dataclasses.is_dataclass(cand):
                    nested = cast(type, cand)
        has_default = f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING
        optional = type(None) in typing.get_args(hint)
        specs.append(_FieldSpec(f.name, f.metadata.get("kafka_type"), nested, is_tuple, has_default, optional))
    return tuple(specs)


def _convert(spec: _FieldSpec, value: Any) -> Any:
    kt = spec.kafka_type
    if value is None and spec.optional:
        return None
    if spec.nested is not None:
        if spec.is_tuple:
            return tuple(v if dataclasses.is_dataclass(v) else build(spec.nested, v) for v in value)
        if value is None or dataclasses.is_dataclass(value):
            return value
        return build(spec.nested, value)
    if spec.is_tuple:
        return tuple(value)
    if kt in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kt == "datetime_i64" and isinstance(value, int):
        return None if value < 0 else _EPOCH + datetime.timedelta(milliseconds=value)
    if kt == "error_code" and not isinstance(value, ErrorCode):
        return ErrorCode(int(value))
    return value


def build(cls: type, data: Mapping[str, Any]) -> Any:
    """Instantiate kio entity `cls` from `data`; raises TypeError naming a required field that is missing."""
    kwargs = {}
    for spec in _fields(cls):
        if spec.name in data:
            kwargs[spec.name] = _convert(spec, data[spec.name])
        elif not spec.has_default:
            if spec.optional:
                kwargs[spec.name] = None
            elif spec.is_tuple:
                kwargs[spec.name] = ()
            elif spec.kafka_type == "uuid":
                kwargs[spec.name] = uuid.UUID(int=0)
            elif spec.kafka_type == "bool":
                kwargs[spec.name] = False
            elif spec.kafka_type == "error_code":
                kwargs[spec.name] = ErrorCode.none
            else:
                raise TypeError(f"{cls.__qualname__} v{getattr(cls, '__version__', '?')} needs field {spec.name!r}")
    return cls(**kwargs)


def ms(value: datetime.timedelta | datetime.datetime | int | None) -> int:
    """Milliseconds from a kio timedelta/datetime field (or an int passed through)."""
    if value is None:
        return -1
    if isinstance(value, datetime.timedelta):
        return int(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return int((value - _EPOCH).total_seconds() * 1000)
    return int(value)
