"""The message browser's rules, pure: where a page of messages starts and how keys and values are shown.

Owns: the browse parameters (partition, offset or timestamp, page size, formats) and their one-line errors, the
check of an offset against the partition's log start and high watermark, and showing bytes as UTF-8, JSON
(pretty) or hex, with the fallback (and a note saying so) when the bytes are not what was asked for.
Times are parsed by kafka_protocol.timestamps, the one rule for times users type.
Must never: talk to a broker (cluster_view reads the records), or drop bytes it cannot decode.
"""
from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Sequence

from kafka_protocol.timestamps import FORMS, parse_instant_ms
from pylog.console.errors import BadInput

FORMATS = ("utf8", "json", "hex")
FORMAT_NAMES = {"utf8": "UTF-8", "json": "JSON", "hex": "hex"}
DEFAULT_LIMIT = 20
MAX_LIMIT = 500
TIMESTAMP_TYPES = {0: "", 1: "CreateTime", 2: "LogAppendTime"}


@dataclass(frozen=True)
class Record:
    """One record as read: the bytes untouched."""

    partition: int
    offset: int
    timestamp_ms: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


@dataclass(frozen=True)
class Shown:
    """Bytes as the page shows them: the text, the format it is in, and a note when that is not the one asked."""

    text: str
    shown_as: str           # utf8, json, hex or null
    note: str | None = None


@dataclass(frozen=True)
class ShownRecord:
    offset: int
    time: str
    timestamp_type: str
    key: Shown
    value: Shown
    headers: tuple[tuple[str, Shown], ...]


@dataclass(frozen=True)
class Browse:
    """A request for a page of messages: from `offset`, or from the first record at or after `timestamp_ms`, or
    (neither) the last `limit` records."""

    offset: int | None
    timestamp_ms: int | None
    limit: int
    key_format: str
    value_format: str


def _hex(data: bytes) -> str:
    return data.hex(" ")


def show(data: bytes | None, fmt: str) -> Shown:
    """`data` in `fmt`; bytes that are not UTF-8 fall back to hex, text that is not JSON to UTF-8, each saying so."""
    if data is None:
        return Shown("null", "null")
    if fmt == "hex":
        return Shown(_hex(data), "hex")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return Shown(_hex(data), "hex", "not UTF-8: shown as hex")
    if fmt == "utf8":
        return Shown(text, "utf8")
    try:
        parsed = json.loads(text)
    except ValueError:
        return Shown(text, "utf8", "not JSON: shown as UTF-8")
    return Shown(json.dumps(parsed, indent=2, ensure_ascii=False, sort_keys=False), "json")


def iso_time(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 in UTC (what the timestamp field accepts back); empty when unknown."""
    if ms < 0:
        return ""
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z")


def show_records(records: Sequence[Record], key_format: str, value_format: str) -> list[ShownRecord]:
    return [ShownRecord(r.offset, iso_time(r.timestamp_ms), TIMESTAMP_TYPES.get(r.timestamp_type, ""),
                        show(r.key, key_format), show(r.value, value_format),
                        tuple((name, show(v, value_format)) for name, v in r.headers)) for r in records]


def _whole(text: str, what: str) -> int:
    value = text.strip()
    if not value.lstrip("-").isdigit():
        raise BadInput(f"bad {what} '{text}': expected a whole number")
    return int(value)


def parse_partition(text: str, topic: str, count: int) -> int:
    partition = _whole(text, "partition")
    if not 0 <= partition < count:
        last = f"0 to {count - 1}" if count > 1 else "0"
        raise BadInput(f"topic '{topic}' has no partition {partition}: it has {count} partition"
                       f"{'s' if count != 1 else ''}, pick {last}")
    return partition


def parse_format(text: str | None, what: str) -> str:
    if text is None or text == "":
        return "utf8"
    if text not in FORMATS:
        raise BadInput(f"bad {what} '{text}': choose one of {', '.join(FORMATS)}")
    return text


def parse_browse(offset: str | None, timestamp: str | None, limit: str | None, key_format: str | None,
                 value_format: str | None) -> Browse:
    """The browse parameters of a query string (empty ones count as absent)."""
    offset, timestamp = offset or None, timestamp or None
    if offset is not None and timestamp is not None:
        raise BadInput("give either an offset or a timestamp, not both")
    start = _whole(offset, "offset") if offset is not None else None
    if start is not None and start < 0:
        raise BadInput(f"bad offset '{offset}': offsets start at 0")
    at: int | None = None
    if timestamp is not None:
        try:
            at = parse_instant_ms(timestamp)
        except ValueError:
            raise BadInput(f"bad timestamp '{timestamp}': expected {FORMS}") from None
    size = _whole(limit, "limit") if limit else DEFAULT_LIMIT
    if not 1 <= size <= MAX_LIMIT:
        raise BadInput(f"bad limit {size}: show between 1 and {MAX_LIMIT} messages")
    return Browse(start, at, size, parse_format(key_format, "key format"), parse_format(value_format, "value format"))


def check_offset(topic: str, partition: int, offset: int, log_start: int, high_watermark: int) -> None:
    """An offset must lie in [log start, high watermark] (the high watermark itself: nothing there yet)."""
    where = f"{topic}-{partition}"
    if offset > high_watermark:
        raise BadInput(f"offset {offset} is beyond the end of {where} (high watermark {high_watermark}): "
                       f"pick an offset from {log_start} to {high_watermark}")
    if offset < log_start:
        raise BadInput(f"offset {offset} is before the start of {where} (log start {log_start}, older records "
                       f"were deleted): pick an offset from {log_start} to {high_watermark}")


def last_page_start(log_start: int, high_watermark: int, limit: int) -> int:
    """Where the page of the latest `limit` records starts."""
    return max(log_start, high_watermark - limit)
