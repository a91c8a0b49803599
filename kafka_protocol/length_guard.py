"""Check every length prefix and null of a request body before kio decodes it. Sans I/O.

kio's native reader reserves memory for an array from its length prefix before reading the
elements; a malformed request claiming billions of elements makes that allocation fail and aborts
the whole broker process. And kio reads a null (length -1) array or string even where the schema
forbids it, so a handler would meet a None it cannot handle. This walker follows the same schema
(kio's dataclasses) and checks that no array, string or bytes length exceeds the bytes left in the
frame and that nothing non-nullable is null, so such a request is rejected as malformed, for every
API and version, in one place. It decodes nothing and allocates nothing per element.
"""
from __future__ import annotations

import dataclasses
import struct
import types
import typing
from functools import lru_cache
from typing import Any

from kafka_protocol.varint import read_uvarint, skip_tagged_fields
from kio.serial._introspect import EntityField, EntityTupleField, PrimitiveTupleField, classify_field, get_field_tag

_FIXED = {
    "int8": 1, "bool": 1, "uint8": 1, "int16": 2, "uint16": 2, "error_code": 2, "int32": 4, "uint32": 4,
    "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8, "timedelta_i64": 8, "datetime_i64": 8, "uuid": 16,
}
_VAR = {"string", "bytes", "records"}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class LengthError(ValueError):
    """A length prefix points past the end of the request."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Step:
    kind: str  # "fixed", "var", "entity", "array_fixed", "array_var", "array_entity"
    size: int = 0
    kafka_type: str = ""
    nested: type | None = None
    name: str = ""
    nullable: bool = True        # the field itself may be null (for arrays: the array, not its elements)
    elements_nullable: bool = True


def _is_nullable(annotation: Any) -> bool:
    """`X | None` (the field itself may be null)."""
    return typing.get_origin(annotation) in (types.UnionType, typing.Union) and type(None) in typing.get_args(annotation)


def _elements_nullable(annotation: Any) -> bool:
    """For `tuple[X | None, ...]` (or that `| None`): may an element be null?"""
    if _is_nullable(annotation):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    args = typing.get_args(annotation) if typing.get_origin(annotation) is tuple else ()
    return bool(args) and _is_nullable(args[0])


@lru_cache(maxsize=None)
def _plan(cls: type) -> tuple[tuple[_Step, ...], bool] | None:
    """The walk for `cls`, or None when a field type is unknown (then the guard stands aside)."""
    steps = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if get_field_tag(f) is not None:
            continue  # tagged fields live in the tagged-field section, skipped by size
        kind = classify_field(f)
        name = f"{cls.__name__}.{f.name}"
        nullable, elements = _is_nullable(hints[f.name]), _elements_nullable(hints[f.name])
        if isinstance(kind, EntityTupleField):
            steps.append(_Step("array_entity", nested=kind.type_, name=name, nullable=nullable))
        elif isinstance(kind, EntityField):
            steps.append(_Step("entity", nested=kind.type_, name=name))
        else:
            kt = f.metadata.get("kafka_type", "")
            array = isinstance(kind, PrimitiveTupleField)
            if kt in _FIXED:
                steps.append(_Step("array_fixed" if array else "fixed", _FIXED[kt], kt, name=name, nullable=nullable))
            elif kt in _VAR:
                steps.append(_Step("array_var" if array else "var", 0, kt, name=name, nullable=nullable,
                                   elements_nullable=elements if array else nullable))
            else:
                return None
        if steps[-1].nested is not None and _plan(steps[-1].nested) is None:
            return None
    return tuple(steps), bool(getattr(cls, "__flexible__"))


def _need(pos: int, n: int, end: int, what: str) -> int:
    if n < 0 or pos + n > end:
        raise LengthError(f"{what} of {n} bytes runs past the end of the request")
    return pos + n


def _count(buf: Any, pos: int, end: int, flexible: bool) -> tuple[int, int]:
    """An array's element count (-1 for null) and the position after it."""
    if flexible:
        n, pos = read_uvarint(buf, pos, end)
        return n - 1, pos
    _need(pos, 4, end, "array length")
    return _I32.unpack_from(buf, pos)[0], pos + 4


def _null(step: _Step) -> LengthError:
    return LengthError(f"{step.name} is null where the schema forbids it")


def _var(buf: Any, pos: int, end: int, flexible: bool, kafka_type: str, nullable: bool = True,
         step: _Step | None = None) -> int:
    if flexible:
        n, pos = read_uvarint(buf, pos, end)
        n -= 1
    elif kafka_type == "string":
        _need(pos, 2, end, "string length")
        n, pos = _I16.unpack_from(buf, pos)[0], pos + 2
    else:
        _need(pos, 4, end, "bytes length")
        n, pos = _I32.unpack_from(buf, pos)[0], pos + 4
    if n == -1 and not nullable:
        assert step is not None
        raise _null(step)
    return pos if n < 0 else _need(pos, n, end, kafka_type)


def _walk(cls: type, buf: Any, pos: int, end: int) -> int:
    plan = _plan(cls)
    assert plan is not None
    steps, flexible = plan
    for s in steps:
        if s.kind == "fixed":
            pos = _need(pos, s.size, end, s.kafka_type)
        elif s.kind == "var":
            pos = _var(buf, pos, end, flexible, s.kafka_type, s.nullable, s)
        elif s.kind == "entity":
            pos = _walk(s.nested, buf, pos, end)  # type: ignore[arg-type]
        else:
            n, pos = _count(buf, pos, end, flexible)
            if n > end - pos:
                raise LengthError(f"an array of {n} elements cannot fit in {end - pos} bytes")
            if n == -1 and not s.nullable:
                raise _null(s)
            for _ in range(max(n, 0)):
                if s.kind == "array_fixed":
                    pos = _need(pos, s.size, end, s.kafka_type)
                elif s.kind == "array_var":
                    pos = _var(buf, pos, end, flexible, s.kafka_type, s.elements_nullable, s)
                else:
                    pos = _walk(s.nested, buf, pos, end)  # type: ignore[arg-type]
    return skip_tagged_fields(buf, pos, end) if flexible else pos


def check_lengths(schema: type, buf: Any, pos: int) -> None:
    """Raise LengthError when a length prefix in the body at `pos` exceeds what the frame holds, or
    when a field the schema does not allow to be null is null."""
    if _plan(schema) is None:
        return
    _walk(schema, buf, pos, len(buf))
